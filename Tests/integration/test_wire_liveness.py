"""WebSocket connections as channel handlers (issue 13): the server pings, closes a peer that no
longer answers, keeps one that does, answers a client's close with the client's code, and ends
its own close with the reason."""
import asyncio
import json
import socket
import struct

import websockets

from conftest import Node
from wire import WireClient, read_frame, upgraded_socket, ws_frame

PING = 0.3  # --ws-ping-interval for these nodes (seconds)


def test_a_peer_that_never_answers_pings_is_closed(tmp_path, ns):
    node = Node(data_dir=str(tmp_path / "d"), extra_args=["--ws-ping-interval", str(PING)]).start()
    try:
        s = upgraded_socket(node.port, ns)
        s.settimeout(30)
        opcodes = []
        while True:
            frame = read_frame(s)
            if frame is None:
                break
            opcodes.append(frame[0])
            if frame[0] == 0x8:  # the server's close frame: the socket follows
                continue
        assert opcodes[0] == 0x1, opcodes  # the hello
        assert 0x9 in opcodes, opcodes  # pinged before being closed
        s.close()
    finally:
        node.stop()


def test_a_peer_that_answers_pings_stays_and_is_served(tmp_path, ns):
    node = Node(data_dir=str(tmp_path / "d"), extra_args=["--ws-ping-interval", str(PING)]).start()
    try:
        async def go():
            c = await WireClient.connect(node.url, ns)  # websockets answers pings by itself
            await asyncio.sleep(PING * 8)
            _, resp = await c.request("p", {"p": "alive", "d": 1})
            assert resp["s"] == "ok"
            await c.close()
            # The client's close got the server's answer with the same code.
            assert c.ws.close_code == 1000
        asyncio.run(go())
    finally:
        node.stop()


def test_requests_sent_at_once_are_answered_in_order(tmp_path, ns):
    """More requests than the connection reads ahead (64): all answered, in request order."""
    node = Node(data_dir=str(tmp_path / "d")).start()
    try:
        s = upgraded_socket(node.port, ns)
        s.settimeout(30)
        assert read_frame(s)[0] == 0x1  # hello
        n = 300
        burst = b"".join(ws_frame(json.dumps({"t": "d", "d": {"r": r, "a": "p", "b": {"p": f"burst/{r % 7}", "d": r}}}))
                         for r in range(1, n + 1))
        s.sendall(burst)
        answered = []
        while len(answered) < n:
            op, payload = read_frame(s)
            msg = json.loads(payload)
            if msg["t"] == "d" and "r" in msg["d"]:
                assert msg["d"]["b"]["s"] == "ok", msg
                answered.append(msg["d"]["r"])
        assert answered == list(range(1, n + 1))
        s.close()
    finally:
        node.stop()


def test_a_message_over_the_limit_ends_the_session_with_the_reason(tmp_path, ns):
    """Fragments of one message past 16 MiB: the server's close frame says why."""
    node = Node(data_dir=str(tmp_path / "d")).start()
    try:
        async def go():
            ws = await websockets.connect(node.url.replace("http://", "ws://") + f"/.ws?v=5&ns={ns}",
                                          max_size=None)
            await ws.recv()  # hello
            chunk = "x" * (60 * 1024)
            parts = (chunk for _ in range(300))  # ~17.6 MiB in fragments of 60 KiB
            try:
                await ws.send(parts)
            except websockets.ConnectionClosed:
                pass
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 30)
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None and closed.rcvd.reason == "message too large"
        asyncio.run(go())
    finally:
        node.stop()
