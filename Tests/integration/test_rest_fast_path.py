"""REST writes served on the event loop (RestFastPath) answer exactly like the Hummingbird path.

A request with an `X-Firebase-ETag` header always goes to Hummingbird (the fast path leaves ETag
requests alone), and `X-Firebase-ETag: false` changes nothing about a write's answer, so sending
each request twice, without and with that header, compares the two fronts on the same node. The
node's `ember_rest_fast_path_requests_total` counter says which path answered."""
import json
import re
import signal
import socket
import time
import uuid

import requests

FAST_COUNTER = re.compile(r"^ember_rest_fast_path_requests_total(?:\{[^}]*\})? (\d+(?:\.\d+)?)$", re.M)


def fast_count(node):
    m = FAST_COUNTER.search(requests.get(node.url + "/metrics", timeout=10).text)
    return int(float(m.group(1))) if m else 0


def answer(resp):
    """Status, headers (but Date) and body; a POST's generated name is masked."""
    headers = {k.lower(): v for k, v in resp.headers.items() if k.lower() != "date"}
    body = re.sub(r'"name":"-[A-Za-z0-9_-]{19}"', '"name":"<push id>"', resp.text)
    return resp.status_code, headers, body


def test_fast_and_hummingbird_paths_answer_writes_alike(node):
    owner = "Bearer owner"
    rules = {"rules": {".read": True, "locked": {".write": False}, "$other": {".write": True}}}
    cases = [
        ("PUT", "a/b.json", '{"x":1,"y":[1,2]}', {}),
        ("PUT", "a/b.json?print=silent", "1", {}),
        ("PUT", "a/b.json?print=pretty", '{"k":{"z":true}}', {}),
        ("PUT", "a/b.json", "{bad", {}),
        ("PUT", "a/b.json", "", {}),
        ("PUT", "a/.b.json", "1", {}),  # an invalid path: Hummingbird answers the parse error
        ("PUT", "a/b.json", '{"t":{".sv":"timestamp"}}', {}),
        ("PUT", "a/b.json", '{"n":{".sv":{"increment":2}}}', {}),
        ("PATCH", "a.json", '{"b/c":2,"d":3}', {}),
        ("PATCH", "a.json", "[1,2]", {}),
        ("PATCH", "a.json", '{"b/.x":2}', {}),
        ("DELETE", "a/d.json", "", {}),
        ("DELETE", "a/d.json?print=silent", "", {}),
        ("POST", "list.json", '{"v":1}', {}),
        ("POST", "list.json?print=silent", "2", {}),
        ("PUT", "locked/x.json", "1", {}),
        ("PUT", "locked/x.json", "1", {"Authorization": owner}),
        ("PUT", "open/x.json?auth=not-a-token", "1", {}),
    ]
    for fast in (True, False):
        ns = "fp" + uuid.uuid4().hex[:8]
        extra = {} if fast else {"X-Firebase-ETag": "false"}
        r = requests.put(f"{node.url}/.settings/rules.json?ns={ns}", data=json.dumps(rules),
                         headers={"Authorization": owner}, timeout=10)
        assert r.status_code == 200, r.text
        before = fast_count(node)
        got = []
        for method, path, body, headers in cases:
            sep = "&" if "?" in path else "?"
            resp = requests.request(method, f"{node.url}/{path}{sep}ns={ns}", data=body, headers={**headers, **extra}, timeout=10)
            got.append(answer(resp))
        counted = fast_count(node) - before
        if fast:
            fast_answers = got
            taken = len(cases) - 1  # all but the unparsable path
            assert counted == taken, f"{counted} of {taken} writes took the fast path"
        else:
            assert counted == 0, "requests with X-Firebase-ETag went to the fast path"
            slow_answers = got
        data = requests.get(f"{node.url}/.json?ns={ns}", timeout=10).json()
        if fast:
            fast_data = data
        else:
            slow_data = data
    for case, f, s in zip(cases, fast_answers, slow_answers):
        if case[2].find(".sv") >= 0 and f[0] == 200:
            # Server timestamps differ between the runs; the shape must not.
            assert f[0] == s[0] and f[1] == s[1], case
            continue
        assert f == s, f"{case}: fast {f} vs hummingbird {s}"
    # Both runs wrote the same data (push ids and timestamps aside).
    assert set(fast_data) == set(slow_data)
    assert fast_data["a"]["b"]["n"] == slow_data["a"]["b"]["n"] == 2
    assert len(fast_data["list"]) == len(slow_data["list"]) == 2
    assert "locked" in fast_data and fast_data["locked"] == slow_data["locked"] == {"x": 1}


