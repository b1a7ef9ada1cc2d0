"""Session-file reads share one bridge-wide budget of bytes held in host memory, and each read has a cap.

Without it every read held its whole file (and its encoding) at once, however many ran: four sessions reading eight
32 MiB files each peaked at 1.9 GB. The rule is tested on its own first (first come first served, a bounded wait,
room given back by a cancelled read), then with real bubblewrap sessions read concurrently.
"""

from __future__ import annotations

import asyncio
import hashlib
import tracemalloc

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.face.workspace_files import file_contents
from mcp_codemode.runs import session_files
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.runs.read_budget import ReadBudget, ReadBudgetExceeded
from mcp_codemode.runs.session_files import SessionFileError
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.settings import Settings
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.clients import require_bubblewrap

MIB = 1 << 20


async def _hold(budget: ReadBudget, size: int, name: str, order: list[str], release: asyncio.Event) -> None:
    async with budget.hold(size, name):
        order.append(name)
        await release.wait()


def test_reads_wait_in_line_for_room_and_never_hold_more_than_the_budget() -> None:
    async def main() -> tuple[list[str], int, int]:
        budget = ReadBudget(10, wait=600)
        order: list[str] = []
        gates = {name: asyncio.Event() for name in "abcd"}
        sizes = {"a": 6, "b": 6, "c": 2, "d": 4}  # c would fit beside a, but b came first
        tasks = [asyncio.create_task(_hold(budget, sizes[name], name, order, gates[name])) for name in "abcd"]
        await asyncio.sleep(0)
        assert order == ["a"] and budget.in_flight == 6
        gates["a"].set()
        while len(order) < 3:
            await asyncio.sleep(0)
        assert order == ["a", "b", "c"] and budget.in_flight == 8
        for gate in gates.values():
            gate.set()
        await asyncio.gather(*tasks)
        return order, budget.peak, budget.in_flight

    order, peak, left = asyncio.run(main())
    assert order == ["a", "b", "c", "d"] and peak <= 10 and left == 0


def test_a_read_that_waits_too_long_is_refused_with_the_setting_and_a_cancelled_one_gives_its_room_back() -> None:
    async def main() -> str:
        budget = ReadBudget(10, wait=0.01)
        release = asyncio.Event()
        holder = asyncio.create_task(_hold(budget, 8, "big", [], release))
        await asyncio.sleep(0)
        with pytest.raises(ReadBudgetExceeded) as refused:
            async with budget.hold(5, "reading 'late.csv'"):
                pass
        budget.wait = 600
        waiting = asyncio.create_task(_hold(budget, 5, "cancelled", [], asyncio.Event()))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        release.set()
        await holder
        assert budget.in_flight == 0
        async with budget.hold(10, "all of it"):
            assert budget.in_flight == 10
        return str(refused.value)

    message = asyncio.run(main())
    assert "reading 'late.csv' needs 5 bytes of host memory" in message, message
    assert "held 8 of the bridge's" in message and "MCP_BRIDGE_FILE_READ_BUDGET" in message, message


def test_the_per_read_cap_cannot_be_above_the_budget() -> None:
    env = {"MCP_BRIDGE_FILE_READ_MAX": "64m", "MCP_BRIDGE_FILE_READ_BUDGET": "32m"}
    with pytest.raises(SettingsError, match=r"MCP_BRIDGE_FILE_READ_MAX \(64m\) is above MCP_BRIDGE_FILE_READ_BUDGET"):
        Settings.load(env=env)
    loaded = Settings.load(env={"MCP_BRIDGE_FILE_READ_MAX": "4m", "MCP_BRIDGE_FILE_READ_BUDGET": "8m"})
    assert (loaded.file_read_max, loaded.file_read_budget) == (4 * MIB, 8 * MIB)
    assert (Settings.load(env={}).file_read_max, Settings.load(env={}).file_read_budget) == (32 * MIB, 64 * MIB)


SESSIONS, READS_PER_SESSION, FILE_BYTES = 4, 4, 3 * MIB
BUDGET, CAP = 8 * MIB, 4 * MIB


