"""The lean HTTP/1.1 JSON client against a raw asyncio server: kept-alive connections the
server closed, chunked bodies, bodies read to the end of the stream, refused connections."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from rolloutlab.agent._http import HTTPPolicyError, LeanJSONClient
from rolloutlab.io import RolloutlabError


async def _serve(mode: str, connections: list[int]) -> tuple[asyncio.Server, int]:
    """A server answering ``{"echo": <request body>}``; ``mode``: ``close-after-one`` (no
    Connection: close header, but the socket is closed), ``chunked``, ``eof`` (no length)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            n = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            body = json.dumps({"echo": json.loads(await reader.readexactly(n))}).encode()
            if mode == "chunked":
                mid = len(body) // 2
                chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:mid], body[mid:]))
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")
            elif mode == "eof":
                writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
            if mode in ("close-after-one", "eof"):
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("mode", ["keep", "close-after-one", "chunked", "eof"])
def test_sequential_posts(mode: str) -> None:
    async def go() -> tuple[list[object], int]:
        conns: list[int] = []
        server, port = await _serve(mode, conns)
        client = LeanJSONClient(f"http://127.0.0.1:{port}/v1")
        try:
            out = []
            for i in range(3):
                out.append(await client.post("/x", {"i": i, "text": "hé \udcff"}))
                await asyncio.sleep(0.01)  # let a closing server finish closing
            return out, len(conns)
        finally:
            await client.close()
            server.close()

    out, conns = asyncio.run(go())
    assert [o["echo"]["i"] for o in out] == [0, 1, 2]  # type: ignore[index]
    assert out[0]["echo"]["text"] == "hé \udcff"  # type: ignore[index]  # lone surrogate survives as \\u escape
    assert conns == (1 if mode in ("keep", "chunked") else 3)


def test_refused_connection_and_https() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def go() -> None:
        await LeanJSONClient(f"http://127.0.0.1:{port}/v1", timeout_s=2).post("/x", {})

    with pytest.raises(HTTPPolicyError, match="cannot connect"):
        asyncio.run(go())
    with pytest.raises(RolloutlabError, match="needs an http:// URL"):
        LeanJSONClient("https://api.example.com/v1")
