"""Token auth, protected mode and per-client limits against real emberd processes.

Tokens are minted here with the standard library (HS256 = HMAC-SHA256 over base64url parts), so
the node's verifier is checked against an independent implementation.
"""
import asyncio
import base64
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import tempfile
import time

import pytest
import requests
import websockets

from conftest import EMBERD, Node, spawn_emberd
from wire import WireClient

SECRET = "integration-secret-0123456789abcdef"
ADMIN_TOKEN = "integration-admin-token-0123456789"


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def mint(claims, secret=SECRET, alg="HS256"):
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    if alg == "none":
        return f"{header}.{body}."
    sig = hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64url(sig)}"


def claims(sub="alice", exp_in=3600, **extra):
    now = int(time.time())
    c = {"sub": sub, "iat": now, "exp": now + exp_in}
    c.update(extra)
    return c


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def wire_connect(base_url, ns, local_host=None):
    """A WireClient, optionally from another loopback source address (another client address)."""
    url = base_url.replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
    kwargs = {"local_addr": (local_host, 0)} if local_host else {}
    ws = await websockets.connect(url, **kwargs)
    c = WireClient(ws)
    c.hello = await c._recv()
    return c


def write_file(node_dir, name, text):
    path = os.path.join(node_dir + "-" + name)
    with open(path, "w") as f:
        f.write(text)
    return path


def start(extra, rules=None):
    """A node whose extra args may reference files written next to its data directory."""
    n = Node(rules=rules) if rules else Node()
    n.extra_args = [a(n) if callable(a) else a for a in extra]
    return n.start()


@pytest.fixture(scope="module")
def auth_node():
    n = start([
        "--auth-hs256-secret-file", lambda n: write_file(n.data_dir, "secret", SECRET + "\n"),
        "--admin-token-file", lambda n: write_file(n.data_dir, "admin", ADMIN_TOKEN + "\n"),
        "--auth-issuer", "https://issuer.example", "--auth-audience", "ember-test",
        # Not loopback: `owner` from this test machine is refused.
        "--trust-owner-from", "10.9.9.0/24",
    ])
    yield n
    n.stop()


def good_claims(**kw):
    return claims(iss="https://issuer.example", aud="ember-test", **kw)


# ---------------------------------------------------------------- REST


