"""What the start of ``serve`` leaves for the cyclic garbage collector (cli/serving.py): pure logic."""

from __future__ import annotations

import gc

from mcp_codemode.cli import serving


def test_what_the_start_made_is_kept_out_of_every_later_collection() -> None:
    made_at_start = [[index] for index in range(1000)]  # lists: containers the collector always tracks
    try:
        serving.settle_heap()
        frozen = gc.get_freeze_count()
        assert frozen >= len(made_at_start)  # in the permanent generation: no full collection scans them again
        gc.collect()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
