"""The forwarding replica's HTTP/1.1 channel, against small servers on 127.0.0.1 that misbehave on purpose.

The real exchange (two replicas, progress, cancel, takeover) is tests/face/test_replicas.py; here are the edges a
well-behaved peer never shows: a kept-alive connection the peer closed, an answer that breaks off, a line without
end, silence, and nothing listening. Marked backend because it binds loopback sockets (``-m "not backend"`` runs
without any).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import pytest

from mcp_codemode.face.peer_channel import MAX_LINE, PeerBroke, PeerChannel, PeerUnreachable

pytestmark = pytest.mark.backend

LIMIT = 1 << 20
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return await reader.readexactly(length)


def chunked(*lines: bytes, end: bool = True) -> bytes:
    body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for line in lines:
        body += b"%x\r\n%s\r\n" % (len(line), line)
    return body + (b"0\r\n\r\n" if end else b"")


async def exchange(handler: Handler, channel: PeerChannel, times: int = 1) -> list[list[bytes]]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    answers = []
    try:
        for _ in range(times):
            async with channel.post(f"http://127.0.0.1:{port}/internal/v1/run", b'{"a": 1}', {"X": "y"}) as answer:
                assert answer.status == 200
                answers.append([line async for line in answer.lines])
    finally:
        server.close()
        await channel.close()
    return answers


def test_lines_stream_and_a_connection_is_kept_alive_and_a_closed_one_is_replaced() -> None:
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        assert await read_request(reader) == b'{"a": 1}'
        writer.write(chunked(b'{"progress": 1}\n{"res', b'ult": 2}\n'))
        await writer.drain()
        if connections == 1:
            assert await read_request(reader) == b'{"a": 1}'  # the same connection, kept alive
            writer.write(chunked(b"second\n"))
            await writer.drain()
        writer.close()  # as uvicorn's keep-alive timeout does: the next request must not see a dead peer

    answers = asyncio.run(exchange(serve, PeerChannel(5, 5), times=3))
    assert answers == [[b'{"progress": 1}', b'{"result": 2}'], [b"second"], [b'{"progress": 1}', b'{"result": 2}']]
    assert connections == 2


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (chunked(b"half", end=False), "the answer ended without its end|broke off"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + b"x" * 3, "ended without its end|broke off"),
        (b"SSH-2.0-not-http\r\n\r\n", "the answer was not HTTP/1.1"),
        (None, "no word from the peer for 0.5 s"),
    ],
    ids=["chunks-cut", "short-body", "not-http", "silent"],
)
def test_an_answer_that_breaks_off_or_never_comes_is_peer_broke(reply: bytes | None, expected: str) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if reply is None:
            await asyncio.sleep(5)
        else:
            writer.write(reply)
            await writer.drain()
        writer.close()

    with pytest.raises(PeerBroke, match=expected):
        asyncio.run(exchange(serve, PeerChannel(5, 0.5)))


def test_a_line_over_the_limit_is_refused_without_holding_it() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"z" * (64 << 10)
        with contextlib.suppress(ConnectionError):
            for _ in range(LIMIT // len(chunk) + 2):
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
        writer.close()

    with pytest.raises(PeerBroke, match=f"a line of the answer is over {LIMIT} bytes"):
        asyncio.run(exchange(serve, PeerChannel(5, 5, max_line=LIMIT)))
    assert MAX_LINE > LIMIT  # the product's own limit is larger: this one only keeps the test quick


def test_nothing_listening_is_peer_unreachable() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        async with PeerChannel(5, 5).post(f"http://127.0.0.1:{port}/x", b"{}", {}):
            pass

    with pytest.raises(PeerUnreachable, match=r"cannot connect to 127\.0\.0\.1"):
        asyncio.run(main())