def test_rest_valid_tokens_by_query_and_bearer(auth_node, ns):
    t = mint(good_claims())
    r = requests.put(f"{auth_node.url}/a.json?ns={ns}&auth={t}", data="1")
    assert r.status_code == 200, r.text
    r = requests.get(f"{auth_node.url}/a.json?ns={ns}", headers={"Authorization": f"Bearer {t}"})
    assert r.status_code == 200 and r.json() == 1
    r = requests.get(f"{auth_node.url}/a.json?ns={ns}&access_token={t}")
    assert r.status_code == 200
    # The admin token is admin from any address.
    r = requests.get(f"{auth_node.url}/a.json?ns={ns}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200


@pytest.mark.parametrize("token, message", [
    (lambda: mint(good_claims(exp_in=-5)), "Auth token is expired."),
    (lambda: mint(good_claims(nbf=int(time.time()) + 3600)), "Auth token is not valid yet (nbf)."),
    (lambda: mint(good_claims(), secret="some-other-secret-0123456789abcdef"), "Invalid auth token signature."),
    (lambda: mint(claims(iss="https://issuer.example", aud="other")), "Invalid auth token: audience is not ember-test."),
    (lambda: mint(claims(iss="https://evil.example", aud="ember-test")), "Invalid auth token: issuer is not https://issuer.example."),
    (lambda: mint(good_claims(), alg="none"), "Unsigned auth tokens are not accepted."),
    (lambda: "garbage", "Could not parse auth token."),
    (lambda: "owner", "The owner credential is only accepted from trusted addresses (--trust-owner-from)."),
])
def test_rest_refused_tokens_are_401_and_write_nothing(auth_node, ns, token, message):
    t = token()
    for r in (requests.put(f"{auth_node.url}/x.json?ns={ns}&auth={t}", data="1"),
              requests.put(f"{auth_node.url}/x.json?ns={ns}", data="1", headers={"Authorization": f"Bearer {t}"})):
        assert r.status_code == 401 and r.json() == {"error": message}
    assert requests.get(f"{auth_node.url}/x.json?ns={ns}", params={"auth": ADMIN_TOKEN}).json() is None


def test_no_credential_is_anonymous_not_refused(auth_node, ns):
    assert requests.get(f"{auth_node.url}/.json?ns={ns}").status_code == 200


def test_verified_mode_is_logged_without_secrets(auth_node):
    with open(auth_node.data_dir + ".log") as f:
        log = f.read()
    assert "auth: verified tokens" in log
    assert "keys [HS256], admin tokens 1, issuer https://issuer.example, audience ember-test, owner trusted from [10.9.9.0/24]" in log
    assert SECRET not in log and ADMIN_TOKEN not in log


def test_firebase_admin_owner_is_admin_only_from_trusted_addresses(auth_node, ns):
    import firebase_admin
    from firebase_admin import db as fdb
    from firebase_admin import exceptions
    trusted = start([
        "--auth-hs256-secret-file", lambda n: write_file(n.data_dir, "secret", SECRET),
        "--trust-owner-from", "127.0.0.0/8,::1",
    ])
    try:
        ok = firebase_admin.initialize_app(options={"databaseURL": f"{trusted.url}?ns={ns}"}, name="trusted-" + ns)
        refused = firebase_admin.initialize_app(options={"databaseURL": f"{auth_node.url}?ns={ns}"}, name="refused-" + ns)
        try:
            fdb.reference("/p", app=ok).set({"v": 1})
            assert fdb.reference("/p/v", app=ok).get() == 1
            with pytest.raises(exceptions.UnauthenticatedError):
                fdb.reference("/p", app=refused).set({"v": 2})
        finally:
            firebase_admin.delete_app(ok)
            firebase_admin.delete_app(refused)
    finally:
        trusted.stop()


def test_rs256_and_es256_tokens_via_jwks_file(ns):
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    keys = []
    for kid, alg, k in (("r1", jwt.algorithms.RSAAlgorithm, rsa_key), ("e1", jwt.algorithms.ECAlgorithm, ec_key)):
        jwk = json.loads(alg.to_jwk(k.public_key()))
        jwk["kid"] = kid
        keys.append(jwk)
    n = start(["--auth-jwks-file", lambda n: write_file(n.data_dir, "jwks.json", json.dumps({"keys": keys})),
               "--auth-audience", "ember-test"])
    try:
        rs = jwt.encode(claims(sub="rs", aud="ember-test"), rsa_key, algorithm="RS256", headers={"kid": "r1"})
        es = jwt.encode(claims(sub="es", aud="ember-test"), ec_key, algorithm="ES256", headers={"kid": "e1"})
        for t in (rs, es):
            assert requests.put(f"{n.url}/k.json?ns={ns}&auth={t}", data="1").status_code == 200
        other = ec.generate_private_key(ec.SECP256R1())
        forged = jwt.encode(claims(aud="ember-test"), other, algorithm="ES256", headers={"kid": "e1"})
        r = requests.get(f"{n.url}/k.json?ns={ns}", headers={"Authorization": f"Bearer {forged}"})
        assert r.status_code == 401 and r.json() == {"error": "Invalid auth token signature."}
        # An HS256 token "signed" with the public key (algorithm confusion) has no key to match.
        confused = mint(claims(aud="ember-test"), secret=json.dumps(keys[0]))
        r = requests.get(f"{n.url}/k.json?ns={ns}&auth={confused}")
        assert r.status_code == 401 and r.json() == {"error": "Invalid auth token: no key for algorithm HS256."}

        async def go():
            c = await WireClient.connect(n.url, ns)
            _, resp = await c.request("auth", {"cred": es})
            assert resp["s"] == "ok" and resp["d"]["auth"]["uid"] == "es"
            await c.close()
        run(go())
    finally:
        n.stop()


# ---------------------------------------------------------------- wire protocol


def test_wire_auth_statuses(auth_node, ns):
    async def go():
        c = await WireClient.connect(auth_node.url, ns)
        _, resp = await c.request("auth", {"cred": mint(good_claims(sub="bob"))})
        assert resp["s"] == "ok" and resp["d"]["auth"]["uid"] == "bob"
        _, resp = await c.request("auth", {"cred": mint(good_claims(exp_in=-1))})
        assert resp == {"s": "expired_token", "d": "Auth token is expired."}
        _, resp = await c.request("auth", {"cred": mint(good_claims(), alg="none")})
        assert resp == {"s": "invalid_token", "d": "Unsigned auth tokens are not accepted."}
        _, resp = await c.request("gauth", {"cred": "owner"})
        assert resp["s"] == "invalid_token"
        _, resp = await c.request("gauth", {"cred": ADMIN_TOKEN})
        assert resp["s"] == "ok"
        # The connection keeps serving after refused tokens.
        _, resp = await c.request("p", {"p": "w", "d": 5})
        assert resp == {"s": "ok", "d": ""}
        await c.close()
    run(go())


def test_wire_expired_session_gets_auth_revoked(auth_node, ns):
    async def go():
        c = await WireClient.connect(auth_node.url, ns)
        _, resp = await c.request("auth", {"cred": mint(good_claims(exp_in=2))})
        assert resp["s"] == "ok"
        push = await c.next_push(timeout=10)
        assert push == {"a": "ac", "b": {"s": "expired_token", "d": "Auth token is expired."}}
        # Still connected (as anonymous) and serving.
        _, resp = await c.request("g", {"p": "", "q": {}})
        assert resp["s"] == "ok"
        await c.close()
    run(go())


def test_sse_stream_ends_with_auth_revoked_when_its_token_expires(auth_node, ns):
    t = mint(good_claims(exp_in=2))
    host, port = auth_node.url.replace("http://", "").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    conn.request("GET", f"/s.json?ns={ns}&auth={t}", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200
    body = resp.read().decode()  # returns when the node ends the stream
    events = [e for e in body.split("\n\n") if e and "keep-alive" not in e]
    assert events[0].startswith("event: put")
    assert events[-1] == "event: auth_revoked\ndata: credential is no longer valid"
    conn.close()


def test_wire_expiry_drops_listens_the_rules_no_longer_allow(ns):
    rules = {"rules": {"secret": {".read": "auth != null"}, "open": {".read": True}}}
    n = start(["--auth-hs256-secret-file", lambda n: write_file(n.data_dir, "secret", SECRET)], rules=rules)
    try:
        async def go():
            c = await WireClient.connect(n.url, ns)
            _, resp = await c.request("auth", {"cred": mint(claims(exp_in=2))})
            assert resp["s"] == "ok"
            _, resp = await c.request("q", {"p": "secret", "h": ""})
            assert resp["s"] == "ok"
            _, resp = await c.request("q", {"p": "open", "h": ""})
            assert resp["s"] == "ok"
            pushes = [await c.next_push(timeout=10), await c.next_push(timeout=10)]
            assert pushes == [{"a": "ac", "b": {"s": "expired_token", "d": "Auth token is expired."}},
                              {"a": "c", "b": {"p": "secret"}}]
            # Anonymous now: the secret is refused, the open location still served.
            _, resp = await c.request("g", {"p": "secret", "q": {}})
            assert resp["s"] == "permission_denied"
            _, resp = await c.request("g", {"p": "open", "q": {}})
            assert resp["s"] == "ok"
            # Signing in again and then out (unauth) re-judges the listens the same way.
            _, resp = await c.request("auth", {"cred": mint(claims())})
            _, resp = await c.request("q", {"p": "secret", "h": ""})
            assert resp["s"] == "ok"
            before, resp = await c.request("unauth", {})
            assert resp["s"] == "ok" and before == [{"a": "c", "b": {"p": "secret"}}]
            await c.close()
        run(go())
    finally:
        n.stop()


# ---------------------------------------------------------------- protected mode


def test_network_address_without_auth_refuses_to_start():
    d = os.path.join(tempfile.gettempdir(), f"ember-refuse-{os.getpid()}")
    p = subprocess.run([EMBERD, "--data", d, "--port", "0", "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines[-1].startswith("emberd: refusing to listen on 0.0.0.0 without auth"), p.stderr


def test_network_address_with_dev_starts_and_says_so():
    n = start(["--host", "0.0.0.0", "--dev"])
    try:
        assert requests.get(n.url + "/.json").status_code == 200
    finally:
        n.stop()
    with open(n.data_dir + ".log") as f:
        assert "DEVELOPMENT mode" in f.read()


def test_loopback_without_auth_is_protected_mode(node, ns):
    # The shared node runs as the quick start does: owner is admin, unsigned JWTs are accepted.
    r = requests.put(f"{node.url}/o.json?ns={ns}", data="1", headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200
    assert requests.get(f"{node.url}/o.json?ns={ns}&auth={mint(claims(), alg='none')}").status_code == 200
    with open(node.data_dir + ".log") as f:
        assert "protected mode" in f.read()


# ---------------------------------------------------------------- limits


def sse_status(url, local_host=None):
    """Opens an SSE stream; returns (status, connection) with the connection still open."""
    host, port = url.replace("http://", "").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10,
                                      source_address=(local_host, 0) if local_host else None)
    conn.request("GET", "/s.json", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    return resp, conn


def test_connections_per_address(ns):
    n = start(["--max-connections-per-address", "2"])
    try:
        async def go():
            a = await WireClient.connect(n.url, ns)
            resp, conn = sse_status(n.url)
            assert resp.status == 200
            # Third connection from 127.0.0.1: a WebSocket is closed with the reason, SSE is 429.
            ws = await websockets.connect(n.url.replace("http://", "ws://") + f"/.ws?v=5&ns={ns}")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 1008
            assert closed.value.rcvd.reason == "Too many connections from this address (limit 2)"
            r3, c3 = sse_status(n.url)
            assert r3.status == 429 and json.loads(r3.read()) == {"error": "Too many connections from this address (limit 2)"}
            c3.close()
            # Another client address is served.
            b = await wire_connect(n.url, ns, local_host="127.0.0.2")
            _, resp_b = await b.request("p", {"p": "x", "d": 1})
            assert resp_b["s"] == "ok"
            # Closing one frees a slot.
            conn.close()
            await a.request("g", {"p": "x", "q": {}})
            for _ in range(100):
                r4, c4 = sse_status(n.url)
                if r4.status == 200:
                    c4.close()
                    break
                c4.close()
                await asyncio.sleep(0.05)
            else:
                pytest.fail("slot not released after the SSE stream closed")
            await a.close()
            await b.close()
        run(go())
    finally:
        n.stop()


def test_listens_per_connection(ns):
    n = start(["--max-listens", "3"])
    try:
        async def go():
            c = await WireClient.connect(n.url, ns)
            for i in range(3):
                _, resp = await c.request("q", {"p": f"l{i}", "h": ""})
                assert resp["s"] == "ok"
            _, resp = await c.request("q", {"p": "l3", "h": ""})
            assert resp == {"s": "too_many_listens", "d": "Too many listens on this connection (limit 3)"}
            # Unlisten frees one; the connection keeps serving.
            _, resp = await c.request("n", {"p": "l0"})
            _, resp = await c.request("q", {"p": "l3", "h": ""})
            assert resp["s"] == "ok"
            await c.close()
        run(go())
    finally:
        n.stop()


def test_requests_per_second_per_connection(ns):
    n = start(["--max-requests-per-second", "2", "--request-burst", "5"])
    try:
        async def go():
            c = await WireClient.connect(n.url, ns)
            statuses = []
            for i in range(12):
                _, resp = await c.request("p", {"p": f"r/{i}", "d": i})
                statuses.append(resp["s"])
            assert statuses[:5] == ["ok"] * 5 and "too_many_requests" in statuses[5:], statuses
            # Another connection is unaffected.
            other = await WireClient.connect(n.url, ns)
            _, resp = await other.request("g", {"p": "r", "q": {}})
            assert resp["s"] == "ok"
            # Refused writes wrote nothing.
            written = {int(k) for k in (resp["d"] or {}).keys()} if isinstance(resp["d"], dict) else \
                {i for i, v in enumerate(resp["d"] or []) if v is not None}
            assert written == {i for i, s in enumerate(statuses) if s == "ok"}
            await c.close()
            await other.close()
        run(go())
        s = requests.Session()  # one keep-alive connection
        codes = [s.get(f"{n.url}/.json?ns={ns}&shallow=true") for _ in range(12)]
        refused = [r for r in codes if r.status_code == 429]
        assert refused and refused[0].json() == {"error": "Too many requests"}
        assert requests.get(f"{n.url}/.json?ns={ns}").status_code == 200  # a new connection
    finally:
        n.stop()


def test_write_size_and_depth(ns):
    n = start(["--max-write-nodes", "10"])
    try:
        r = requests.put(f"{n.url}/big.json?ns={ns}", json={f"k{i}": i for i in range(11)})
        assert r.status_code == 400 and "exceeds the maximum of 10 nodes" in r.json()["error"]
        deep = 1
        for _ in range(40):
            deep = {"d": deep}
        r = requests.put(f"{n.url}/deep.json?ns={ns}", json=deep)
        assert r.status_code == 400
        assert requests.get(f"{n.url}/.json?ns={ns}").json() is None
        assert requests.put(f"{n.url}/ok.json?ns={ns}", json={"a": 1}).status_code == 200
    finally:
        n.stop()


# ---------------------------------------------------------------- client TLS


def test_client_tls_serves_https_and_wss(tmp_path, ns):
    cert, key = str(tmp_path / "client.pem"), str(tmp_path / "client.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    data = str(tmp_path / "data")
    log = open(str(tmp_path / "emberd.log"), "wb")
    proc, port = spawn_emberd(["--data", data, "--tls-cert", cert, "--tls-key", key], str(tmp_path / "emberd.port"), log)
    base = f"https://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            assert proc.poll() is None, "emberd exited"
            try:
                if requests.get(base + "/.json", verify=cert, timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                assert time.time() < deadline, "emberd did not become ready over https"
                time.sleep(0.05)
        assert requests.put(f"{base}/t.json?ns={ns}", data='{"a":1}', verify=cert).json() == {"a": 1}
        # Plain HTTP on the TLS port is not served.
        with pytest.raises(requests.RequestException):
            requests.get(f"http://127.0.0.1:{port}/.json", timeout=2)

        async def go():
            import ssl
            ctx = ssl.create_default_context(cafile=cert)
            ws = await websockets.connect(f"wss://127.0.0.1:{port}/.ws?v=5&ns={ns}", ssl=ctx)
            c = WireClient(ws)
            c.hello = await c._recv()
            _, resp = await c.request("g", {"p": "t", "q": {}})
            assert resp == {"s": "ok", "d": {"a": 1}}
            await c.close()
        run(go())
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()
