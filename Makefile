# Shortcuts; the scripts are the source of truth (a fresh machine may not have make).
.PHONY: setup demo test bench lint
setup: ; scripts/setup.sh
demo: ; scripts/demo.sh
test: ; scripts/test.sh
bench: setup ; .venv/bin/python benchmarks/sandbox.py && .venv/bin/python benchmarks/mcp_face.py && .venv/bin/python benchmarks/proxy.py && .venv/bin/python benchmarks/search.py && .venv/bin/python benchmarks/tokens.py
lint: ; .venv/bin/ruff check src tests benchmarks && .venv/bin/mypy
