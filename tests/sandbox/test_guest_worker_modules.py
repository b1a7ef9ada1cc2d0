"""The guest worker's modules reach the sandbox and load there by top-level name, without shadowing anything.

The worker is split into modules beside ``worker.py`` (``worker_channel``, ``worker_capture``, ``worker_cells``,
``worker_tracebacks``). On the host they import each other relatively; in the sandbox ``boot.py`` puts the guest
folder first on ``sys.path`` and they import each other by top-level name. Two mistakes would show only inside a
sandbox, and these checks catch them without one: a guest module named like a standard-library module (it would
replace that module for the worker and for the user's code), and a sibling import that works on the host but
not by top-level name (the staged worker would die at start on every backend).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_codemode.guest import protocol
from mcp_codemode.sandbox.frames import HEADER
from mcp_codemode.sandbox.staging import stage_guest

GUEST = Path(protocol.__file__).parent


def _top_level_names() -> set[str]:
    """What the guest folder offers by top-level name once it is on ``sys.path``: modules and packages."""
    modules = {path.stem for path in GUEST.glob("*.py")} - {"__init__"}
    packages = {path.name for path in GUEST.iterdir() if (path / "__init__.py").is_file()}
    return modules | packages


def test_no_guest_module_shadows_the_standard_library() -> None:
    shadowed = _top_level_names() & sys.stdlib_module_names
    assert not shadowed, f"guest modules {sorted(shadowed)} would replace the standard library's in the sandbox"


@pytest.mark.backend  # starts a Python process
def test_the_staged_worker_loads_its_modules_by_top_level_name(tmp_path: Path) -> None:
    """Imported as the sandbox does (isolated, the staged folder on ``sys.path``): every worker module, no host code.
    ``worker_snapshot`` is imported by the worker only when the host first asks for a snapshot (its imports cost the
    start), by top-level name as here."""
    target = stage_guest(tmp_path, os.getuid(), os.getgid())
    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import worker; import worker_snapshot; "
        "print(json.dumps(sorted(name for name in sys.modules if name.startswith(('worker', 'protocol', 'mcp')))))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-B", "-c", probe, str(target)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    expected = sorted({path.stem for path in GUEST.glob("worker*.py")} | {"protocol"})
    assert json.loads(done.stdout) == expected


@pytest.mark.backend  # starts a Python process
def test_the_staged_worker_starts_and_says_ready(tmp_path: Path) -> None:
    """The whole start path (rlimits, the runtime, capture, the control thread) outside a sandbox; closing its
    stdin then means the host is gone, and the worker leaves with status 0."""
    target = stage_guest(tmp_path, os.getuid(), os.getgid())
    argv = [sys.executable, "-I", "-B", "-u", str(target / "boot.py"), "{}"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as worker:
        assert worker.stdin is not None and worker.stdout is not None and worker.stderr is not None
        said, _, _ = select.select([worker.stdout], [], [], 60)  # a worker stuck before READY fails, never hangs
        header = worker.stdout.read(HEADER.size) if said else b""
        (size,) = HEADER.unpack(header) if len(header) == HEADER.size else (0,)
        payload = worker.stdout.read(size)
        worker.stdin.close()
        if not said:
            worker.kill()
        status = worker.wait(timeout=300)
        errors = worker.stderr.read().decode(errors="replace")
    assert len(header) == HEADER.size, f"the worker said nothing: {errors}"
    ready = json.loads(payload)
    assert ready["type"] == protocol.READY and ready["python"] == sys.version.split()[0]
    assert status == 0, errors


_STARVED_READER = """
import json, os, select, sys, time
from mcp_codemode.guest import worker_capture

class Slow:  # a reader thread that gets no CPU for a second, as on two busy cores under 64 clients
    def __init__(self):
        self.inner, self.first = select.poll(), True
    def register(self, *args):
        self.inner.register(*args)
    def poll(self, *args):
        if self.first:
            self.first = False
            time.sleep(1.0)
        return self.inner.poll(*args)

class Sent(list):
    def send(self, message):
        self.append(message)

worker_capture.select = type("select", (), {"poll": Slow, "POLLIN": select.POLLIN})
real = os.dup(1)
sent = Sent()
capture = worker_capture.Capture(sent, 1 << 20)
print("the cell's output")
summary = capture.fence()
os.write(real, json.dumps([m["data"] for m in sent]).encode())
"""


@pytest.mark.backend  # starts a Python process
def test_a_starved_capture_thread_still_delivers_the_cells_output_before_its_result() -> None:
    """The fence gave up after 0.5 s and the cell's output arrived after its result, where the host drops it: a
    print cell answered "(no output)" under load (benchmarks/faults.py, issue 35)."""
    done = subprocess.run([sys.executable, "-c", _STARVED_READER], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["the cell's output\n"]


_STREAMING = """
import json, os, time
from mcp_codemode.guest import worker_capture

class Sent(list):
    def send(self, message):
        self.append(message)

real = os.dup(1)
sent = Sent()
capture = worker_capture.Capture(sent, 1 << 20)
for number in range(21):
    print("line", number)
for _ in range(30000):  # no fence: the drain thread alone must let the burst out
    if "".join(m["data"] for m in sent).count("\\n") == 21:
        break
    time.sleep(0.01)
os.write(real, json.dumps([m["data"] for m in sent]).encode())
"""


@pytest.mark.backend  # starts a Python process
def test_output_still_streams_before_the_cell_ends() -> None:
    """A burst waits STREAM_DELAY_SECONDS for company, then leaves without the result's flush (the CLI echoes it)."""
    done = subprocess.run([sys.executable, "-c", _STREAMING], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "".join(json.loads(done.stdout)) == "".join(f"line {n}\n" for n in range(21))
