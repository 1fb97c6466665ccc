"""Database triggers (issue 36) against real emberd processes and a real HTTP receiver:
definitions through /.settings/triggers.json, CloudEvents with before/after/delta/params/auth for
every kind of write, HMAC signatures, dead letters and replay, and delivery resumed from the
replicated cursor after a kill -9."""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import Node, wait_for

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(os.environ.get("EMBERD", "")) or ".", "ember"))

OWNER = {"Authorization": "Bearer owner"}
SECRET = "s3cret-s3cret-s3cret"


def token(uid):
    """An unsigned JWT: the default protected mode reads its claims (no keys configured)."""
    def b64(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return b64({"alg": "none", "typ": "JWT"}) + "." + b64({"sub": uid, "uid": uid}) + ".sig"


class Receiver:
    """A webhook receiver: verifies each POST's signature, records the CloudEvents in arrival
    order, and answers `status` (after `delay` seconds)."""

    def __init__(self, secret=SECRET):
        self.secret = secret.encode()
        self.events = []
        self.bad_signatures = 0
        self.status = 200
        self.delay = 0.0
        self.attempts = []  # (time, status) of every signed POST
        self.batches = []  # (Content-Type, events) of every accepted POST
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                want = "sha256=" + hmac.new(receiver.secret, body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(want, self.headers.get("X-Ember-Signature", "")):
                    with receiver.lock:
                        receiver.bad_signatures += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                if receiver.delay:
                    time.sleep(receiver.delay)
                status = receiver.status
                with receiver.lock:
                    receiver.attempts.append((time.monotonic(), status))
                if status == 200:
                    doc = json.loads(body)
                    with receiver.lock:
                        receiver.events.extend(doc if isinstance(doc, list) else [doc])
                        receiver.batches.append((self.headers.get("Content-Type"), len(doc) if isinstance(doc, list) else 1))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def received(self):
        with self.lock:
            return list(self.events)

    def wait(self, n, what="events"):
        return wait_for(f"{n} {what}", lambda: (lambda e: e if len(e) >= n else None)(self.received()))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def put_triggers(node, ns, doc, headers=OWNER):
    return requests.put(f"{node.url}/.settings/triggers.json?ns={ns}", data=json.dumps(doc), headers=headers, timeout=10)


def trig(url, path, on, **limits):
    return {"path": path, "on": on, "url": url, "secret": SECRET, **limits}


def test_definitions_are_admin_only_and_validated(node, ns, receiver):
    good = {"msgs": trig(receiver.url, "/messages/{id}", ["created"])}
    assert put_triggers(node, ns, good, headers={}).status_code == 401
    assert put_triggers(node, ns, good, headers={"Authorization": "Bearer " + token("alice")}).status_code == 401
    for bad, reason in [
        ({"msgs": trig(receiver.url, "messages/{id}", ["created"])}, "start with '/'"),
        ({"msgs": trig(receiver.url, "/messages/{id}", ["changed"])}, '"on"'),
        ({"msgs": trig("ftp://x/", "/messages/{id}", ["created"])}, "http"),
        ({"msgs": {**trig(receiver.url, "/m/{id}", ["created"]), "secret": "short"}}, "secret"),
        ({"msgs": trig(receiver.url, "/m/{id}", ["created"], retries=-1)}, "retries"),
        ({"bad name": trig(receiver.url, "/m/{id}", ["created"])}, "trigger name"),
    ]:
        r = put_triggers(node, ns, bad)
        assert r.status_code == 400 and reason in r.json()["error"], (bad, r.text)
    get = lambda: requests.get(f"{node.url}/.settings/triggers.json?ns={ns}", headers=OWNER, timeout=5)
    assert get().json() == {}, "a refused document stores nothing"
    assert put_triggers(node, ns, good).status_code == 200
    stored = get().json()
    assert stored["msgs"]["path"] == "/messages/{id}" and stored["msgs"]["retries"] == 8, "limits spelled out with defaults"
    assert requests.get(f"{node.url}/.settings/triggers.json?ns={ns}", timeout=5).status_code == 401


def test_events_carry_before_after_params_and_auth(tmp_path, receiver):
    rules = {"rules": {".read": True,
                       "messages": {"$id": {".write": "auth != null"}},
                       "counters": {".write": True}}}
    node = Node(data_dir=str(tmp_path / "d"), rules=rules).start()
    try:
        ns = "t" + uuid.uuid4().hex[:8]
        assert put_triggers(node, ns, {
            "msgs": trig(receiver.url, "/messages/{id}", ["created", "updated", "deleted"]),
            "likes": trig(receiver.url, "/rooms/{room}/likes/{uid}", ["written"]),
            "counters": trig(receiver.url, "/counters/{c}", ["written"]),
        }).status_code == 200
        u = lambda p: f"{node.url}/{p}.json?ns={ns}"
        alice = {"Authorization": "Bearer " + token("alice")}
        assert requests.put(u("messages/m1"), json={"text": "hi"}, headers=alice).status_code == 200      # created
        assert requests.patch(u("messages/m1"), json={"text": "bye"}, headers=alice).status_code == 200   # updated
        # A multi-path update at the root touching two messages (and a nested-wildcard location).
        assert requests.patch(u(""), json={"messages/m2": {"text": "two"}, "messages/m3/text": "three",
                                           "rooms/r1/likes/bob": True}, headers=OWNER).status_code == 200
        # A transaction: a conditional write (ETag) that holds.
        r = requests.get(u("messages/m2"), headers={"X-Firebase-ETag": "true"})
        assert requests.put(u("messages/m2"), json={"text": "two!"}, headers={**alice, "if-match": r.headers["ETag"]}).status_code == 200
        # A write the rules refuse: no event (the next write is the barrier).
        assert requests.put(u("messages/m9"), json={"text": "anon"}).status_code == 401
        assert requests.put(u("counters/c"), json={".sv": {"increment": 5}}).status_code == 200          # server increment
        assert requests.delete(u("messages/m1"), headers=alice).status_code == 200                         # deleted
        got = receiver.wait(8)
        # Per trigger in log order (triggers deliver independently of each other).
        per = lambda t: [(x["type"].rsplit(".", 1)[1], x["ref"]) for x in got if x["trigger"] == t]
        assert per("msgs") == [("created", "/messages/m1"), ("updated", "/messages/m1"), ("created", "/messages/m2"),
                               ("created", "/messages/m3"), ("updated", "/messages/m2"), ("deleted", "/messages/m1")], per("msgs")
        assert per("likes") == [("written", "/rooms/r1/likes/bob")] and per("counters") == [("written", "/counters/c")]
        e = {(x["ref"], x["type"].rsplit(".", 1)[1]): x for x in got}
        c = e[("/messages/m1", "created")]
        assert c["specversion"] == "1.0" and c["subject"] == "refs/messages/m1" and c["params"] == {"id": "m1"}
        assert c["authtype"] == "app_user" and c["authid"] == "alice" and c["data"]["before"] is None
        assert c["data"]["after"] == {"text": "hi"} and c["data"]["delta"] == {"text": "hi"}
        up = e[("/messages/m1", "updated")]
        assert up["data"]["before"] == {"text": "hi"} and up["data"]["after"] == {"text": "bye"} and up["data"]["delta"] == {"text": "bye"}
        m2, m3 = e[("/messages/m2", "created")], e[("/messages/m3", "created")]
        assert m2["sequence"] == m3["sequence"] and m2["id"] != m3["id"], "one entry, two events, distinct ids"
        assert m2["authtype"] == "admin" and "authid" not in m2 and m3["data"]["after"] == {"text": "three"}
        like = e[("/rooms/r1/likes/bob", "written")]
        assert like["params"] == {"room": "r1", "uid": "bob"} and like["data"]["after"] is True
        tx = e[("/messages/m2", "updated")]
        assert tx["data"]["before"] == {"text": "two"} and tx["data"]["after"] == {"text": "two!"}
        inc = e[("/counters/c", "written")]
        assert inc["data"]["after"] == 5 and inc["authtype"] == "unauthenticated"
        d = e[("/messages/m1", "deleted")]
        assert d["data"]["before"] == {"text": "bye"} and d["data"]["after"] is None
        assert not any("m9" in x["ref"] for x in got), "no event for the refused write"
        assert receiver.bad_signatures == 0
        # The cursor passed everything; status and metrics show the triggers.
        st = wait_for("cursors settled", lambda: (lambda s: s if all(t["pending"] == 0 for t in s["triggers"][ns].values()) else None)(
            requests.get(f"{node.url}/.ember/status", timeout=5).json()))
        assert st["triggers"][ns]["msgs"]["events"] == 6
        m = requests.get(f"{node.url}/metrics", timeout=5).text
        assert f'ember_trigger_lag_entries{{namespace="{ns}",trigger="msgs"}} 0' in m
        assert 'ember_trigger_deliveries_total{outcome="delivered"} 8' in m and "ember_trigger_latency_seconds_count 8" in m
    finally:
        node.stop()


def test_dead_letter_after_the_ceiling_then_replay(node, ns, receiver):
    assert put_triggers(node, ns, {"msgs": trig(receiver.url, "/messages/{id}", ["created"], retries=2, backoffMs=20, maxBackoffMs=40)}).status_code == 200
    admin = lambda p: f"{node.url}/.ember/triggers{p}?ns={ns}"
    receiver.status = 500
    assert requests.put(f"{node.url}/messages/a.json?ns={ns}", json=1).status_code == 200
    dead = wait_for("a dead letter", lambda: requests.get(admin("/msgs/dead"), headers=OWNER, timeout=5).json()["deadLetters"])
    assert dead[0]["reason"].startswith("HTTP 500 (after 3 attempts)") and dead[0]["events"][0]["ref"] == "/messages/a"
    dead_id = dead[0]["events"][0]["id"]
    # The trigger goes on (onFailure continue): the next event is delivered.
    receiver.status = 200
    assert requests.put(f"{node.url}/messages/b.json?ns={ns}", json=2).status_code == 200
    assert [e["ref"] for e in receiver.wait(1)] == ["/messages/b"]
    info = requests.get(admin(""), headers=OWNER, timeout=5).json()["triggers"]["msgs"]
    assert info["state"]["deadLetters"] == 1 and info["definition"]["secret"] == "(withheld)"
    assert "HTTP 500" in info["node"]["lastError"]
    # Replay puts it back; it arrives with its original id.
    assert requests.post(admin("/msgs/replay"), json={"from": 0}, headers=OWNER, timeout=5).status_code == 200
    got = receiver.wait(2)
    assert got[1]["ref"] == "/messages/a" and got[1]["id"] == dead_id
    assert requests.get(admin("/msgs/dead"), headers=OWNER, timeout=5).json()["deadLetters"] == []
    assert requests.post(admin("/msgs/replay"), data="[", headers=OWNER, timeout=5).status_code == 400
    assert requests.post(admin("/nope/pause"), headers=OWNER, timeout=5).status_code == 404
    assert requests.post(admin("/msgs/pause"), timeout=5).status_code == 401


def test_on_failure_stop_halts_until_resumed_then_delivers_in_order(node, ns, receiver):
    """onFailure stop: after the retry ceiling the trigger halts at the failing event (the halt
    is replicated and shown); an event committed while it is halted is not sent; resumed, both
    arrive in log order, the failed one with its id."""
    assert put_triggers(node, ns, {"st": trig(receiver.url, "/st/{id}", ["created"], retries=1, backoffMs=20, maxBackoffMs=40,
                                              onFailure="stop")}).status_code == 200
    admin = lambda p: f"{node.url}/.ember/triggers{p}?ns={ns}"
    state = lambda: requests.get(admin(""), headers=OWNER, timeout=5).json()["triggers"]["st"]["state"]
    receiver.status = 500
    assert requests.put(f"{node.url}/st/a.json?ns={ns}", json=1).status_code == 200
    halted = wait_for("the trigger halted", lambda: state().get("halted"))
    assert "HTTP 500" in halted
    attempts = len(receiver.attempts)
    assert attempts == 2, receiver.attempts
    receiver.status = 200
    assert requests.put(f"{node.url}/st/b.json?ns={ns}", json=2).status_code == 200
    # Both entries pending behind the halt (the second committed), none sent meanwhile.
    wait_for("both entries pending", lambda: state()["pending"] == 2)
    assert len(receiver.attempts) == attempts and receiver.received() == []
    assert requests.post(admin("/st/resume"), headers=OWNER, timeout=5).status_code == 200
    got = receiver.wait(2)
    assert [e["ref"] for e in got] == ["/st/a", "/st/b"]
    wait_for("the cursor past both", lambda: state()["pending"] == 0 and "halted" not in state())


def test_delivery_resumes_from_the_cursor_after_kill9(tmp_path, receiver):
    """Every committed event arrives after a kill -9 while the receiver was down, in log order;
    an event delivered twice has the same id."""
    node = Node(data_dir=str(tmp_path / "d")).start()
    ns = "k" + uuid.uuid4().hex[:8]
    try:
        assert put_triggers(node, ns, {"seq": trig(receiver.url, "/seq/{n}", ["created"], backoffMs=20, maxBackoffMs=200, retries=1000)}).status_code == 200
        for i in range(5):
            assert requests.put(f"{node.url}/seq/{i:03}.json?ns={ns}", json=i).status_code == 200
        receiver.wait(5)
        receiver.status = 503  # down: events pile up in the outbox
        for i in range(5, 25):
            assert requests.put(f"{node.url}/seq/{i:03}.json?ns={ns}", json=i).status_code == 200
        node.kill9()
        node.start()
        receiver.status = 200
        got = receiver.wait(25)
        node_status = wait_for("outbox drained", lambda: (lambda s: s if s["triggers"][ns]["seq"]["pending"] == 0 else None)(
            requests.get(f"{node.url}/.ember/status", timeout=5).json()))
        refs = [e["ref"] for e in receiver.received()]
        firsts = list(dict.fromkeys(refs))
        assert firsts == [f"/seq/{i:03}" for i in range(25)], "every event, in log order"
        by_ref = {}
        for e in receiver.received():
            assert by_ref.setdefault(e["ref"], e["id"]) == e["id"], "a duplicate carries the same id"
        assert node_status["triggers"][ns]["seq"]["cursor"] >= max(int(e["sequence"]) for e in got)
    finally:
        node.stop()


def test_past_the_retention_limit_the_gap_is_reported(node, ns, receiver):
    """A trigger whose receiver is down keeps `retainEntries` entries; later events are counted
    as its gap (status, /metrics), the node goes on, and what was kept is delivered."""
    assert put_triggers(node, ns, {"r": trig(receiver.url, "/r/{n}", ["created"], retainEntries=3, backoffMs=20, maxBackoffMs=50, retries=1000)}).status_code == 200
    receiver.status = 503
    for i in range(6):
        assert requests.put(f"{node.url}/r/{i}.json?ns={ns}", json=i).status_code == 200
    st = requests.get(f"{node.url}/.ember/status", timeout=5).json()["triggers"][ns]["r"]
    assert st["behind"] is True and st["pending"] == 3 and st["gap"]["skippedEvents"] == 3
    assert st["gap"]["firstIndex"] < st["gap"]["lastIndex"]
    m = requests.get(f"{node.url}/metrics", timeout=5).text
    assert f'ember_trigger_behind{{namespace="{ns}",trigger="r"}} 1' in m
    receiver.status = 200
    assert [e["ref"] for e in receiver.wait(3)] == ["/r/0", "/r/1", "/r/2"]


@pytest.mark.skipif(not os.environ.get("EMBER_SOAK"), reason="soak only (EMBER_SOAK=1, make soak): a minute's wait")
def test_receiver_down_for_a_minute_backs_off_then_everything_arrives(node, ns, receiver):
    """Retries wait at least half the backoff (doubling from backoffMs up to maxBackoffMs; each
    wait is jittered between half and all of it) while the receiver is down; once it is back every
    event arrives, in order."""
    assert put_triggers(node, ns, {"d": trig(receiver.url, "/d/{n}", ["created"], backoffMs=200, maxBackoffMs=5000, retries=1000)}).status_code == 200
    receiver.status = 503
    for i in range(20):
        assert requests.put(f"{node.url}/d/{i:03}.json?ns={ns}", json=i).status_code == 200
    time.sleep(60)  # the outage itself (what is asserted is below, on what the receiver saw)
    receiver.status = 200
    got = receiver.wait(20)
    assert [e["ref"] for e in got][:20] == [f"/d/{i:03}" for i in range(20)]
    failed = [t for t, st in receiver.attempts if st == 503]
    for k, (a, b) in enumerate(zip(failed, failed[1:]), start=1):
        assert b - a >= 0.45 * min(0.2 * 2 ** (k - 1), 5.0), f"retry {k} came after {b - a:.3f} s"
    assert len(failed) < 40, f"{len(failed)} attempts in a minute: no backoff"


def read_feed(node, ns, n, headers=None, **params):
    """The first `n` change events of the feed (id, events), read from its SSE stream."""
    q = "&".join(f"{k}={v}" for k, v in {"ns": ns, **params}.items())
    out, ident = [], None
    with requests.get(f"{node.url}/.ember/feed?{q}", headers={**OWNER, **(headers or {})}, stream=True, timeout=(5, 30)) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("data: ") and ident is not None:
                out.append((ident, json.loads(line[6:])))
                ident = None
                if len(out) == n:
                    return out
    raise AssertionError(f"the feed ended after {len(out)} events")


def test_pull_feed_resumes_from_a_cursor_across_a_restart(tmp_path):
    node = Node(data_dir=str(tmp_path / "d")).start()
    try:
        ns = "f" + uuid.uuid4().hex[:8]
        assert put_triggers(node, ns, {"items": {"path": "/items/{id}", "on": ["written"], "feed": True, "retainEntries": 5}}).status_code == 200
        u = lambda p: f"{node.url}/{p}.json?ns={ns}"
        for i in range(3):
            assert requests.put(u(f"items/i{i}"), json={"n": i}).status_code == 200
        first = read_feed(node, ns, 3, path="/items/{id}")
        assert [e[1][0]["ref"] for e in first] == ["/items/i0", "/items/i1", "/items/i2"]
        assert [e[0] for e in first] == sorted(e[0] for e in first) and first[0][1][0]["data"]["after"] == {"n": 0}
        node.stop()
        node.start()
        for i in range(3, 5):
            assert requests.put(u(f"items/i{i}"), json={"n": i}).status_code == 200
        # Resumed after the last cursor read (Last-Event-ID): exactly what came after.
        resumed = read_feed(node, ns, 2, headers={"Last-Event-ID": str(first[-1][0])}, path="/items/{id}")
        assert [e[1][0]["ref"] for e in resumed] == ["/items/i3", "/items/i4"]
        # The CLI: JSON lines with the cursor, resumable with --from.
        out = subprocess.run([EMBER, "feed", "/items/{id}", "--node", node.url, "--ns", ns, "--from", str(resumed[0][0]), "--count", "1"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        line = json.loads(out.stdout.strip())
        assert line["ref"] == "/items/i4" and line["cursor"] == resumed[1][0]
        # Past the feed's retention (5 entries) an old cursor is answered 410 with the oldest.
        for i in range(5, 10):
            assert requests.put(u(f"items/i{i}"), json={"n": i}).status_code == 200
        r = requests.get(f"{node.url}/.ember/feed?ns={ns}&path=/items/{{id}}&from={first[0][0]}", headers=OWNER, timeout=10)
        assert r.status_code == 410 and r.json()["oldest"] > first[0][0]
        after = read_feed(node, ns, 5, path="/items/{id}", **{"from": r.json()["oldest"]})
        assert [e[1][0]["ref"] for e in after] == [f"/items/i{i}" for i in range(5, 10)]
        assert requests.get(f"{node.url}/.ember/feed?ns={ns}&path=/nope", headers=OWNER, timeout=10).status_code == 404
        assert requests.get(f"{node.url}/.ember/feed?ns={ns}&path=/items/{{id}}", timeout=10).status_code == 401
    finally:
        node.stop()


def test_open_pull_feeds_do_not_hold_the_node_on_sigterm(tmp_path):
    """A feed's consumer that stays connected, and one that left while the feed was idle, do not
    keep the node from stopping: the graceful shutdown waited for every open response, and an
    idle feed noticed its consumer gone only when its next keep-alive (30 s) failed, a live one
    never (the CI's `local-cluster down` killed such a node after 10 s)."""
    node = Node(data_dir=str(tmp_path / "d")).start()
    ns = "f" + uuid.uuid4().hex[:8]
    live = threading.Event()
    try:
        assert put_triggers(node, ns, {"items": {"path": "/items/{id}", "on": ["written"], "feed": True}}).status_code == 200
        assert requests.put(f"{node.url}/items/a.json?ns={ns}", json=1).status_code == 200
        # The consumer that left: read its event, closed the connection.
        assert [e[1][0]["ref"] for e in read_feed(node, ns, 1, path="/items/{id}")] == ["/items/a"]

        def stay():
            with requests.get(f"{node.url}/.ember/feed?ns={ns}&path=/items/{{id}}", headers=OWNER, stream=True, timeout=(5, 60)) as r:
                for line in r.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        live.set()
        t = threading.Thread(target=stay, daemon=True)
        t.start()
        assert live.wait(30), "the staying consumer got no event"
    finally:
        node.stop()
    assert node.proc.returncode == 0, f"emberd was killed after SIGTERM (exit {node.proc.returncode}): an open feed held it"
    t.join(30)
    assert not t.is_alive(), "the staying consumer's stream did not end with the node"


def test_pull_feed_for_a_token_holds_only_what_its_rules_let_it_read(tmp_path):
    """A non-admin caller with a valid token reads a feed filtered by the rules, event by event
    (alice reads rooms/alice, not rooms/bob); without a token, or with a malformed or refused
    one, the feed is refused with a JSON error."""
    rules = {"rules": {"rooms": {"$room": {".read": "auth != null && auth.uid == $room"}}}}
    node = Node(data_dir=str(tmp_path / "d"), rules=rules).start()
    try:
        ns = "f" + uuid.uuid4().hex[:8]
        assert put_triggers(node, ns, {"msgs": {"path": "/rooms/{room}/msgs/{id}", "on": ["written"], "feed": True}}).status_code == 200
        u = lambda p: f"{node.url}/{p}.json?ns={ns}"
        assert requests.put(u("rooms/alice/msgs/m1"), json=1, headers=OWNER).status_code == 200
        assert requests.put(u("rooms/bob/msgs/m2"), json=2, headers=OWNER).status_code == 200
        # One entry, two events: alice's half of it only.
        assert requests.patch(u(""), json={"rooms/alice/msgs/m3": 3, "rooms/bob/msgs/m4": 4}, headers=OWNER).status_code == 200
        assert requests.put(u("rooms/bob/msgs/m5"), json=5, headers=OWNER).status_code == 200
        assert requests.put(u("rooms/alice/msgs/m6"), json=6, headers=OWNER).status_code == 200
        everything = read_feed(node, ns, 5, path="/rooms/{room}/msgs/{id}")
        assert [[e["ref"] for e in events] for _, events in everything] == [
            ["/rooms/alice/msgs/m1"], ["/rooms/bob/msgs/m2"], ["/rooms/alice/msgs/m3", "/rooms/bob/msgs/m4"],
            ["/rooms/bob/msgs/m5"], ["/rooms/alice/msgs/m6"]]
        cursors = [c for c, _ in everything]
        alice = {"Authorization": "Bearer " + token("alice")}
        # Entries 2 and 4 hold nothing alice may read: skipped, so her third change is m6.
        mine = read_feed(node, ns, 3, headers=alice, path="/rooms/{room}/msgs/{id}")
        assert [(c, [e["ref"] for e in events]) for c, events in mine] == [
            (cursors[0], ["/rooms/alice/msgs/m1"]), (cursors[2], ["/rooms/alice/msgs/m3"]), (cursors[4], ["/rooms/alice/msgs/m6"])]
        assert mine[1][1][0]["data"]["after"] == 3
        bob = read_feed(node, ns, 3, path="/rooms/{room}/msgs/{id}", auth=token("bob"))
        assert [[e["ref"] for e in events] for _, events in bob] == [
            ["/rooms/bob/msgs/m2"], ["/rooms/bob/msgs/m4"], ["/rooms/bob/msgs/m5"]]
        # Resumed after her first cursor: the same filter.
        resumed = read_feed(node, ns, 1, headers={**alice, "Last-Event-ID": str(cursors[0])}, path="/rooms/{room}/msgs/{id}")
        assert resumed[0][0] == cursors[2] and [e["ref"] for e in resumed[0][1]] == ["/rooms/alice/msgs/m3"]
        feed = f"{node.url}/.ember/feed?ns={ns}&path=/rooms/{{room}}/msgs/{{id}}"
        for headers in [{}, {"Authorization": "Basic " + token("alice")}, {"Authorization": "Bearer not-a-jwt"}]:
            r = requests.get(feed, headers=headers, timeout=10)
            assert r.status_code == 401 and r.json()["error"], (headers, r.status_code, r.text)
    finally:
        node.stop()


def test_a_batching_trigger_posts_arrays_in_order(node, ns, receiver):
    """batchSize > 1: each POST is a JSON array (application/cloudevents-batch+json) of up to
    batchSize events, in log order."""
    assert put_triggers(node, ns, {"b": trig(receiver.url, "/b/{n}", ["created"], batchSize=4, backoffMs=20, maxBackoffMs=50, retries=1000)}).status_code == 200
    receiver.status = 503  # events queue up, so they go out in full batches once it is back
    for i in range(10):
        assert requests.put(f"{node.url}/b/{i:02}.json?ns={ns}", json=i).status_code == 200
    receiver.status = 200
    got = receiver.wait(10)
    assert [e["ref"] for e in got] == [f"/b/{i:02}" for i in range(10)]
    assert all(ct == "application/cloudevents-batch+json" and 1 <= n <= 4 for ct, n in receiver.batches)
    assert max(n for _, n in receiver.batches) == 4, receiver.batches


def test_a_batching_window_gathers_separate_writes_into_one_post(node, ns, receiver):
    """batchWindowMs: with nothing in flight a partial batch waits for the window, so writes
    committed one by one within it reach the receiver in one POST, and a batch that fills goes
    at once; the window needs a batchSize above 1; GET lists it when set."""
    r = put_triggers(node, ns, {"w": trig(receiver.url, "/w/{n}", ["created"], batchWindowMs=500)})
    assert r.status_code == 400 and '"batchSize" above 1' in r.json()["error"], r.text
    doc = {"w": trig(receiver.url, "/w/{n}", ["created"], batchSize=100, batchWindowMs=60_000),
           "plain": trig(receiver.url, "/p/{n}", ["created"], batchSize=100)}
    assert put_triggers(node, ns, doc).status_code == 200
    stored = requests.get(f"{node.url}/.settings/triggers.json?ns={ns}", headers=OWNER, timeout=5).json()
    assert stored["w"]["batchWindowMs"] == 60_000 and stored["w"]["batchSize"] == 100
    assert "batchWindowMs" not in stored["plain"], "spelled out only when set"
    # Without a window a single write goes at once.
    assert requests.put(f"{node.url}/p/0.json?ns={ns}", json=0).status_code == 200
    receiver.wait(1)
    for i in range(5):
        assert requests.put(f"{node.url}/w/{i}.json?ns={ns}", json=i).status_code == 200
    # Within a minute's window nothing is sent; 95 more events in one update fill the batch of
    # 100, which goes at once, all of them in log order.
    assert len(receiver.received()) == 1, "a partial batch waits for its window"
    assert requests.patch(f"{node.url}/w.json?ns={ns}", json={f"{i:03}": i for i in range(5, 100)}).status_code == 200
    got = receiver.wait(101)
    kind = "application/cloudevents-batch+json"
    assert receiver.batches == [(kind, 1), (kind, 100)], receiver.batches
    assert [e["ref"] for e in got[1:6]] == [f"/w/{i}" for i in range(5)]
    assert sorted(e["ref"] for e in got[6:]) == sorted(f"/w/{i:03}" for i in range(5, 100))


class KeepAliveReceiver:
    """An HTTP/1.1 receiver that keeps connections alive (so the trigger's window is pipelined
    on them) and records every attempt in arrival order: (event id, log index, status, client
    port, body). Events at `fail_once` refs are answered 503 the first time they arrive."""

    def __init__(self, fail_once=()):
        self.attempts = []
        self.fail_once = set(fail_once)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                doc = json.loads(body)
                with receiver.lock:
                    status = 200 if hmac.compare_digest(want, self.headers.get("X-Ember-Signature", "")) else 401
                    if status == 200 and doc["ref"] in receiver.fail_once:
                        receiver.fail_once.discard(doc["ref"])
                        status = 503
                    receiver.attempts.append((doc["id"], int(doc["sequence"]), status, self.client_address[1], body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def accepted(self):
        with self.lock:
            return {a[1] for a in self.attempts if a[2] == 200}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_pipelined_window_keeps_log_order_and_resends_the_same_ids_after_a_failure(node, ns):
    """inFlight 8 without batching: POSTs pipelined on a kept-alive connection arrive in log
    order; when one fails, the ones pipelined behind it are sent again after its retry, with
    the same ids and bodies, so the receiver's last word on each event is in log order."""
    admin = lambda p: f"{node.url}/.ember/triggers{p}?ns={ns}"
    state = lambda: requests.get(admin(""), headers=OWNER, timeout=5).json()["triggers"]["p"]["state"]
    recv = KeepAliveReceiver(fail_once={"/p/05", "/p/22"})
    try:
        doc = {"p": trig(recv.url, "/p/{n}", ["created"], inFlight=8, backoffMs=50, maxBackoffMs=50, retries=100)}
        assert put_triggers(node, ns, doc).status_code == 200
        # A backlog, so the window fills: paused while the writes commit.
        assert requests.post(admin("/p/pause"), headers=OWNER, timeout=5).status_code == 200
        for i in range(40):
            assert requests.put(f"{node.url}/p/{i:02}.json?ns={ns}", json=i).status_code == 200
        assert state()["pending"] == 40
        assert requests.post(admin("/p/resume"), headers=OWNER, timeout=5).status_code == 200
        wait_for("40 events accepted", lambda: len(recv.accepted()) >= 40)
        wait_for("the cursor past them", lambda: state()["pending"] == 0)
        with recv.lock:
            attempts = list(recv.attempts)
        refs = {a[1]: json.loads(a[4])["ref"] for a in attempts}
        order = sorted(refs)
        assert [refs[i] for i in order] == [f"/p/{i:02}" for i in range(40)], "every event, each at its own entry"
        assert recv.accepted() == set(order)
        assert all(a[2] in (200, 503) for a in attempts), "signatures verify"
        indexes = [a[1] for a in attempts]
        failed = [a[1] for a in attempts if a[2] == 503]
        assert [refs[i] for i in failed] == ["/p/05", "/p/22"]
        # Arrivals are increasing runs; each new run starts again at the event that failed in
        # the run before it (go-back-N): nothing overtakes a failed event's retry.
        restarts = [indexes[k] for k in range(1, len(indexes)) if indexes[k] <= indexes[k - 1]]
        assert restarts == failed, (restarts, failed, [(a[1], a[2]) for a in attempts])
        # The receiver's last word per event is in log order.
        last = {}
        for pos, a in enumerate(attempts):
            if a[2] == 200:
                last[a[1]] = pos
        assert sorted(last, key=last.get) == order
        # A redelivery repeats the id with the same body.
        bodies = {}
        for a in attempts:
            assert bodies.setdefault(a[0], a[4]) == a[4]
        # Pipelined on kept-alive connections, not one connection per POST.
        assert len({a[3] for a in attempts}) <= 3, len({a[3] for a in attempts})
    finally:
        recv.close()


def test_triggers_of_one_group_each_get_their_own_signed_events(node, ns):
    """Three triggers on one pattern and kinds share the stored change records and the serialized
    event members; each still gets every event once, in log order, named and signed as its own
    (its name in `trigger` and `source`, its secret in the signature), and their cursors move
    together until nothing is pending."""
    receivers = {name: Receiver(secret=f"{name}-secret-0123456789") for name in ("g1", "g2", "g3")}
    try:
        doc = {name: {**trig(r.url, "/g/{n}", ["created"], batchSize=3, inFlight=2), "secret": f"{name}-secret-0123456789"}
               for name, r in receivers.items()}
        assert put_triggers(node, ns, doc).status_code == 200
        for i in range(12):
            assert requests.put(f"{node.url}/g/{i:02}.json?ns={ns}", json=i).status_code == 200
        for name, r in receivers.items():
            got = r.wait(12)
            assert [e["ref"] for e in got][:12] == [f"/g/{i:02}" for i in range(12)]
            assert all(e["trigger"] == name and e["source"].endswith(f"/triggers/{name}") for e in got)
            assert r.bad_signatures == 0
        wait_for("every cursor past the events", lambda: all(
            t["state"]["pending"] == 0 for t in requests.get(f"{node.url}/.ember/triggers?ns={ns}", headers=OWNER, timeout=5).json()["triggers"].values()))
        states = requests.get(f"{node.url}/.ember/triggers?ns={ns}", headers=OWNER, timeout=5).json()["triggers"]
        assert {name: t["state"]["events"] for name, t in states.items()} == {"g1": 12, "g2": 12, "g3": 12}
        # shallow=true: the same states and nothing else (no definitions, no deliveries).
        shallow = requests.get(f"{node.url}/.ember/triggers?ns={ns}&shallow=true", headers=OWNER, timeout=5).json()["triggers"]
        assert {name: set(t) for name, t in shallow.items()} == {"g1": {"state"}, "g2": {"state"}, "g3": {"state"}}
        assert {name: t["state"]["events"] for name, t in shallow.items()} == {"g1": 12, "g2": 12, "g3": 12}
        assert "definition" in states["g1"] and "node" in states["g1"]
    finally:
        for r in receivers.values():
            r.close()
