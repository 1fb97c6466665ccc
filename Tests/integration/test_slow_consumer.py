"""A WebSocket client that stops reading is cut off once its outbound queue passes the bound
(`--ws-outbound-bytes`); every other listener keeps getting every event (issue 13)."""
import asyncio
import json
import socket
import time

import requests

from conftest import Node
from wire import WireClient, upgraded_socket, ws_frame

BOUND = 1 << 20
VALUE = "v" * 100_000
WRITES = 120


def raw_listener(port, ns, path):
    """A WebSocket with a tiny receive buffer that listens at `path`, then never reads again."""
    s = upgraded_socket(port, ns, receive_buffer=4096)
    s.sendall(ws_frame(json.dumps({"t": "d", "d": {"r": 1, "a": "q", "b": {"p": path, "h": ""}}})))
    return s


def drain_until_closed(s, timeout=30):
    """Reads what the server still sends; returns (bytes read, True once the server closed)."""
    s.settimeout(timeout)
    total = 0
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return total, True
            total += len(chunk)
    except ConnectionResetError:
        return total, True
    except socket.timeout:
        return total, False


def status(node):
    return requests.get(node.url + "/.ember/status", timeout=10).json()


def test_a_client_that_stops_reading_is_cut_off_and_others_keep_every_event(tmp_path):
    node = Node(data_dir=str(tmp_path / "d"), extra_args=["--ws-outbound-bytes", str(BOUND)]).start()
    ns = "slow"
    try:
        async def go():
            fast = await WireClient.connect(node.url, ns)
            await fast.request("q", {"p": "/big", "h": ""})
            slow = raw_listener(node.port, ns, "/big")
            # Both listen (the raw one's listen is answered before the writes begin).
            deadline = time.time() + 10
            while status(node)["listeners"] < 2:
                assert time.time() < deadline, "the raw client's listen did not arrive"
                await asyncio.sleep(0.05)
            got = []
            for i in range(WRITES):
                r = requests.put(f"{node.url}/big/n.json?ns={ns}&print=silent", data=json.dumps(VALUE + str(i)))
                assert r.status_code == 204
                # The reading client gets every event, in order, while the other one stalls.
                push = await fast.next_push(timeout=30)
                got.append(push["b"]["d"])
            assert got == [VALUE + str(i) for i in range(WRITES)]

            # The slow client was cut off: the node counts it, logs why, and forgot the session.
            deadline = time.time() + 30
            while (st := status(node))["connections"] != 1:
                assert time.time() < deadline, f"the slow client was not cut off: {st}"
                await asyncio.sleep(0.05)
            assert st["slowConsumerDisconnects"] == 1 and st["listeners"] == 1
            with open(node.data_dir + ".log", "rb") as f:
                assert b"slow consumer" in f.read()
            # Its socket ends (EOF or reset) well before it could have had every event.
            received, closed = drain_until_closed(slow)
            assert closed
            assert received < WRITES * len(VALUE)
            slow.close()

            # The node still serves the reading client.
            requests.put(f"{node.url}/big/after.json?ns={ns}", data="1")
            push = await fast.next_push(timeout=30)
            assert push["b"]["p"] == "big/after" and push["b"]["d"] == 1
            await fast.close()

        asyncio.run(asyncio.wait_for(go(), 240))
    finally:
        node.stop()
