"""Security rules on a real emberd: a rules table through REST, SSE, firebase-admin and the wire
protocol; rules managed through /.settings/rules.json (admin only, replicated, durable)."""
import asyncio
import base64
import json
import threading
import time
import uuid

import pytest
import requests

from conftest import Node
from wire import WireClient

SECURE = {
    "rules": {
        "users": {
            "$uid": {
                ".read": "auth != null && auth.uid === $uid",
                ".write": "auth != null && auth.uid === $uid",
                "name": {".validate": "newData.isString() && newData.val().length <= 10"},
            }
        },
        "posts": {
            ".read": True,
            "$id": {
                ".write": "auth != null",
                ".validate": "newData.hasChildren(['by', 'at'])",
                "by": {".validate": "newData.val() === auth.uid"},
                "at": {".validate": "newData.val() === now"},
            },
        },
        "admins": {".read": False, ".write": False},
        "club": {
            ".read": "auth != null && root.child('admins').child(auth.uid).exists()",
            ".write": "auth != null && root.child('admins').child(auth.uid).val() === true",
        },
        "public": {".read": True, ".write": True, "locked": {".write": False, ".read": False}},
        "feed": {".read": "query.limitToFirst <= 2", ".indexOn": "n"},
    }
}


def token(uid):
    """An unsigned JWT: the default protected mode reads its claims (no keys configured)."""
    def b64(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return b64({"alg": "none", "typ": "JWT"}) + "." + b64({"sub": uid, "uid": uid}) + ".sig"


OWNER = {"Authorization": "Bearer owner"}


def as_user(uid):
    return {"Authorization": "Bearer " + token(uid)}


@pytest.fixture(scope="module")
def secure():
    n = Node(rules=SECURE).start()
    yield n
    n.stop()


def url(node, ns, path, **params):
    q = "&".join(f"{k}={v}" for k, v in {"ns": ns, **params}.items())
    return f"{node.url}/{path}.json?{q}"


def denied(resp):
    return resp.status_code == 401 and resp.json() == {"error": "Permission denied"}


def test_owner_only_users(secure, ns):
    assert requests.put(url(secure, ns, "users/alice/name"), data='"Alice"', headers=as_user("alice")).status_code == 200
    assert denied(requests.put(url(secure, ns, "users/alice/name"), data='"Mallory"', headers=as_user("bob")))
    assert denied(requests.put(url(secure, ns, "users/alice/name"), data='"Anon"'))
    assert denied(requests.get(url(secure, ns, "users/alice"), headers=as_user("bob")))
    assert denied(requests.get(url(secure, ns, "users/alice", shallow="true"), headers=as_user("bob")))
    assert denied(requests.get(url(secure, ns, "users/alice")))
    assert requests.get(url(secure, ns, "users/alice"), headers=as_user("alice")).json() == {"name": "Alice"}
    # The token may also come as ?auth= / ?access_token=.
    assert requests.get(url(secure, ns, "users/alice", auth=token("alice"))).status_code == 200
    assert requests.get(url(secure, ns, "users/alice", access_token=token("alice"))).status_code == 200
    # Admin bypasses the rules.
    assert requests.get(url(secure, ns, "users/alice"), headers=OWNER).json() == {"name": "Alice"}
    assert requests.put(url(secure, ns, "admins/zed"), data="true", headers=OWNER).status_code == 200


def test_invalid_token_is_401(secure, ns):
    r = requests.get(url(secure, ns, "posts"), headers={"Authorization": "Bearer not-a-jwt"})
    assert r.status_code == 401 and "error" in r.json() and r.json() != {"error": "Permission denied"}


def test_validate_type_length_and_not_on_deletes(secure, ns):
    h = as_user("alice")
    assert denied(requests.put(url(secure, ns, "users/alice/name"), data="5", headers=h))
    assert denied(requests.put(url(secure, ns, "users/alice/name"), data='"abcdefghijk"', headers=h))
    assert requests.put(url(secure, ns, "users/alice/name"), data='"abcdefghij"', headers=h).status_code == 200
    assert requests.delete(url(secure, ns, "users/alice/name"), headers=h).status_code == 200
    assert requests.get(url(secure, ns, "users/alice"), headers=OWNER).json() is None


def test_now_and_auth_in_validate(secure, ns):
    h = as_user("alice")
    good = {"by": "alice", "at": {".sv": "timestamp"}}
    assert requests.put(url(secure, ns, "posts/p1"), data=json.dumps(good), headers=h).status_code == 200
    at = requests.get(url(secure, ns, "posts/p1/at")).json()
    assert abs(at - time.time() * 1000) < 60_000
    assert denied(requests.put(url(secure, ns, "posts/p2"), data=json.dumps({"by": "alice", "at": 5}), headers=h))
    assert denied(requests.put(url(secure, ns, "posts/p3"), data=json.dumps({"by": "bob", "at": {".sv": "timestamp"}}), headers=h))
    assert denied(requests.put(url(secure, ns, "posts/p4"), data=json.dumps({"by": "alice"}), headers=h))
    # POST (push) is judged the same way.
    assert requests.post(url(secure, ns, "posts"), data=json.dumps(good), headers=h).status_code == 200


def test_root_lookups(secure, ns):
    assert requests.put(url(secure, ns, "admins/carol"), data="true", headers=OWNER).status_code == 200
    assert requests.put(url(secure, ns, "club/x"), data="1", headers=as_user("carol")).status_code == 200
    assert denied(requests.put(url(secure, ns, "club/x"), data="2", headers=as_user("dave")))
    assert requests.get(url(secure, ns, "club"), headers=as_user("carol")).json() == {"x": 1}
    assert denied(requests.get(url(secure, ns, "club"), headers=as_user("dave")))


def test_cascading_grants(secure, ns):
    # `.write: true` at /public grants below it; a deeper `false` cannot take it back.
    assert requests.put(url(secure, ns, "public/locked/x"), data="1").status_code == 200
    assert requests.get(url(secure, ns, "public/locked/x")).json() == 1


def test_multipath_update_with_one_denied_part_writes_nothing(secure, ns):
    h = as_user("alice")
    before = requests.get(url(secure, ns, "users"), headers=OWNER).json()
    r = requests.patch(url(secure, ns, ""), data=json.dumps({"users/alice/name": "A", "users/bob/name": "B"}), headers=h)
    assert denied(r)
    assert requests.get(url(secure, ns, "users"), headers=OWNER).json() == before
    r = requests.patch(url(secure, ns, "users/alice"), data=json.dumps({"name": "A", "age": 3}), headers=h)
    assert r.status_code == 200


def test_query_rules(secure, ns):
    for i in range(5):
        requests.put(url(secure, ns, f"feed/k{i}"), data=json.dumps({"n": i}), headers=OWNER)
    ok = requests.get(url(secure, ns, "feed", orderBy='"n"', limitToFirst="2"))
    assert ok.status_code == 200 and sorted(ok.json()) == ["k0", "k1"]
    assert denied(requests.get(url(secure, ns, "feed", orderBy='"n"', limitToFirst="5")))
    assert denied(requests.get(url(secure, ns, "feed")))


def test_auth_variable_override(secure, ns):
    as_alice = json.dumps({"uid": "alice"})
    assert requests.put(url(secure, ns, "users/alice/name", auth_variable_override=as_alice), data='"A"', headers=OWNER).status_code == 200
    assert denied(requests.put(url(secure, ns, "users/bob/name", auth_variable_override=as_alice), data='"B"', headers=OWNER))
    assert denied(requests.get(url(secure, ns, "users/alice", auth_variable_override="null"), headers=OWNER))
    # A non-admin's override is ignored: it never raises privileges.
    assert denied(requests.get(url(secure, ns, "users/alice", auth_variable_override=as_alice)))


def test_firebase_admin_with_auth_override(secure, ns):
    import firebase_admin
    from firebase_admin import db as fdb, exceptions
    app = firebase_admin.initialize_app(
        options={"databaseURL": f"{secure.url}?ns={ns}", "databaseAuthVariableOverride": {"uid": "alice"}}, name="ov" + ns)
    try:
        fdb.reference("users/alice/name", app=app).set("Alice")
        assert fdb.reference("users/alice/name", app=app).get() == "Alice"
        with pytest.raises(exceptions.FirebaseError) as e:
            fdb.reference("users/bob/name", app=app).set("Bob")
        assert "Permission denied" in str(e.value)
        with pytest.raises(exceptions.FirebaseError):
            fdb.reference("users/bob", app=app).get()
    finally:
        firebase_admin.delete_app(app)


def sse_events(resp, out, done):
    event = None
    try:
        for line in resp.iter_lines(decode_unicode=True):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event != "keep-alive":
                out.append((event, json.loads(line[5:])))
    except Exception:
        pass
    done.set()


def test_rules_endpoint_admin_only_bad_rules_and_sse_cancel(tmp_path):
    node = Node(data_dir=str(tmp_path / "d"), rules=SECURE).start()
    try:
        ns = "r" + uuid.uuid4().hex[:8]
        rules_url = f"{node.url}/.settings/rules.json?ns={ns}"
        assert denied(requests.get(rules_url))
        assert denied(requests.get(rules_url, headers=as_user("alice")))
        assert json.loads(requests.get(rules_url, headers=OWNER).text) == SECURE
        assert denied(requests.put(rules_url, data='{"rules": {".read": true, ".write": true}}', headers=as_user("alice")))

        # A rules file with a type error is refused with its line; the old rules stay.
        bad = '{\n  "rules": {\n    ".read": "auth.uid +",\n    ".write": true\n  }\n}'
        r = requests.put(rules_url, data=bad, headers=OWNER)
        assert r.status_code == 400 and "line 3" in r.json()["error"]
        assert denied(requests.put(url(node, ns, "admins/x"), data="1", headers=as_user("x")))

        # An open SSE stream on /public loses access when the rules change: `cancel`, then EOF.
        resp = requests.get(url(node, ns, "public"), headers={"Accept": "text/event-stream"}, stream=True, timeout=30)
        assert resp.status_code == 200
        events, done = [], threading.Event()
        threading.Thread(target=sse_events, args=(resp, events, done), daemon=True).start()
        denied_stream = requests.get(url(node, ns, "users/alice"), headers={"Accept": "text/event-stream"}, stream=True, timeout=5)
        assert denied_stream.status_code == 401
        new_rules = {"rules": {".read": "auth != null", ".write": "auth != null", "open": {".read": True}}}
        assert requests.put(rules_url, data=json.dumps(new_rules), headers=OWNER).json() == {"status": "ok"}
        assert done.wait(10), "stream did not end after the rules change"
        assert events[0][0] == "put" and events[-1] == ("cancel", None)
        assert json.loads(requests.get(rules_url, headers=OWNER).text) == new_rules
        assert denied(requests.put(url(node, ns, "a"), data="1"))
        assert requests.put(url(node, ns, "a"), data="1", headers=as_user("u")).status_code == 200

        # Rules survive a restart (stored through the log; the --rules file is only the default).
        node.stop()
        node.start()
        assert json.loads(requests.get(rules_url, headers=OWNER).text) == new_rules
        assert denied(requests.put(url(node, ns, "a"), data="2"))
        assert requests.get(url(node, ns, "open")).status_code == 200
        # Other namespaces still use the --rules file.
        assert denied(requests.put(url(node, "other" + ns, "admins/x"), data="1", headers=as_user("x")))
    finally:
        node.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_wire_protocol_rules(secure, ns):
    async def go():
        c = await WireClient.connect(secure.url, ns)
        # Anonymous: listen, get and put under /users/alice are denied.
        _, resp = await c.request("q", {"p": "/users/alice", "h": ""})
        assert resp == {"s": "permission_denied", "d": "Permission denied"}
        _, resp = await c.request("g", {"p": "/users/alice"})
        assert resp["s"] == "permission_denied"
        _, resp = await c.request("p", {"p": "/users/alice/name", "d": "x"})
        assert resp["s"] == "permission_denied"
        _, resp = await c.request("o", {"p": "/admins/x", "d": 1})
        assert resp["s"] == "permission_denied"
        # Bad credential.
        _, resp = await c.request("auth", {"cred": "garbage"})
        assert resp["s"] == "invalid_token"
        # As alice.
        _, resp = await c.request("auth", {"cred": token("alice")})
        assert resp["s"] == "ok" and resp["d"]["auth"]["uid"] == "alice"
        _, resp = await c.request("p", {"p": "/users/alice/name", "d": "Alice"})
        assert resp == {"s": "ok", "d": ""}
        _, resp = await c.request("p", {"p": "/users/alice/name", "d": 7})
        assert resp["s"] == "permission_denied"
        _, resp = await c.request("m", {"p": "/", "d": {"users/alice/name": "A", "users/bob/name": "B"}})
        assert resp["s"] == "permission_denied"
        assert requests.get(url(secure, ns, "users"), headers=OWNER).json() == {"alice": {"name": "Alice"}}
        before, resp = await c.request("q", {"p": "/users/alice", "h": ""})
        assert resp["s"] == "ok" and before[0]["b"]["d"] == {"name": "Alice"}
        _, resp = await c.request("g", {"p": "/users/alice"})
        assert resp == {"s": "ok", "d": {"name": "Alice"}}
        # Tagged query listen judged with its query.
        _, resp = await c.request("q", {"p": "/feed", "h": "", "q": {"i": "n", "l": 5, "vf": "l"}, "t": 1})
        assert resp["s"] == "permission_denied"
        _, resp = await c.request("q", {"p": "/feed", "h": "", "q": {"i": "n", "l": 2, "vf": "l"}, "t": 2})
        assert resp["s"] == "ok"
        # onDisconnect: checked when registered, judged again when it runs, as its registrant.
        _, resp = await c.request("o", {"p": "/users/alice/status", "d": "gone"})
        assert resp["s"] == "ok"
        _, resp = await c.request("om", {"p": "/users", "d": {"bob/status": "gone"}})
        assert resp["s"] == "permission_denied"
        # unauth drops back to anonymous: the listen on alice's data is revoked.
        before, resp = await c.request("unauth", {})
        assert resp["s"] == "ok"
        assert {"a": "c", "b": {"p": "users/alice"}} in before
        _, resp = await c.request("p", {"p": "/users/alice/name", "d": "Again"})
        assert resp["s"] == "permission_denied"
        await c.close()
    run(go())
    # Registered as alice, it runs as alice although the connection was anonymous by then (the
    # log carries the registrant's auth; the rules judge it when the write runs).
    deadline = time.time() + 10
    while time.time() < deadline and requests.get(url(secure, ns, "users/alice/status"), headers=OWNER).json() is None:
        time.sleep(0.05)
    assert requests.get(url(secure, ns, "users/alice/status"), headers=OWNER).json() == "gone"


def test_wire_on_disconnect_runs_as_the_connection(secure, ns):
    async def go():
        c = await WireClient.connect(secure.url, ns)
        _, resp = await c.request("auth", {"cred": token("alice")})
        assert resp["s"] == "ok"
        _, resp = await c.request("o", {"p": "/users/alice/status", "d": "gone"})
        assert resp["s"] == "ok"
        await c.close()
    run(go())
    deadline = time.time() + 10
    while time.time() < deadline and requests.get(url(secure, ns, "users/alice/status"), headers=OWNER).json() is None:
        time.sleep(0.05)
    assert requests.get(url(secure, ns, "users/alice/status"), headers=OWNER).json() == "gone"


def test_wire_listen_cancelled_by_rules_change(tmp_path):
    node = Node(data_dir=str(tmp_path / "d"), rules=SECURE).start()
    try:
        ns = "w" + uuid.uuid4().hex[:8]

        async def go():
            c = await WireClient.connect(node.url, ns)
            _, resp = await c.request("q", {"p": "/public", "h": ""})
            assert resp["s"] == "ok"
            _, resp = await c.request("q", {"p": "/posts", "h": ""})
            assert resp["s"] == "ok"
            r = requests.put(f"{node.url}/.settings/rules.json?ns={ns}", headers=OWNER,
                             data=json.dumps({"rules": {"posts": {".read": True}}}))
            assert r.status_code == 200
            push = await c.next_push()
            while push["a"] != "c":
                push = await c.next_push()
            assert push == {"a": "c", "b": {"p": "public"}}
            # /posts is still readable: its listen keeps receiving.
            requests.put(url(node, ns, "posts/x"), data="1", headers=OWNER)
            push = await c.next_push()
            assert push["a"] == "d" and push["b"]["p"] == "posts/x"
            await c.close()
        run(go())
    finally:
        node.stop()