@pytest.mark.backend
def test_concurrent_reads_across_real_sessions_stay_within_the_budget() -> None:
    """Four bubblewrap sessions, four reads each at once, of 3 MiB files: 48 MiB asked for, 8 MiB of budget.

    Each read is taken as the resource handler takes it (``reading``, then the MCP encoding inside the hold). What
    is asserted is the accounting; the traced peak is printed, for the record."""
    require_bubblewrap()
    with private_state_dir() as state:
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state, file_read_budget=BUDGET, file_read_max=CAP)

        async def main() -> tuple[int, int, int, set[str], int]:
            async with Bridge(settings) as bridge:
                files = bridge.files
                assert files is not None
                digests = set()
                for index in range(SESSIONS):
                    code = f"import os, hashlib\nd = os.urandom({FILE_BYTES})\nopen('f.bin', 'wb').write(d)\n"
                    code += "print(hashlib.sha256(d).hexdigest())"
                    ran = await bridge.run(RunRequest(code), SessionKey.cli(f"s{index}"))
                    digests.add(ran.stdout.strip())
                big = "import os\nopen('big.bin', 'wb').write(os.urandom(5 << 20))"
                await bridge.run(RunRequest(big), SessionKey.cli("s0"))
                with pytest.raises(SessionFileError, match=r"at most 4,194,304 \(MCP_BRIDGE_FILE_READ_MAX\)"):
                    await files.read(str(SessionKey.cli("s0")), "s0", "big.bin")

                async def one(key: str) -> str:
                    async with files.reading(str(SessionKey.cli(key)), key, "f.bin") as data:
                        file_contents("uri", "f.bin", data)  # the encoding, inside the hold as in the handler
                        return hashlib.sha256(data).hexdigest()

                tracemalloc.start()
                read = await asyncio.gather(
                    *(one(f"s{index}") for index in range(SESSIONS) for _ in range(READS_PER_SESSION))
                )
                traced = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                return files.budget.peak, files.budget.waited, files.budget.in_flight, set(read) - digests, traced

        peak, waited, left, wrong, traced = asyncio.run(main())
    print(f"budget peak {peak / MIB:.1f} of {BUDGET / MIB:.0f} MiB, {waited} waited; traced {traced / MIB:.1f} MiB")
    assert wrong == set(), "a read returned other bytes than the session wrote"
    assert FILE_BYTES <= peak <= BUDGET, peak
    assert left == 0


SLOW_GUEST = """
import time, worker_files
real_read = worker_files._read
def slow(root, path, offset):
    if offset < (1 << 40):  # the chunks, not the question of the size
        time.sleep(2)
    return real_read(root, path, offset)
worker_files._read = slow
open('slow.bin', 'wb').write(bytes(12 << 20))
print('ready')
"""


@pytest.mark.backend
def test_a_worker_that_sends_a_file_slowly_loses_its_room_in_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code slows its own guest down (2 s a chunk, 3 chunks): the read is cut at READ_TIMEOUT and its room freed,
    so the sessions whose reads wait for the budget are not held up by it."""
    require_bubblewrap()
    monkeypatch.setattr(session_files, "READ_TIMEOUT", 3.0)  # less than the 6 s the guest takes at the very least
    with private_state_dir() as state:
        settings = sandbox_settings(
            runtime="bubblewrap", state_dir=state, file_read_budget=16 * MIB, file_read_max=16 * MIB
        )

        async def main() -> tuple[str, int]:
            async with Bridge(settings) as bridge:
                files = bridge.files
                assert files is not None
                assert (await bridge.run(RunRequest(SLOW_GUEST), SessionKey.cli("slow"))).stdout == "ready\n"
                with pytest.raises(SessionFileError) as refused:
                    await files.read(str(SessionKey.cli("slow")), "slow", "slow.bin")
                return str(refused.value), files.budget.in_flight

        message, left = asyncio.run(main())
    assert "of the 12,582,912 bytes of 'slow.bin' in 3 s; retry, or make the file smaller" in message, message
    assert left == 0
