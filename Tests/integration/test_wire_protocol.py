"""The Firebase wire protocol v5 over WebSocket against a real emberd (reference §6)."""
import asyncio
import base64
import hashlib
import json
import struct

import pytest
import requests

from wire import WireClient, read_frame, upgraded_socket, ws_frame


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def leaf_hash(v):
    """§6.8 hash of a leaf, computed independently of the server."""
    if isinstance(v, bool):
        text = "boolean:" + ("true" if v else "false")
    elif isinstance(v, (int, float)):
        text = "number:" + struct.pack(">d", float(v)).hex()
    else:
        text = "string:" + v
    return base64.b64encode(hashlib.sha1(text.encode()).digest()).decode()


def test_hello_listen_data_before_ok(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        h = c.hello["d"]
        assert c.hello["t"] == "c" and h["t"] == "h"
        assert h["d"]["v"] == "5" and h["d"]["h"] == f"127.0.0.1:{node.port}" and h["d"]["s"]
        requests.put(f"{node.url}/a.json?ns={ns}", data='{"b": 1}')
        before, resp = await c.request("q", {"p": "/a", "h": ""})
        assert resp == {"s": "ok", "d": {}}
        assert before[0]["a"] == "d" and before[0]["b"]["p"] == "a" and before[0]["b"]["d"] == {"b": 1}
        await c.close()
    run(go())


def test_writes_push_to_listeners_then_ack(node, ns):
    async def go():
        a = await WireClient.connect(node.url, ns)
        b = await WireClient.connect(node.url, ns)
        await b.request("q", {"p": "/room", "h": ""})
        before, resp = await a.request("p", {"p": "room/msg", "d": {"text": "hi", ".priority": 3}})
        assert resp == {"s": "ok", "d": ""}
        push = await b.next_push()
        assert push["a"] == "d" and push["b"]["p"] == "room/msg"
        assert push["b"]["d"] == {"text": "hi", ".priority": 3}
        _, resp = await a.request("m", {"p": "room", "d": {"x/y": 1, "msg": None}})
        assert resp["s"] == "ok"
        push = await b.next_push()
        assert push["a"] == "m" and push["b"]["p"] == "room" and push["b"]["d"] == {"x/y": 1, "msg": None}
        assert requests.get(f"{node.url}/room.json?ns={ns}").json() == {"x": {"y": 1}}
        await a.close()
        await b.close()
    run(go())


def test_compare_and_set_with_hash(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        await c.request("q", {"p": "/counter", "h": ""})
        _, resp = await c.request("p", {"p": "counter", "d": 1, "h": ""})   # "" = absent
        assert resp["s"] == "ok"
        _, resp = await c.request("p", {"p": "counter", "d": 5, "h": leaf_hash(0)})
        assert resp["s"] == "datastale"
        _, resp = await c.request("p", {"p": "counter", "d": 2, "h": leaf_hash(1)})
        assert resp["s"] == "ok"
        assert requests.get(f"{node.url}/counter.json?ns={ns}").json() == 2
        await c.close()
    run(go())


def test_datastale_comes_after_the_current_value(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        await c.request("q", {"p": "/v", "h": ""})
        requests.put(f"{node.url}/v.json?ns={ns}", data="7")
        before, resp = await c.request("p", {"p": "v", "d": 8, "h": ""})
        assert resp["s"] == "datastale"
        seen = [p for p in c.pushes if p["b"]["p"] == "v"]
        assert seen and seen[-1]["b"]["d"] == 7
        await c.close()
    run(go())


def test_tagged_limit_query_window_moves(node, ns):
    async def go():
        requests.put(f"{node.url}/scores.json?ns={ns}", data='{"a": 1, "b": 5, "c": 3}')
        c = await WireClient.connect(node.url, ns)
        before, resp = await c.request("q", {"p": "/scores", "q": {"l": 2, "vf": "r", "i": ".value"}, "t": 7, "h": ""})
        assert resp["s"] == "ok" and "w" not in resp["d"]  # .indexOn ".value" is defined for scores
        assert before[0]["b"] == {"p": "scores", "d": {"b": 5, "c": 3}, "t": 7, "v": before[0]["b"]["v"]}
        requests.put(f"{node.url}/scores/d.json?ns={ns}", data="4")   # enters, c leaves
        push = await c.next_push()
        assert push["a"] == "m" and push["b"]["t"] == 7 and push["b"]["d"] == {"c": None, "d": 4}
        requests.put(f"{node.url}/scores/a.json?ns={ns}", data="0")   # outside the window: no push
        requests.put(f"{node.url}/scores/b.json?ns={ns}", data="6")   # changes inside
        push = await c.next_push()
        assert push["b"]["d"] == {"b": 6}
        _, resp = await c.request("q", {"p": "/scores", "q": {"i": "zz", "l": 1, "vf": "l"}, "t": 8, "h": ""})
        assert resp["d"] == {"w": ["no_index"]}
        await c.close()
    run(go())


def test_unlisten_stops_pushes_and_get(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        await c.request("q", {"p": "/x", "h": ""})
        _, resp = await c.request("n", {"p": "/x"})
        assert resp["s"] == "ok"
        c.pushes.clear()
        requests.put(f"{node.url}/x.json?ns={ns}", data='{"k": 1}')
        _, resp = await c.request("g", {"p": "/x", "q": {}})
        assert resp == {"s": "ok", "d": {"k": 1}}
        assert not [p for p in c.pushes if p["b"]["p"].startswith("x")]
        await c.close()
    run(go())


def test_on_disconnect_runs_when_the_connection_drops(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        _, r1 = await c.request("o", {"p": "presence/me", "d": {".sv": "timestamp"}})
        _, r2 = await c.request("om", {"p": "presence", "d": {"status": "offline"}})
        _, r3 = await c.request("o", {"p": "cancelled/x", "d": True})
        _, r4 = await c.request("oc", {"p": "cancelled", "d": None})
        assert [r["s"] for r in (r1, r2, r3, r4)] == ["ok"] * 4
        await c.close()
        for _ in range(100):
            got = requests.get(f"{node.url}/.json?ns={ns}").json()
            if got and "presence" in got and "status" in got["presence"]:
                break
            await asyncio.sleep(0.05)
        assert isinstance(got["presence"]["me"], int) and got["presence"]["status"] == "offline"
        assert "cancelled" not in got
    run(go())


def test_large_messages_are_split_into_frames(node, ns):
    big = "x" * 50_000

    async def go():
        c = await WireClient.connect(node.url, ns)
        # Client → server: send the put split into frames, as SDKs do above 16384 characters.
        msg = json.dumps({"t": "d", "d": {"r": 1, "a": "p", "b": {"p": "big", "d": big}}})
        chunks = [msg[i:i + 16384] for i in range(0, len(msg), 16384)]
        await c.ws.send(str(len(chunks)))
        for ch in chunks:
            await c.ws.send(ch)
        resp = await c._recv()
        assert resp["d"]["b"]["s"] == "ok"
        # Server → client: a count frame then the parts (WireClient reassembles).
        c.r = 1
        _, resp = await c.request("g", {"p": "/big", "q": {}})
        assert resp["d"] == big
        await c.close()
    run(go())


def test_bad_requests_get_error_statuses(node, ns):
    async def go():
        c = await WireClient.connect(node.url, ns)
        _, resp = await c.request("p", {"p": "a.b", "d": 1})
        assert resp["s"] != "ok"
        _, resp = await c.request("p", {"p": "a", "d": {"bad$key": 1}})
        assert resp["s"] != "ok"
        _, resp = await c.request("zz", {})
        assert resp["s"] != "ok"
        _, resp = await c.request("auth", {"cred": "owner"})
        assert resp["s"] == "ok"
        assert requests.get(f"{node.url}/.json?ns={ns}").json() is None
        await c.close()
    run(go())


def test_pipelined_writes_are_acknowledged_in_order(node, ns):
    """An SDK sends writes without waiting for answers: 300 `p`/`m` requests written at once, with
    a refused one and a failed compare-and-set among them. Every request gets its answer, in
    request order, with its own status; the data is what the writes made, in their order; a
    listener got each change before its writer's ack; a `g` sent after them sees them all."""
    async def go():
        listener = await WireClient.connect(node.url, ns)
        await listener.request("q", {"p": "/pipe", "h": ""})
        c = await WireClient.connect(node.url, ns)
        expected = {}
        frames = []
        for r in range(1, 301):
            if r == 100:
                body, want = ("p", {"p": "pipe/bad", "d": {"a.b": 1}}), "invalid_data"  # key with "."
            elif r == 200:
                body, want = ("p", {"p": "pipe/k5", "d": 0, "h": "not-the-hash"}), "datastale"
            elif r % 50 == 0:
                body, want = ("m", {"p": "pipe", "d": {f"m{r}": r}}), "ok"
            else:
                body, want = ("p", {"p": f"pipe/k{r % 20}", "d": r}), "ok"
            expected[r] = want
            frames.append(json.dumps({"t": "d", "d": {"r": r, "a": body[0], "b": body[1]}}))
        for f in frames:  # no await between requests beyond the socket send itself
            await c.ws.send(f)
        got = []
        while len(got) < 300:
            msg = await asyncio.wait_for(c._recv(), 30)
            d = msg.get("d", {})
            if msg.get("t") == "d" and "r" in d:
                got.append((d["r"], d["b"]["s"]))
        assert [r for r, _ in got] == list(range(1, 301))
        assert {r: s for r, s in got} == expected
        # A later read on the same connection waits for the writes before it.
        c.r = 300
        _, resp = await c.request("g", {"p": "/pipe/k19", "q": {}})
        assert resp == {"s": "ok", "d": 299}
        data = requests.get(f"{node.url}/pipe.json?ns={ns}").json()
        last = {f"k{k}": max(r for r in range(1, 301) if r % 20 == k and r % 50 and r not in (100, 200)) for k in range(20)}
        last.update({f"m{r}": r for r in range(50, 301, 50) if r not in (100, 200)})
        assert data == last
        # The listener saw the writes in log order (each push's version grows).
        versions = []
        while len(versions) < 298:
            push = await listener.next_push()
            versions.append(push["b"].get("v"))
        assert versions == sorted(versions)
        await c.close()
        await listener.close()
    run(go())


def test_writes_mixed_with_other_requests_in_one_read(node, ns):
    """Pipelined writes are handled on the connection's event loop as they are read, the rest by
    its session's task. One TCP write carries writes mixed with a get, a listen and a write the
    front refuses: each read sees exactly the writes sent before it, every request is answered in
    request order, and the listener's data comes before the answer of the write that made it."""
    frames = [("p", {"p": "mix/x", "d": 1}), ("p", {"p": "mix/x", "d": 2}), ("g", {"p": "mix/x", "q": {}}),
              ("p", {"p": "mix/x", "d": 3}), ("p", {"p": "mix/bad", "d": {"a.b": 1}}), ("p", {"p": "mix/x", "d": 4}),
              ("q", {"p": "/mix/x", "h": ""}), ("m", {"p": "mix", "d": {"y": 8}}), ("p", {"p": "mix/x", "d": 5})]
    frames += [("p", {"p": f"mix/k/{i}", "d": i}) for i in range(50)]
    frames += [("g", {"p": "mix/k", "q": {}}), ("p", {"p": "mix/x", "d": 6})]
    s = upgraded_socket(node.port, ns)
    s.settimeout(30)
    try:
        assert read_frame(s)[0] == 0x1  # hello
        s.sendall(b"".join(ws_frame(json.dumps({"t": "d", "d": {"r": r, "a": a, "b": b}}))
                           for r, (a, b) in enumerate(frames, start=1)))
        answers, events = [], []  # events: ("push", data) / ("answer", r) in arrival order
        while len(answers) < len(frames):
            op, payload = read_frame(s)
            msg = json.loads(payload)
            d = msg["d"]
            if "r" in d:
                answers.append((d["r"], d["b"]))
                events.append(("answer", d["r"]))
            elif d.get("a") == "d":
                events.append(("push", d["b"]["d"]))
        assert [r for r, _ in answers] == list(range(1, len(frames) + 1))
        by_r = dict(answers)
        assert by_r[3] == {"s": "ok", "d": 2}
        assert by_r[5]["s"] == "invalid_data"
        assert by_r[7] == {"s": "ok", "d": {}}  # the listen
        assert by_r[60] == {"s": "ok", "d": {str(i): i for i in range(50)}}
        writes = [a for a in answers if a[0] not in (3, 5, 7, 60)]
        assert all(b == {"s": "ok", "d": ""} for _, b in writes), writes
        # The listen's first data is the value the writes before it made; later writes push theirs
        # before their own answers.
        assert events.index(("push", 4)) < events.index(("answer", 7))
        assert events.index(("answer", 7)) < events.index(("push", 5)) < events.index(("answer", 9))
        assert events.index(("push", 6)) < events.index(("answer", 61))
    finally:
        s.close()
    data = requests.get(f"{node.url}/mix.json?ns={ns}").json()
    assert data == {"x": 6, "y": 8, "k": list(range(50))}


def test_stamped_writes_sent_again_are_answered_not_applied_twice(node, ns):
    """Ember extension: `w` {id, n} names a write; the same stamp again (another connection, as a
    client that reconnected after losing the answer) gets the first answer and changes nothing."""
    inc = {".sv": {"increment": 1}}

    async def go():
        a = await WireClient.connect(node.url, ns)
        b = await WireClient.connect(node.url, ns)
        await b.request("q", {"p": "/c", "h": ""})
        _, resp = await a.request("p", {"p": "c", "d": inc, "w": {"id": "app1", "n": 1}})
        assert resp["s"] == "ok"
        _, resp = await a.request("m", {"p": "/", "d": {"c": inc}, "w": {"id": "app1", "n": 2}})
        assert resp["s"] == "ok"
        await a.close()
        a = await WireClient.connect(node.url, ns)
        # Both sent again on the new connection, pipelined: answered ok, not applied.
        _, r1 = await a.request("p", {"p": "c", "d": inc, "w": {"id": "app1", "n": 1}})
        _, r2 = await a.request("m", {"p": "/", "d": {"c": inc}, "w": {"id": "app1", "n": 2}})
        assert r1["s"] == "ok" and r2["s"] == "ok"
        assert requests.get(f"{node.url}/c.json?ns={ns}").json() == 2
        # Another writer, and unstamped writes, count as usual.
        await a.request("p", {"p": "c", "d": inc, "w": {"id": "app2", "n": 1}})
        await a.request("p", {"p": "c", "d": inc})
        assert requests.get(f"{node.url}/c.json?ns={ns}").json() == 4
        # The listener heard each value once: 1, 2, 3, 4 (nothing for the resends).
        values = []
        try:
            while True:
                push = await b.next_push(timeout=1)
                d = push["b"]["d"]
                values.append(d.get("c") if isinstance(d, dict) else d)
        except asyncio.TimeoutError:
            pass
        assert values == [1, 2, 3, 4], values
        # Bad stamps are refused and write nothing.
        for bad in ({"id": "a/b", "n": 1}, {"id": "ok", "n": 0}, {"id": "x" * 65, "n": 1}, {"id": "ok"}, "app1:1"):
            _, resp = await a.request("p", {"p": "bad", "d": 1, "w": bad})
            assert resp["s"] != "ok", bad
        assert requests.get(f"{node.url}/bad.json?ns={ns}").json() is None
        # The writers' record is not a namespace clients may write.
        r = requests.put(f"{node.url}/x.json?ns=_ember_writers", data="1")
        assert r.status_code in (400, 403) and "error" in r.json()
        await a.close()
        await b.close()
    run(go())
