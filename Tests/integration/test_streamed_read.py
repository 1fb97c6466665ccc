"""Streamed REST reads (issue 42): a GET of a large location is written as the node walks one
snapshot, paced by the client's reading. Real emberd, real sockets.

- A client that stops reading mid-answer does not make the node buffer the rest: the node's
  anonymous resident memory stays within STALLED_READ_LIMIT_MB of its level before, measured
  after another client read the same location whole meanwhile (the barrier: time for the node to
  have produced the stalled answer too, had it not waited for the socket).
- The stalled answer, resumed after writes below the location, is the snapshot it started from.
- ETags, If-None-Match, pretty, shallow and export on a streamed (chunked) answer.
- Queries stream their window (key ranges, indexed ranges, limits) and carry no ETag.
- An SSE stream's first event (the whole location) streams too: a stalled listener does not grow
  the node, and the events after it follow its snapshot.
"""
import json
import socket
import uuid

import pytest
import requests

from conftest import Node

# Generous: a streamed read holds about one 256 KiB chunk; the location is STALLED_TREE_MB.
STALLED_READ_LIMIT_MB = 16
STALLED_TREE_MB = 32
# The stalled client's receive buffer: small, so the node meets backpressure early.
CLIENT_RCVBUF = 64 * 1024


def rss_anon_kb(pid):
    """Anonymous resident memory (heap); file pages of LMDB's map are not the node's buffers."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc status")


def big_tree(n, width):
    return {f"c{i:06d}": {"n": i, "s": "v" * width, "p": {"x": i % 7, "y": [1, 2, 3]}} for i in range(n)}


def put_tree(node, path, tree, batch=2000):
    keys = sorted(tree)
    for i in range(0, len(keys), batch):
        part = {k: tree[k] for k in keys[i:i + batch]}
        r = requests.patch(f"{node.url}{path}.json?print=silent", data=json.dumps(part), timeout=120)
        assert r.status_code == 204, r.text


class RawGet:
    """A GET on a raw socket read at the test's pace (HTTP/1.1, chunked answer)."""

    def __init__(self, port, target, headers=""):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
        self.s.connect(("127.0.0.1", port))
        self.s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        self.buf = b""

    def read_some(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            assert d, "connection closed early"
            self.buf += d

    def read_all(self, until=None):
        """The rest of the answer: its head and its de-chunked body (or the body up to and with
        the first `until`, for an answer that does not end: an event stream)."""
        head_end = None
        while head_end is None:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                head_end = None
                d = self.s.recv(1 << 20)
                assert d, "closed in the head"
                self.buf += d
        head = self.buf[:head_end].decode()
        rest = self.buf[head_end + 4:]
        assert "transfer-encoding: chunked" in head.lower(), head
        body = bytearray()
        pos = 0
        while True:
            while rest.find(b"\r\n", pos) < 0:
                d = self.s.recv(1 << 20)
                assert d, "closed mid-answer"
                rest += d
            line_end = rest.find(b"\r\n", pos)
            size = int(rest[pos:line_end].split(b";")[0], 16)
            while len(rest) < line_end + 2 + size + 2:
                d = self.s.recv(1 << 20)
                assert d, "closed mid-chunk"
                rest += d
            body += rest[line_end + 2:line_end + 2 + size]
            pos = line_end + 2 + size + 2
            if size == 0:
                break
            if until is not None and until in body:
                return head, bytes(body[:body.index(until) + len(until)])
        self.s.close()
        return head, bytes(body)


@pytest.fixture(scope="module")
def stream_node():
    n = Node().start()
    yield n
    n.stop()


def test_a_stalled_reader_does_not_grow_the_node_and_gets_its_snapshot(stream_node):
    node = stream_node
    width = 700
    count = STALLED_TREE_MB * (1 << 20) // (width + 60)
    tree = big_tree(count, width)
    path = f"/stall/{uuid.uuid4().hex}"
    put_tree(node, path, tree)
    # Warm-up: one whole read (allocator pools, read pool threads) before the baseline.
    assert requests.get(f"{node.url}{path}.json", timeout=300).json() == tree
    before = rss_anon_kb(node.proc.pid)

    stalled = RawGet(node.port, f"{path}.json")
    stalled.read_some(8 * 1024)  # a few KB, then the client stops reading
    # Barrier: another client reads the same location whole. Had the node not waited for the
    # stalled socket, it would have produced that answer too by now.
    r = requests.get(f"{node.url}{path}.json", timeout=300)
    assert r.headers.get("Transfer-Encoding") == "chunked"
    assert r.json() == tree
    grown_mb = (rss_anon_kb(node.proc.pid) - before) / 1024
    print(f"stalled read: RssAnon {before / 1024:.1f} MiB before, grown {grown_mb:.1f} MiB")
    assert grown_mb <= STALLED_READ_LIMIT_MB, f"node grew {grown_mb:.1f} MiB with a stalled {STALLED_TREE_MB} MiB read"

    # Writes below the location while the stalled answer waits: changed, added, deleted.
    changes = {f"c{i:06d}/n": -1 for i in range(0, count, 97)}
    changes.update({f"added{i}": i for i in range(50)})
    changes.update({f"c{i:06d}": None for i in range(1, count, 89) if i % 97})
    r = requests.patch(f"{node.url}{path}.json", data=json.dumps(changes), timeout=60)
    assert r.status_code == 200, r.text

    head, body = stalled.read_all()
    assert head.startswith("HTTP/1.1 200")
    assert json.loads(body) == tree, "the stalled answer is the snapshot it started from"
    after = requests.get(f"{node.url}{path}.json", timeout=300).json()
    assert after != tree and after["added7"] == 7


def test_streamed_answers_keep_etags_pretty_shallow_and_export(stream_node):
    node = stream_node
    path = f"/fmt/{uuid.uuid4().hex}"
    tree = {f"k{i:05d}": {"v": "x" * 100, "i": i} for i in range(6000)}  # ~0.8 MB: chunked
    put_tree(node, path, tree)
    requests.put(f"{node.url}{path}/k00003/.priority.json", json=5, timeout=30).raise_for_status()
    url = f"{node.url}{path}.json"

    r = requests.get(url, headers={"X-Firebase-ETag": "true"}, timeout=60)
    assert r.headers.get("Transfer-Encoding") == "chunked" and r.json() == tree
    etag = r.headers["ETag"]
    assert etag.startswith("v")
    nm = requests.get(url, headers={"If-None-Match": etag}, timeout=60)
    assert nm.status_code == 304 and nm.headers["ETag"] == etag and nm.content == b""
    assert requests.get(f"{node.url}{path}/none.json", headers={"X-Firebase-ETag": "true"}, timeout=10).headers["ETag"] == "null_etag"

    pretty = requests.get(url + "?print=pretty", timeout=60)
    assert pretty.text.endswith("}\n") and pretty.text.startswith('{\n  "k00000" : {') and pretty.json() == tree
    shallow = requests.get(url + "?shallow=true", timeout=60).json()
    assert shallow == {k: True for k in tree}
    exported = requests.get(url + "?format=export", timeout=60).json()
    expected = json.loads(json.dumps(tree))
    expected["k00003"][".priority"] = 5.0
    assert exported == expected
    silent = requests.get(url + "?print=silent", timeout=60)
    assert silent.status_code == 204 and silent.content == b""
    # Small answers keep a Content-Length (sent whole).
    small = requests.get(f"{node.url}{path}/k00001.json", timeout=10)
    assert small.headers.get("Content-Length") and small.json() == tree["k00001"]


def test_a_streamed_query_answers_exactly_its_window(stream_node):
    node = stream_node
    # `$any/dinosaurs` is indexed on height by the suite's rules (conftest RULES).
    path = f"/q{uuid.uuid4().hex}/dinosaurs"
    tree = {f"d{i:05d}": {"height": i % 700, "pad": "x" * 100} for i in range(6000)}  # ~0.8 MB
    put_tree(node, path, tree)
    url = f"{node.url}{path}.json"
    by_height = sorted(tree, key=lambda k: (tree[k]["height"], k))
    cases = [
        ({"orderBy": '"$key"', "startAt": '"d01000"'}, [k for k in sorted(tree) if k >= "d01000"]),
        ({"orderBy": '"height"', "startAt": 100, "endAt": 600}, [k for k in tree if 100 <= tree[k]["height"] <= 600]),
        ({"orderBy": '"height"', "limitToLast": 4000}, by_height[-4000:]),
        ({"orderBy": '"$key"', "endAt": '"d04000"', "limitToLast": 3500}, [k for k in sorted(tree) if k <= "d04000"][-3500:]),
    ]
    for params, keys in cases:
        r = requests.get(url, params=params, headers={"X-Firebase-ETag": "true"}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.headers.get("Transfer-Encoding") == "chunked", (params, r.headers)
        assert r.json() == {k: tree[k] for k in keys}, params
        assert "ETag" not in r.headers  # a window has no ETag (as when it was read whole)
    # Export and pretty answers of a window; a small window goes out whole.
    exported = requests.get(url, params={"orderBy": '"height"', "equalTo": 5, "format": "export", "print": "pretty"}, timeout=60)
    assert exported.json() == {k: v for k, v in tree.items() if v["height"] == 5} and exported.text.endswith("}\n")
    small = requests.get(url, params={"orderBy": '"$key"', "limitToFirst": 2}, timeout=10)
    assert small.headers.get("Content-Length") and small.json() == {k: tree[k] for k in sorted(tree)[:2]}
    # An empty window is null; a query refused for its index still answers 400.
    assert requests.get(url, params={"orderBy": '"$key"', "startAt": '"e"'}, timeout=10).json() is None
    unindexed = requests.get(url, params={"orderBy": '"pad"'}, timeout=10)
    assert unindexed.status_code == 400 and "Index not defined" in unindexed.json()["error"]


def test_an_event_streams_first_event_streams_and_a_stalled_listener_does_not_grow_the_node(stream_node):
    node = stream_node
    width = 700
    count = (STALLED_TREE_MB // 2) * (1 << 20) // (width + 60)
    tree = big_tree(count, width)
    path = f"/sse/{uuid.uuid4().hex}"
    put_tree(node, path, tree)
    assert requests.get(f"{node.url}{path}.json", timeout=300).json() == tree  # warm-up
    before = rss_anon_kb(node.proc.pid)

    stalled = RawGet(node.port, f"{path}.json", headers="Accept: text/event-stream\r\n")
    stalled.read_some(8 * 1024)
    # Barrier: another listener receives its whole first event meanwhile.
    other = RawGet(node.port, f"{path}.json", headers="Accept: text/event-stream\r\n")
    head, first = other.read_all(until=b"\n\n")
    assert head.startswith("HTTP/1.1 200") and "text/event-stream" in head
    event, data = first.decode().split("\n", 1)
    assert event == "event: put" and data.startswith("data: ")
    assert json.loads(data[len("data: "):]) == {"path": "/", "data": tree}
    grown_mb = (rss_anon_kb(node.proc.pid) - before) / 1024
    print(f"stalled listener: RssAnon {before / 1024:.1f} MiB before, grown {grown_mb:.1f} MiB")
    assert grown_mb <= STALLED_READ_LIMIT_MB, f"node grew {grown_mb:.1f} MiB with a stalled {STALLED_TREE_MB // 2} MiB first event"
    other.s.close()

    # A write after the stalled stream's snapshot: its first event is the snapshot, then the change.
    r = requests.put(f"{node.url}{path}/c000001/n.json", data="-5", timeout=30)
    assert r.status_code == 200, r.text
    _, rest = stalled.read_all(until=b"event: put\ndata: {\"data\":-5")
    events = rest.split(b"\n\n")
    assert json.loads(events[0].decode().split("\n", 1)[1][len("data: "):]) == {"path": "/", "data": tree}
    assert rest.endswith(b'event: put\ndata: {"data":-5')
    stalled.s.close()
