"""SSE streams: many at once, ordering, and a slow reader bounded by its queue."""
import json
import socket
import threading
import time

import requests

from conftest import Node


def read_events(resp, out, stop_after):
    event = None
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event not in (None, "keep-alive"):
            out.append((event, json.loads(line[5:])))
            if len(out) >= stop_after:
                return


def test_many_streams_receive_every_change_in_order(node, ns):
    n_streams, n_writes = 40, 20
    results = [[] for _ in range(n_streams)]
    responses = [requests.get(f"{node.url}/feed.json?ns={ns}", headers={"Accept": "text/event-stream"}, stream=True, timeout=30)
                 for _ in range(n_streams)]
    threads = [threading.Thread(target=read_events, args=(r, out, n_writes + 1)) for r, out in zip(responses, results)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    for i in range(n_writes):
        requests.put(f"{node.url}/feed/n.json?ns={ns}&print=silent", data=str(i))
    for t in threads:
        t.join(30)
    for r in responses:
        r.close()
    for out in results:
        assert out[0] == ("put", {"path": "/", "data": None})
        assert [e[1]["data"] for e in out[1:]] == list(range(n_writes))
        assert all(e == ("put", {"path": "/n", "data": i}) for i, e in zip(range(n_writes), out[1:]))


def test_slow_reader_is_disconnected_and_node_serves_others(tmp_path):
    node = Node(data_dir=str(tmp_path / "d"), extra_args=["--sse-queue-limit", "16"]).start()
    try:
        slow = socket.create_connection(("127.0.0.1", node.port))
        slow.sendall(b"GET /big.json HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        time.sleep(0.3)
        value = "v" * 100_000
        for i in range(200):
            assert requests.put(f"{node.url}/big/n.json?print=silent", data=json.dumps(value + str(i))).status_code == 204
        # The slow stream was closed: draining it ends with EOF instead of 200 events.
        slow.settimeout(10)
        received = 0
        while True:
            chunk = slow.recv(1 << 20)
            if not chunk:
                break
            received += len(chunk)
        assert received < 200 * 100_000
        fast = requests.get(f"{node.url}/big/n.json")
        assert fast.status_code == 200 and fast.json() == value + "199"
    finally:
        node.stop()
