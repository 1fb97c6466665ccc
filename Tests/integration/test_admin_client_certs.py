"""Admin by client certificate (`--tls-ca`): real emberd serving HTTPS/WSS with certificates
from `ember certs init`, real TLS clients (requests, websockets, the `ember` CLI).
"""
import asyncio
import os
import ssl
import subprocess
import time
import uuid

import pytest
import requests
import websockets

from conftest import EMBERD, spawn_emberd
from wire import WireClient

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
DENY_ALL = '{"rules": {".read": false, ".write": false}}'


def certs_init(out, nodes="n1"):
    subprocess.run([EMBER, "certs", "init", "--out", str(out), "--nodes", nodes], check=True, capture_output=True, text=True)
    return str(out)


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory):
    """A node in verified mode (admin token from certs init), rules refusing everyone but admins,
    serving HTTPS with n1's certificate and accepting client certificates of the cluster CA."""
    tmp = tmp_path_factory.mktemp("certs")
    d = certs_init(tmp / "pki")
    other = certs_init(tmp / "other-pki")
    rules = tmp / "rules.json"
    rules.write_text(DENY_ALL)
    log = open(str(tmp / "emberd.log"), "wb")
    proc, port = spawn_emberd(["--data", str(tmp / "data"), "--rules", str(rules),
                               "--admin-token-file", f"{d}/admin.token",
                               "--tls-cert", f"{d}/n1.pem", "--tls-key", f"{d}/n1.key",
                               "--tls-ca", f"{d}/ca.pem"], str(tmp / "emberd.port"), log)
    base = f"https://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        assert proc.poll() is None, "emberd exited"
        try:
            requests.get(base + "/healthz", verify=f"{d}/ca.pem", timeout=1)
            break
        except requests.RequestException:
            assert time.time() < deadline, "emberd did not become ready over https"
            time.sleep(0.05)
    yield {"base": base, "port": port, "pki": d, "other": other, "tmp": tmp}
    proc.terminate()
    proc.wait(timeout=15)
    log.close()


def ember(*args):
    return subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=60)


def test_admin_certificate_is_admin_on_rest_and_backup(tls_node):
    d, base = tls_node["pki"], tls_node["base"]
    admin = (f"{d}/admin.pem", f"{d}/admin.key")
    # The rules refuse everyone; the admin certificate bypasses them without any token.
    r = requests.put(f"{base}/x.json", data='{"a":1}', verify=f"{d}/ca.pem", cert=admin)
    assert r.status_code == 200, r.text
    assert requests.get(f"{base}/x.json", verify=f"{d}/ca.pem", cert=admin).json() == {"a": 1}
    r = requests.get(f"{base}/.ember/backup", verify=f"{d}/ca.pem", cert=admin)
    assert r.status_code == 200 and len(r.content) > 0
    # The CLI end to end: --cacert/--cert/--key, no token.
    out = str(tls_node["tmp"] / "backup.ember")
    p = ember("backup", "--node", base, "--out", out, "--quiet", "--cacert", f"{d}/ca.pem", "--cert", admin[0], "--key", admin[1])
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(out) > 0


def test_without_certificate_is_anonymous(tls_node):
    d, base = tls_node["pki"], tls_node["base"]
    assert requests.get(f"{base}/x.json", verify=f"{d}/ca.pem").status_code == 401
    r = requests.get(f"{base}/.ember/backup", verify=f"{d}/ca.pem")
    assert r.status_code == 401
    p = ember("backup", "--node", base, "--out", str(tls_node["tmp"] / "no.ember"), "--quiet", "--cacert", f"{d}/ca.pem")
    assert p.returncode != 0 and "401" in p.stderr, p.stderr
    # The admin token still works without a certificate.
    token = open(f"{d}/admin.token").read().strip()
    r = requests.get(f"{base}/.ember/backup", verify=f"{d}/ca.pem", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200


def test_node_certificate_of_the_same_ca_is_not_admin(tls_node):
    d, base = tls_node["pki"], tls_node["base"]
    node_cert = (f"{d}/n1.pem", f"{d}/n1.key")
    assert requests.get(f"{base}/x.json", verify=f"{d}/ca.pem", cert=node_cert).status_code == 401
    assert requests.get(f"{base}/.ember/backup", verify=f"{d}/ca.pem", cert=node_cert).status_code == 401


def test_certificate_of_another_ca_is_refused_by_tls(tls_node):
    d, o, base = tls_node["pki"], tls_node["other"], tls_node["base"]
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(f"{base}/.ember/backup", verify=f"{d}/ca.pem", cert=(f"{o}/admin.pem", f"{o}/admin.key"), timeout=10)
    p = ember("backup", "--node", base, "--out", str(tls_node["tmp"] / "other.ember"), "--quiet", "--cacert", f"{d}/ca.pem",
              "--cert", f"{o}/admin.pem", "--key", f"{o}/admin.key")
    assert p.returncode != 0
    assert not os.path.exists(tls_node["tmp"] / "other.ember")


def test_wire_session_with_admin_certificate_is_admin(tls_node):
    d, port = tls_node["pki"], tls_node["port"]

    async def session(cert):
        ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
        if cert:
            ctx.load_cert_chain(f"{d}/{cert}.pem", f"{d}/{cert}.key")
        ws = await websockets.connect(f"wss://127.0.0.1:{port}/.ws?v=5", ssl=ctx)
        c = WireClient(ws)
        c.hello = await c._recv()
        return c

    async def go():
        key = f"w{uuid.uuid4().hex[:8]}"
        admin = await session("admin")
        _, resp = await admin.request("p", {"p": key, "d": 7})
        assert resp["s"] == "ok", resp
        # unauth returns to the certificate's identity, not anonymous.
        _, resp = await admin.request("unauth", {})
        _, resp = await admin.request("g", {"p": key, "q": {}})
        assert resp == {"s": "ok", "d": 7}
        await admin.close()
        for cert in (None, "n1"):
            c = await session(cert)
            _, resp = await c.request("g", {"p": key, "q": {}})
            assert resp["s"] == "permission_denied", (cert, resp)
            await c.close()
    asyncio.run(asyncio.wait_for(go(), 60))
