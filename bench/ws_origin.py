#!/usr/bin/env python3
"""A WebSocket origin for bench/run.py's `idle-websocket` scenario.

It answers every upgrade request with `101 Switching Protocols` (RFC 6455 handshake) and then
holds the connection, discarding whatever arrives, until the peer closes. Nothing else: the
scenario measures what idle upgraded connections cost the proxy in between.
"""
import asyncio
import base64
import hashlib
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def serve(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    key = b""
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"sec-websocket-key":
            key = value.strip()
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    try:
        await writer.drain()
        while await reader.read(4096):
            pass
    except ConnectionError:
        pass
    writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