def test_other_requests_go_to_hummingbird(node, ns):
    before = fast_count(node)
    big = json.dumps({"v": "x" * (70 * 1024)})
    assert requests.put(f"{node.url}/big.json?ns={ns}", data=big, timeout=10).status_code == 200
    assert requests.get(f"{node.url}/big/v.json?ns={ns}", timeout=10).json() == "x" * (70 * 1024)
    r = requests.put(f"{node.url}/big/.priority.json?ns={ns}", data="3", timeout=10)
    assert r.status_code == 200, r.text
    etag = requests.get(f"{node.url}/big/v.json?ns={ns}", headers={"X-Firebase-ETag": "true"}, timeout=10).headers["ETag"]
    assert requests.put(f"{node.url}/big/v.json?ns={ns}", data='"y"', headers={"if-match": etag}, timeout=10).status_code == 200
    assert requests.post(f"{node.url}/big/v.json?ns={ns}&x-http-method-override=PUT", data='"z"', timeout=10).status_code == 200
    assert requests.put(f"{node.url}/big/v.json?ns={ns}&shallow=true", data='"z"', timeout=10).status_code == 400
    assert fast_count(node) == before, "only plain small data writes take the fast path"


def read_response(f):
    status = f.readline().decode()
    assert status.startswith("HTTP/1.1 "), status
    headers = {}
    while True:
        line = f.readline().decode().strip()
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return int(status.split()[1]), body.decode()


def test_pipelined_requests_are_answered_in_order_across_both_paths(node, ns):
    """HTTP/1.1 pipelining: fast writes and Hummingbird reads interleaved in one send; every
    read sees the write before it, and the answers come back in request order."""
    def req(method, path, body=""):
        return (f"{method} /{path}?ns={ns} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()

    batch = []
    expect = []
    for i in range(20):
        batch.append(req("PUT", "seq.json", str(i)))
        expect.append((200, str(i)))
        batch.append(req("GET", "seq.json"))
        expect.append((200, str(i)))
    batch.append(req("PATCH", "obj.json", '{"a":1}'))
    expect.append((200, '{"a":1}'))
    batch.append(req("GET", "obj.json"))
    expect.append((200, '{"a":1}'))
    with socket.create_connection(("127.0.0.1", node.port), timeout=20) as s:
        s.sendall(b"".join(batch))
        f = s.makefile("rb")
        got = [read_response(f) for _ in expect]
    assert got == expect


def raw_put(ns, i):
    body = str(i)
    return f"PUT /seq/k{i:04d}.json?ns={ns} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()


def test_many_pipelined_writes_split_anywhere_are_answered_in_order(node, ns):
    """More writes in one send than the byte-level fast path keeps unanswered (it stops reading
    and goes on as they are answered), then writes cut at every byte boundary: all answered in
    order, all stored."""
    n = 600
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as s:
        s.sendall(b"".join(raw_put(ns, i) for i in range(n)))
        f = s.makefile("rb")
        got = [read_response(f) for _ in range(n)]
        assert got == [(200, str(i)) for i in range(n)]
        # One request a byte at a time, then three requests in uneven pieces.
        for b in raw_put(ns, n):
            s.sendall(bytes([b]))
        assert read_response(f) == (200, str(n))
        stream = b"".join(raw_put(ns, i) for i in range(n + 1, n + 4))
        for at in range(0, len(stream), 13):
            s.sendall(stream[at:at + 13])
        assert [read_response(f) for _ in range(3)] == [(200, str(i)) for i in range(n + 1, n + 4)]
    data = requests.get(f"{node.url}/seq.json?ns={ns}", timeout=10).json()
    assert data == {f"k{i:04d}": i for i in range(n + 4)}


def test_writes_then_a_malformed_request_are_answered_then_refused(node, ns):
    """The full HTTP stack takes over at a request the fast path does not take, even a malformed
    one: the writes before it are answered first, then its parser's 400 closes the connection."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=20) as s:
        s.sendall(raw_put(ns, 1) + raw_put(ns, 2) + b"NOT A REQUEST\r\n\r\n")
        f = s.makefile("rb")
        assert [read_response(f) for _ in range(2)] == [(200, "1"), (200, "2")]
        status, body = read_response(f)
        assert status == 400 and "error" in json.loads(body)
        assert f.read() == b"", "the connection closes after the refusal"
    assert requests.get(f"{node.url}/seq.json?ns={ns}", timeout=10).json() == {"k0001": 1, "k0002": 2}


def test_write_then_half_close_is_answered(node, ns):
    with socket.create_connection(("127.0.0.1", node.port), timeout=20) as s:
        s.sendall(raw_put(ns, 7))
        s.shutdown(socket.SHUT_WR)
        f = s.makefile("rb")
        assert read_response(f) == (200, "7")
        assert f.read() == b""
    assert requests.get(f"{node.url}/seq/k0007.json?ns={ns}", timeout=10).json() == 7


def test_graceful_shutdown_closes_a_connection_served_by_the_fast_path():
    """An idle keep-alive connection whose requests were all plain writes does not hold the
    node's graceful shutdown."""
    from conftest import Node
    n = Node().start()
    try:
        with socket.create_connection(("127.0.0.1", n.port), timeout=20) as s:
            s.sendall(raw_put("gs", 1))
            f = s.makefile("rb")
            assert read_response(f) == (200, "1")
            t0 = time.time()
            n.proc.send_signal(signal.SIGTERM)
            n.proc.wait(timeout=15)
            assert n.proc.returncode == 0
            assert time.time() - t0 < 10
            assert f.read() == b""
    finally:
        n.stop()
