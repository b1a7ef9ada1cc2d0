# Shortcuts; the scripts are the source of truth (a fresh machine may not have make).
.PHONY: setup demo test bench lint
setup: ; scripts/setup.sh
demo: ; scripts/demo.sh
test: ; scripts/test.sh
bench: setup ; .venv/bin/python benchmarks/run_all.py $(BENCH_ARGS)
lint: ; .venv/bin/ruff check src tests benchmarks && .venv/bin/mypy
