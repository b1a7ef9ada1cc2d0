"""What the start of ``serve`` leaves for the cyclic garbage collector (cli/serving.py): pure logic."""

from __future__ import annotations

import gc

from mcp_codemode.cli import serving


def test_what_the_start_made_is_kept_out_of_every_later_collection() -> None:
    made_at_start = [[index] for index in range(1000)]  # lists: containers the collector always tracks
    try:
        serving.settle_heap()
        assert gc.get_freeze_count() >= len(made_at_start)  # in the permanent generation
        gc.collect()
        # Not the freeze count, which falls whenever any frozen object is freed (other threads of this process free
        # theirs): what a full collection would scan is its generations, and the start's objects are in none of them.
        scanned = {id(found) for generation in range(3) for found in gc.get_objects(generation=generation)}
        assert not scanned & {id(made) for made in made_at_start}
    finally:
        gc.unfreeze()
