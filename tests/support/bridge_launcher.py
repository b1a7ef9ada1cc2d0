"""What the tests run instead of ``python -m mcp_codemode``: hands this process's place to a pre-imported fork server.

Run as ``python -I -S bridge_launcher.py SOCKET ARG...``: standard library only and no site, so it starts in a few
milliseconds where a new interpreter importing the bridge spends about two CPU-seconds. It sends its standard
streams, its own pidfd, the arguments, the environment, the working directory and the umask over the unix socket
``SOCKET`` to the fork server (``bridge_zygote.py``), which forks a bridge that takes them over. From then on this
process only stands in for that bridge: the signals a test or client sends it (SIGTERM, SIGINT, SIGHUP and the
like) are passed on, and it exits as the bridge exited (the same status, or killed by the same signal). A SIGKILL
cannot be passed on, so the bridge watches this process's pidfd and kills its own process group when it dies.

When the fork server is not there (switched off, not started yet, or gone) it runs the real command instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
LOST = 121  # the fork server went away before it said how the bridge ended


def real_command(module: str, args: list[str]) -> None:
    """Become ``python -m MODULE ARGS`` (without -I/-S), as a test without the fork server would run it."""
    os.execv(sys.executable, [sys.executable, "-m", module, *args])


def receive_exactly(channel: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main(argv: list[str]) -> None:
    address, args = argv[1], argv[2:]
    module = "mcp_codemode"
    if args[:1] == ["-m"]:  # another module the fork server has what it needs of (``zygote.launch_module_command``)
        module, args = args[1], args[2:]
    pending: list[int] = []
    child = 0

    def forward(signum: int, _frame: object) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)
        else:
            pending.append(signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        channel.connect(address)
    except OSError:
        channel.close()
        for signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        real_command(module, args)
    asked = {"module": module, "args": args, "env": dict(os.environ), "cwd": os.getcwd(), "umask": os.umask(0o022)}
    request = json.dumps(asked).encode()
    me = os.pidfd_open(os.getpid())
    socket.send_fds(channel, [struct.pack("!Q", len(request))], [0, 1, 2, me])
    channel.sendall(request)
    os.close(me)
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)  # the bridge holds the streams now: an end of file or a closed pipe is its to see
    os.dup2(quiet, 1)
    os.close(quiet)
    answer = receive_exactly(channel, 8)
    if answer is None:
        os.write(2, b"bridge_launcher: the fork server closed the connection before the bridge started\n")
        os._exit(LOST)
    child = struct.unpack("!q", answer)[0]
    for waiting in pending:
        forward(waiting, None)
    status = receive_exactly(channel, 8)
    if status is None:
        os.write(2, b"bridge_launcher: the fork server went away before the bridge ended\n")
        os._exit(LOST)
    code = os.waitstatus_to_exitcode(struct.unpack("!q", status)[0])
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset (EINVAL)
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main(sys.argv)
