"""REST `timeout=` enforcement and priority-only writes (REST `/.priority.json`, wire `p` to
`path/.priority`), against a real emberd (reference §1.3, §1.7)."""
import asyncio
import json

import requests

from wire import WireClient


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_read_that_exceeds_its_timeout_fails_with_400(node, ns):
    base = node.url
    big = {f"c{i:05}": {"v": i, "s": "x" * 20} for i in range(30000)}
    assert requests.put(f"{base}/big.json?ns={ns}&print=silent", data=json.dumps(big)).status_code == 204
    late = requests.get(f"{base}/big.json?ns={ns}&timeout=1ms")
    assert late.status_code == 400
    assert "timeout of 1 ms" in late.json()["error"]
    ok = requests.get(f"{base}/big.json?ns={ns}&timeout=1min")
    assert ok.status_code == 200 and len(ok.json()) == 30000
    small = requests.get(f"{base}/big/c00007.json?ns={ns}&timeout=10s")
    assert small.status_code == 200 and small.json() == {"v": 7, "s": "x" * 20}
    assert requests.get(f"{base}/big.json?ns={ns}&timeout=0ms").status_code == 400


def test_priority_alone_over_rest(node, ns):
    base = node.url
    requests.put(f"{base}/p.json?ns={ns}", data='{"a": 1, "b": {"c": 1, ".priority": "x"}}')
    r = requests.put(f"{base}/p/b/.priority.json?ns={ns}", data="7")
    assert r.status_code == 200 and r.json() == 7
    r = requests.put(f"{base}/p/a/.priority.json?ns={ns}", data='"z"')
    assert r.status_code == 200 and r.json() == "z"
    export = requests.get(f"{base}/p.json?ns={ns}&format=export").json()
    assert export == {"a": {".value": 1, ".priority": "z"}, "b": {"c": 1, ".priority": 7}}
    assert requests.get(f"{base}/p/b/.priority.json?ns={ns}").json() == 7
    # DELETE removes the priority and keeps the value.
    assert requests.delete(f"{base}/p/a/.priority.json?ns={ns}").status_code == 200
    assert requests.get(f"{base}/p.json?ns={ns}&format=export").json()["a"] == 1
    # A server value becomes the priority when applied.
    r = requests.put(f"{base}/p/b/.priority.json?ns={ns}", data='{".sv": "timestamp"}')
    assert r.status_code == 200 and isinstance(r.json(), int) and r.json() > 1_600_000_000_000
    # An absent node cannot hold a priority: nothing is written.
    r = requests.put(f"{base}/nothing/.priority.json?ns={ns}", data="3")
    assert r.status_code == 200 and r.json() is None
    assert requests.get(f"{base}/nothing.json?ns={ns}").json() is None
    # Refused: not a priority, and methods other than PUT / DELETE; nothing changes.
    before = requests.get(f"{base}/p.json?ns={ns}&format=export").json()
    bad = requests.put(f"{base}/p/b/.priority.json?ns={ns}", data='{"x": 1}')
    assert bad.status_code == 400 and "priority" in bad.json()["error"]
    assert requests.post(f"{base}/p/b/.priority.json?ns={ns}", data="1").status_code == 400
    assert requests.patch(f"{base}/p/b/.priority.json?ns={ns}", data='{"a": 1}').status_code == 400
    assert requests.get(f"{base}/p.json?ns={ns}&format=export").json() == before


def test_priority_alone_over_the_wire(node, ns):
    async def go():
        writer = await WireClient.connect(node.url, ns)
        listener = await WireClient.connect(node.url, ns)
        requests.put(f"{node.url}/room.json?ns={ns}", data='{"msg": {"text": "hi"}}')
        await listener.request("q", {"p": "/room", "h": ""})
        _, resp = await writer.request("p", {"p": "room/msg/.priority", "d": 4})
        assert resp == {"s": "ok", "d": ""}
        push = await listener.next_push()
        assert push["b"]["p"] == "room/msg" and push["b"]["d"] == {"text": "hi", ".priority": 4}
        _, resp = await writer.request("p", {"p": "room/msg/.priority", "d": [1]})
        assert resp["s"] == "invalid_data"
        await writer.close()
        await listener.close()
    run(go())
    assert requests.get(f"{node.url}/room.json?ns={ns}&format=export").json() == {"msg": {"text": "hi", ".priority": 4}}


