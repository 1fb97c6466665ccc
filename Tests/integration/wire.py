"""A minimal Firebase wire-protocol (v5) client for tests: raw frames over a WebSocket."""
import asyncio
import base64
import json
import os
import socket
import struct

import websockets


def ws_frame(text):
    """A masked client text frame (RFC 6455)."""
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x81])
    if n < 126:
        head += bytes([0x80 | n])
    elif n <= 0xFFFF:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def upgraded_socket(port, ns, receive_buffer=None):
    """A plain socket upgraded to a WebSocket at /.ws (no library: the test controls every byte
    and when it reads). `receive_buffer` sets SO_RCVBUF before connecting."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /.ws?v=5&ns={ns} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, "connection closed during the upgrade"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def read_frame(s):
    """One server frame (unmasked): (opcode, payload); None once the server closed the socket."""
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    head = exactly(2)
    if head is None:
        return None
    n = head[1] & 0x7F
    if n == 126:
        n = struct.unpack(">H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exactly(8))[0]
    return head[0] & 0x0F, exactly(n) if n else b""


class WireClient:
    def __init__(self, ws):
        self.ws = ws
        self.r = 0
        self.hello = None
        self.pushes = []          # server pushes (a: d / m / c ...)
        self.responses = {}       # r -> body
        self.log = []             # everything received in order, decoded

    @classmethod
    async def connect(cls, base_url, ns, params=""):
        """`params`: more of the query, e.g. "&ls=<a previous session id>"."""
        url = base_url.replace("http://", "ws://") + f"/.ws?v=5&ns={ns}{params}"
        ws = await websockets.connect(url, max_size=64 * 1024 * 1024)
        c = cls(ws)
        c.hello = await c._recv()
        return c

    async def _recv(self):
        frame = await self.ws.recv()
        if frame.isdigit() and len(frame) <= 6:
            parts = [await self.ws.recv() for _ in range(int(frame))]
            frame = "".join(parts)
        msg = json.loads(frame)
        self.log.append(msg)
        return msg

    @property
    def session_id(self):
        """The session id of the server's hello (what an SDK sends back as `ls`)."""
        return self.hello["d"]["d"]["s"]

    async def request(self, action, body, timeout=10):
        """Sends a request; returns (pushes received before the response, response body)."""
        self.r += 1
        r = self.r
        await self.ws.send(json.dumps({"t": "d", "d": {"r": r, "a": action, "b": body}}))
        before = []
        while True:
            msg = await asyncio.wait_for(self._recv(), timeout)
            d = msg.get("d", {})
            if msg.get("t") == "d" and d.get("r") == r:
                return before, d["b"]
            if msg.get("t") == "d" and "a" in d:
                before.append(d)
                self.pushes.append(d)

    async def next_push(self, timeout=10):
        while True:
            msg = await asyncio.wait_for(self._recv(), timeout)
            d = msg.get("d", {})
            if msg.get("t") == "d" and "a" in d:
                self.pushes.append(d)
                return d

    async def close(self):
        await self.ws.close()
