"""Attacks on the session-files surface (issue 23 item 5), on every backend: the code plants symlinks, FIFOs and
folders where the client will read or write, and lies about what it answers.

The client reaches a session's /workspace through the guest (``guest/worker_files.py``), which shares its process
with the attacker's code: the guest's checks are a courtesy, the host's (``runs/session_files.py``) are the
boundary. Passing means: no read follows a link out of the workspace, no read hangs, no write lands outside it,
every forged answer is refused or cut to what the host allows, and the session and bridge go on working.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from mcp_codemode.guest.protocol import MAX_LISTED_FILES
from mcp_codemode.runs.session_files import SessionFileError
from mcp_codemode.session_keys import SessionKey
from tests.support.security import Target, outcome

pytestmark = pytest.mark.backend

PLANT = """
import os
os.makedirs('/tmp/outside', exist_ok=True)
open('/tmp/outside/target.txt', 'w').write('outside')
os.symlink('/tmp/outside/target.txt', 'link.txt')
os.symlink('/etc/passwd', 'passwd')
os.symlink('/proc/self/environ', 'environ')
os.symlink('/', 'root')
os.symlink('/tmp/outside', 'outdir')
os.mkfifo('pipe')
os.makedirs('real', exist_ok=True)
open('real/ok.txt', 'w').write('inside')
report({'planted': sorted(os.listdir('.'))})
"""


def _refusal(target: Target, read: Callable[[], Coroutine[Any, Any, bytes]]) -> str:
    """Why the bridge refused the read, or what it read when it did not refuse (which fails the caller's check)."""
    try:
        got = target.call(read, timeout=60)
    except SessionFileError as exc:
        return str(exc)
    return f"not refused: read {got[:100]!r}"


def _session(target: Target) -> str:
    return f"files-{target.name}-{uuid.uuid4().hex[:8]}"


def _manager_name(session: str) -> str:
    """The name the session manager (and so ``SessionFiles``) knows ``Target.run``'s session by."""
    return str(SessionKey.cli(session))


def test_links_fifos_and_folders_the_code_plants_never_lead_a_read_or_write_out(target: Target) -> None:
    key = _session(target)
    assert "planted" in outcome(target.run(PLANT, session=key))
    files = target.bridge.files
    assert files is not None

    refusals = {
        "link.txt": "symlink",
        "passwd": "symlink",
        "environ": "symlink",
        "root/etc/passwd": "not a folder of the workspace",
        "outdir/target.txt": "not a folder of the workspace",
        "pipe": "not a regular file",  # opened without blocking: a FIFO nobody writes would hang a plain open
    }
    for path, expected in refusals.items():
        refusal = _refusal(target, functools.partial(files.read, _manager_name(key), key, path))
        assert expected in refusal, (target.name, path, refusal)
    assert target.call(lambda: files.read(_manager_name(key), key, "real/ok.txt")) == b"inside"

    listing = target.call(lambda: files.listing(_manager_name(key), key))
    assert {entry.path for entry in listing.entries} == {"real", "real/ok.txt"}  # links and the FIFO left out

    worker = target.bridge.sessions.live_worker(_manager_name(key)) if target.bridge.sessions else None
    assert worker is not None
    with pytest.raises(SessionFileError, match="not a folder of the workspace"):
        target.call(lambda: files.write(worker, "outdir/planted.txt", b"evil"))
    with pytest.raises(SessionFileError, match="not a folder of the workspace"):
        target.call(lambda: files.write(worker, "root/tmp/planted.txt", b"evil"))
    target.call(lambda: files.write(worker, "link.txt", b"replaced"))  # the link is replaced, never written through

    after = """
    import os
    report({
        'outside': open('/tmp/outside/target.txt').read(),
        'planted': sorted(os.listdir('/tmp/outside')) + sorted(n for n in os.listdir('/tmp') if n == 'planted.txt'),
        'link_is_file': os.path.isfile('link.txt') and not os.path.islink('link.txt'),
        'link': open('link.txt').read(),
    })
    """
    seen = outcome(target.run(after, session=key))
    assert seen == {"outside": "outside", "planted": ["target.txt"], "link_is_file": True, "link": "replaced"}
    target.discard(key)


FORGERIES = """
import base64, worker_files
real_read, real_list = worker_files._read, worker_files._list
mode = {mode!r}
if mode == 'not-base64':
    worker_files._read = lambda root, path, offset: {{'data': '@@not base64@@', 'size': 5}}
elif mode == 'huge-size':
    worker_files._read = lambda root, path, offset: {{'data': base64.b64encode(b'x' * 10).decode(), 'size': 1 << 40}}
elif mode == 'endless':  # a file that is always 8 MiB longer than what was read
    chunk = base64.b64encode(b'y' * (4 << 20)).decode()
    worker_files._read = lambda root, path, offset: {{'data': chunk, 'size': offset + (8 << 20)}}
elif mode == 'oversized-chunk':
    worker_files._read = lambda root, path, offset: {{'data': 'A' * (8 << 20), 'size': 6 << 20}}
elif mode == 'lying-list':
    evil = [
        {{'path': '../../etc/passwd', 'size': 1, 'kind': 'file'}}, {{'path': '/etc/shadow', 'size': 1, 'kind': 'file'}},
        {{'path': 'ok.txt', 'size': -5, 'kind': 'file'}}, {{'path': 'x', 'size': 1, 'kind': 'link'}},
        {{'path': 'bad\\x00name', 'size': 1, 'kind': 'file'}}, 'not a dict', None,
    ]
    many = [{{'path': f'f{{i}}', 'size': i, 'kind': 'file'}} for i in range(5000)]
    worker_files._list = lambda root, path: {{'entries': evil + many, 'more': 'yes'}}
elif mode == 'crash':
    def explode(*args):
        raise MemoryError('planted')
    worker_files._read = explode
report({{'mode': mode}})
"""


@pytest.mark.parametrize("mode", ["not-base64", "huge-size", "endless", "oversized-chunk", "lying-list", "crash"])
def test_a_guest_that_lies_about_files_gets_nothing_past_the_host(target: Target, mode: str) -> None:
    key = _session(target)
    assert outcome(target.run(FORGERIES.format(mode=mode), session=key)) == {"mode": mode}
    files = target.bridge.files
    assert files is not None
    if mode == "lying-list":
        listing = target.call(lambda: files.listing(_manager_name(key), key))
        names = [entry.path for entry in listing.entries]
        assert len(names) <= MAX_LISTED_FILES
        assert not any(".." in name or name.startswith("/") or "\x00" in name for name in names)
        assert "ok.txt" not in names and "x" not in names
        assert listing.more is False  # only a JSON true counts
    else:
        expected = {
            "not-base64": "not base64",
            "huge-size": "at most",
            "endless": "at most",
            "oversized-chunk": "not a file",
            "crash": "sandbox",
        }[mode]
        with pytest.raises(SessionFileError, match=expected):
            target.call(lambda: files.read(_manager_name(key), key, "anything.txt"), timeout=120)
    # The session goes on: its state is intact and the next call runs.
    after = target.run("report({'alive': True, 'mode': mode})", session=key)
    assert outcome(after) == {"alive": True, "mode": mode}
    target.discard(key)


def test_forged_file_replies_and_a_flood_of_them_change_nothing(target: Target) -> None:
    """The code writes FILE_REPLY frames of its own (ids it guesses, junk values) on the worker's channel."""
    key = _session(target)
    forge = """
    import mcp.runtime as runtime
    send = runtime.rpc._send
    for i in range(1, 2000):
        send({'type': 'file_reply', 'id': i, 'ok': True, 'value': {'data': 'QUFB', 'size': 3}})
    send({'type': 'file_reply', 'id': 'x', 'ok': True})
    send({'type': 'file_reply'})
    open('true.txt', 'w').write('true')
    report({'sent': True})
    """
    assert outcome(target.run(forge, session=key)) == {"sent": True}
    files = target.bridge.files
    assert files is not None
    assert target.call(lambda: files.read(_manager_name(key), key, "true.txt")) == b"true"  # not the forged b"AAA"
    assert outcome(target.run("report({'alive': True})", session=key)) == {"alive": True}
    target.discard(key)
