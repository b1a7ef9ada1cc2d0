"""A fork server for the suite's bridge processes: imports the bridge once, then forks one per launcher.

Importing the SDK and the bridge costs a new interpreter about two CPU-seconds, and the suite starts hundreds of
bridges on a machine of two cores. This process (one per pytest process, started by ``zygote.py``) imports them
once and then only waits: no thread, no event loop, no logging handler, no open file but its socket and its
parent's pipe (it checks all of that before it serves). For each ``bridge_launcher.py`` that connects it forks a
child that takes the launcher's place, as ``python -m mcp_codemode ARGS`` would start in it: the launcher's
standard streams, environment, working directory and umask, a session of its own, ``sys.argv`` and ``__main__`` as
``-m`` sets them, and a thread that kills its process group when the launcher dies (a SIGKILL the launcher could
not pass on). It tells the launcher the child's pid, writes it to ``children/<launcher pid>`` for the tests'
process checks, and sends the child's wait status when it ends. It exits when its parent's pipe closes.

Run as a script (``python bridge_zygote.py DIRECTORY``), standard library and the bridge only.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any

# What a bridge imports by the time it serves, over stdio or HTTP (the rest is small and imported as it goes).
PRELOAD = (
    "mcp_codemode.cli.entry",
    "mcp_codemode.cli.main",
    "mcp_codemode.cli.serve",
    "mcp_codemode.cli.serving",
    "mcp_codemode.face.server",
    "mcp_codemode.face.web",
    "mcp_codemode.runs.bridge",
)
REQUEST_LIMIT = 16 << 20


def receive_exactly(channel: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the launcher hung up mid-request")
        data += chunk
    return data


def check_quiet(keep: set[int]) -> None:
    """Fail before serving if an import left something a fork would copy into every bridge but an exec would not."""
    problems = []
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        problems.append(f"threads: {threading.enumerate()}, tasks: {os.listdir('/proc/self/task')}")
    fds = {int(name) for name in os.listdir("/proc/self/fd")} - {0, 1, 2} - keep
    fds = {fd for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")}  # the listing's own descriptor is gone
    if fds:
        problems.append(f"open files: {[os.readlink(f'/proc/self/fd/{fd}') for fd in fds]}")
    import asyncio
    import logging

    if asyncio.events._get_running_loop() is not None:
        problems.append("an event loop is running")
    if logging.getLogger().handlers:
        problems.append(f"root logging handlers: {logging.getLogger().handlers}")
    if problems:
        raise SystemExit(f"bridge_zygote: the imports left state a forked bridge would inherit: {problems}")


def launcher_of(channel: socket.socket) -> int:
    credentials = channel.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid: int = struct.unpack("3i", credentials)[0]
    return pid


def become_bridge(request: dict[str, Any], fds: list[int], closing: list[socket.socket | int]) -> None:
    """In the child: take the launcher's place and run ``python -m mcp_codemode ARGS`` (or the test support module
    the launcher names, which imports what the bridge does); never returns."""
    for held in closing:  # a socket object is detached first, so that no finalizer closes a number reused later
        os.close(held.detach() if isinstance(held, socket.socket) else held)
    stdin, stdout, stderr, launcher = fds
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    os.setsid()
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    module = request.get("module", "mcp_codemode")
    if module != "mcp_codemode" and not module.startswith("tests.support."):
        raise SystemExit(f"bridge_zygote: {module!r} is neither the bridge nor a test support module")
    sys.argv = ["-m", *request["args"]]  # runpy puts the module's path in argv[0], as -m does
    sys.orig_argv = [sys.executable, "-m", module, *request["args"]]
    sys.path[0] = request["cwd"]  # -m puts the working directory first, where a script puts its own folder
    threading.Thread(target=watch, args=(launcher,), name="launcher-watch", daemon=True).start()
    import runpy

    runpy._run_module_as_main(module)  # type: ignore[attr-defined]  # ends in sys.exit, as -m does
    raise SystemExit(0)


def watch(launcher: int) -> None:
    """The launcher died (a SIGKILL it could not pass on): go as a killed process group would."""
    watching = select.poll()
    watching.register(launcher, select.POLLIN)
    while not watching.poll():
        pass
    os.write(2, b"bridge_zygote: the launcher of this bridge died; killing the bridge's process group\n")
    os.killpg(0, signal.SIGKILL)


class Zygote:
    def __init__(self, directory: Path) -> None:
        self.children = directory / "children"
        self.children.mkdir(exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(directory / "socket"))
        self.listener.listen(64)
        self.running: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, the launcher's connection)

    def serve(self) -> None:
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        poller.register(0, select.POLLIN)
        while True:
            for fd, _events in poller.poll():
                if fd == 0:
                    return  # the pytest process is gone (its pipe closed): so are its tests
                if fd == self.listener.fileno():
                    pidfd = self.start_one()
                    if pidfd is not None:
                        poller.register(pidfd, select.POLLIN)
                else:
                    poller.unregister(fd)
                    self.report(fd)

    def start_one(self) -> int | None:
        channel, _ = self.listener.accept()
        fds: list[int] = []
        try:
            channel.settimeout(30)
            header, fds, _flags, _address = socket.recv_fds(channel, 8, 4)
            (size,) = struct.unpack("!Q", header + receive_exactly(channel, 8 - len(header)))
            if len(fds) != 4 or size > REQUEST_LIMIT:
                raise ConnectionError(f"a malformed request: {len(fds)} descriptors, {size} bytes")
            request = json.loads(receive_exactly(channel, size))
            launcher = launcher_of(channel)
        except (OSError, ValueError) as exc:
            print(f"bridge_zygote: refused a launcher: {exc}", file=sys.stderr, flush=True)
            channel.close()
            for fd in fds:
                os.close(fd)
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            become_bridge(request, fds, [self.listener, channel, *self.running, *(c for _, c in self.running.values())])
        for fd in fds:
            os.close(fd)
        (self.children / str(launcher)).write_text(str(pid))
        pidfd = os.pidfd_open(pid)
        self.running[pidfd] = (pid, channel)
        with contextlib.suppress(OSError):  # the launcher is gone: the child's watch ends it, and it is reaped
            channel.sendall(struct.pack("!q", pid))
        return pidfd

    def report(self, pidfd: int) -> None:
        pid, channel = self.running.pop(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            channel.sendall(struct.pack("!q", status))
        channel.close()


def main(directory: Path) -> None:
    zygote = Zygote(directory)  # listening first: a launcher that comes during the imports waits in the backlog
    for name in PRELOAD:
        importlib.import_module(name)
    check_quiet({zygote.listener.fileno()})
    gc.collect()
    gc.freeze()  # what a bridge freezes after its first answer anyway; forked children then share these pages
    zygote.serve()
    shutil.rmtree(directory, ignore_errors=True)  # only the fork server gets here: a bridge ends in SystemExit


if __name__ == "__main__":
    main(Path(sys.argv[1]))