def test_read_over_the_size_limit_is_refused_with_firebases_error(tmp_path):
    """--max-read-mb bounds a read built whole (wire listens and gets): a larger location
    answers 400 with Firebase's text there, while a plain GET, a query and an SSE listen's first
    event stream (docs/REST.md "Large reads stream": not built whole, so not limited), and shallow
    reads, children and writes over it still work."""
    from conftest import Node
    node = Node(data_dir=str(tmp_path / "data"), extra_args=["--max-read-mb", "1"]).start()
    try:
        base = node.url
        big = {f"c{i:05}": "x" * 100 for i in range(15000)}  # ~1.7 MB stored
        assert requests.put(f"{base}/big.json?print=silent", data=json.dumps(big)).status_code == 204
        streamed = requests.get(f"{base}/big.json")
        assert streamed.status_code == 200 and streamed.json() == big
        assert requests.get(f"{base}/.json").json() == {"big": big}
        shallow = requests.get(f"{base}/big.json?shallow=true")
        assert shallow.status_code == 200 and len(shallow.json()) == 15000
        assert requests.get(f"{base}/big/c00042.json").json() == "x" * 100
        queried = requests.get(f"{base}/big.json", params={"orderBy": '"$key"', "startAt": '"c00010"'})
        assert queried.status_code == 200 and queried.json() == {k: v for k, v in big.items() if k >= "c00010"}
        stream = requests.get(f"{base}/big.json", headers={"Accept": "text/event-stream"}, stream=True, timeout=10)
        assert stream.status_code == 200
        first = b""
        for chunk in stream.iter_content(chunk_size=None):
            first += chunk
            if b"\n\n" in first:
                break
        stream.close()
        event, data = first[:first.index(b"\n\n")].decode().split("\n", 1)
        assert event == "event: put" and json.loads(data[len("data: "):]) == {"path": "/", "data": big}
        # The wire protocol's first answers are built whole: refused over the limit.
        from websockets.sync.client import connect
        with connect(f"ws://127.0.0.1:{node.port}/.ws?v=5&ns=default", open_timeout=10, max_size=None) as ws:
            ws.recv(timeout=10)  # the handshake
            ws.send(json.dumps({"t": "d", "d": {"r": 1, "a": "g", "b": {"p": "/big", "q": {}}}}))
            answer = json.loads(ws.recv(timeout=10))
            assert answer["d"]["r"] == 1 and answer["d"]["b"]["s"] != "ok", answer
        # The node is unharmed: replacing the big value works and reads are served again.
        assert requests.put(f"{base}/big.json", data='"small"').status_code == 200
        assert requests.get(f"{base}/.json").json() == {"big": "small"}
    finally:
        node.stop()


def raw_request(port, head, timeout=10):
    """Sends raw bytes; returns everything the node sent before it closed the connection."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head)
        data = b""
        while True:
            chunk = s.recv(65536)  # a node that neither answers nor closes fails with a timeout
            if not chunk:
                return data
            data += chunk


def test_malformed_request_lines_get_400_and_do_not_hold_shutdown(tmp_path):
    """A request target that does not start with "/" (e.g. a WebSocket client given a URL with no
    path) is answered 400 {"error"} and the connection closed. It used to get no answer at all,
    and the open connection kept the node's graceful shutdown from finishing."""
    import signal
    import socket
    from conftest import Node
    node = Node(data_dir=str(tmp_path / "data")).start()
    try:
        upgrade = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
        for head in [b"GET ?v=5&ns=x HTTP/1.1\r\nHost: h\r\n" + upgrade + b"\r\n",
                     b"GET x.json HTTP/1.1\r\nHost: h\r\n\r\n",
                     b"PUT ?a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n1"]:
            answer = raw_request(node.port, head)
            status, _, body = answer.partition(b"\r\n\r\n")
            assert status.startswith(b"HTTP/1.1 400"), answer
            assert "Malformed HTTP request" in json.loads(body)["error"]
        assert requests.get(f"{node.url}/.json").json() is None  # nothing was written
        # SIGTERM with such a request open: the node still stops.
        held = socket.create_connection(("127.0.0.1", node.port))
        held.sendall(b"GET ?v=5 HTTP/1.1\r\nHost: h\r\n" + upgrade)  # head not even finished
        node.proc.send_signal(signal.SIGTERM)
        assert node.proc.wait(timeout=15) == 0
        held.close()
    finally:
        node.stop()
