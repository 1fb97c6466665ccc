"""A minimal Firebase wire-protocol (v5) client for tests: raw frames over a WebSocket."""
import asyncio
import json

import websockets


class WireClient:
    def __init__(self, ws):
        self.ws = ws
        self.r = 0
        self.hello = None
        self.pushes = []          # server pushes (a: d / m / c ...)
        self.responses = {}       # r -> body
        self.log = []             # everything received in order, decoded

    @classmethod
    async def connect(cls, base_url, ns):
        url = base_url.replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
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
