"""Operating a cluster with the `ember` admin CLI: status, watch, data commands, backup and
restore, membership and leadership, health, readiness and metrics. Real emberd processes (a
3-node mutual-TLS cluster from deploy/local-cluster, whose certificates `ember certs init`
makes) and the real CLI binary.
"""
import json
import os
import subprocess
import threading
import time
import uuid

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import EMBERD, Node, free_port, free_ports
from cluster_helpers import Cluster, script

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))


def ember(*args, check=True, timeout=60, input=None):
    """Runs the CLI; returns the CompletedProcess (stdout/stderr as text)."""
    p = subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise AssertionError(f"ember {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def assert_fails(p, contains=None):
    assert p.returncode != 0, p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: "), p.stderr
    if contains:
        assert contains in lines[0], lines[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("ops") / "c")
    c.leader()
    yield c
    c.down()


def test_status_sees_one_leader_and_three_nodes_from_any_node(cluster):
    leader = cluster.leader()
    follower = cluster.followers()[0]
    out = json.loads(ember("status", "--node", cluster.url(follower), "--json").stdout)
    nodes = {n["id"]: n for n in out["nodes"]}
    assert sorted(nodes) == ["n1", "n2", "n3"]
    assert out["leader"] == leader
    assert [i for i, n in nodes.items() if n["role"] == "leader"] == [leader]
    assert {n["term"] for n in nodes.values()} == {nodes[leader]["term"]}
    for n in nodes.values():
        assert n["lag"] >= 0 and "connections" in n and "listeners" in n
        assert n["url"] == cluster.url(n["id"])
    table = ember("status", "--node", cluster.url(leader)).stdout.strip().splitlines()
    assert table[0].split()[:6] == ["ID", "ROLE", "TERM", "COMMIT", "APPLIED", "LAG"]
    rows = [line.split() for line in table[1:]]
    assert sorted(r[0] for r in rows) == ["n1", "n2", "n3"]
    assert [r[1] for r in rows].count("leader") == 1


def test_status_of_an_unreachable_node_exits_nonzero(cluster):
    p = ember("status", "--node", f"http://127.0.0.1:{free_port()}", "--no-discover", check=False)
    assert_fails(p, "did not answer")


def test_data_commands_round_trip(cluster):
    node = cluster.url(cluster.followers()[0])
    base = f"/ops/{uuid.uuid4().hex}"
    c = ["--node", node]
    assert json.loads(ember("set", base + "/a", '{"x": 1, "y": "two"}', *c, "--json").stdout) == {"x": 1, "y": "two"}
    assert json.loads(ember("get", base + "/a", *c).stdout) == {"x": 1, "y": "two"}
    ember("update", base + "/a", '{"y": null, "z/deep": true}', *c)
    assert json.loads(ember("get", base + "/a", *c, "--json").stdout) == {"x": 1, "z": {"deep": True}}
    key = ember("push", base + "/list", '"first"', *c).stdout.strip()
    assert len(key) == 20
    assert json.loads(ember("get", base + "/list", *c).stdout) == {key: "first"}
    ember("delete", base, *c)
    assert ember("get", base, *c).stdout.strip() == "null"
    # Bad input: one-line reasons and a non-zero exit; nothing written.
    assert_fails(ember("set", base + "/b", "{not json", *c, check=False), "not valid JSON")
    assert_fails(ember("set", base + "/b", '{"bad.key": 1}', *c, check=False), "HTTP 400")
    assert ember("get", base + "/b", *c).stdout.strip() == "null"


def test_export_and_import_split_a_large_tree(cluster, tmp_path):
    node = cluster.url(cluster.leader())
    src, dst = f"/exp/{uuid.uuid4().hex}", f"/imp/{uuid.uuid4().hex}"
    tree = {f"k{i:04d}": {"n": i, "s": "v" * 200} for i in range(600)}
    requests.put(f"{node}{src}.json", json=tree, timeout=30).raise_for_status()
    f = tmp_path / "tree.json"
    p = ember("export", str(f), src, "--node", node)
    assert "export" in p.stderr
    assert json.loads(f.read_text()) == tree
    # ~140 KiB in requests of at most 32 KiB: several requests, same tree.
    p = ember("import", str(f), dst, "--node", node, "--max-request-bytes", "32768")
    assert "request(s)" in p.stderr and "in 1 request" not in p.stderr
    assert requests.get(f"{node}{dst}.json", timeout=30).json() == tree
    # Split by children too (at most --max-children per request): 600 children in 6 requests.
    dst2 = f"/imp/{uuid.uuid4().hex}"
    p = ember("import", str(f), dst2, "--node", node, "--max-request-bytes", "100000", "--max-children", "100")
    assert "in 6 request(s)" in p.stderr, p.stderr
    assert requests.get(f"{node}{dst2}.json", timeout=30).json() == tree
    # A file that is not JSON: refused before anything is sent.
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert_fails(ember("import", str(bad), dst2, "--node", node, check=False), "not valid JSON")
    assert requests.get(f"{node}{dst2}.json", timeout=30).json() == tree


def test_watch_prints_a_write_made_through_another_node(cluster):
    follower = cluster.followers()[0]
    leader = cluster.leader()
    path = f"/watch/{uuid.uuid4().hex}"
    w = subprocess.Popen([EMBER, "watch", path, "--node", cluster.url(follower), "--json", "--count", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A watch that prints nothing would block readline forever: bound the whole test.
    guard = threading.Timer(30, w.kill)
    guard.start()
    try:
        first = json.loads(w.stdout.readline())
        assert first == {"event": "put", "path": "/", "data": None}
        ember("set", path + "/v", "42", "--node", cluster.url(leader))
        second = json.loads(w.stdout.readline())
        assert second == {"event": "put", "path": "/v", "data": 42}
        assert w.wait(timeout=10) == 0
    finally:
        guard.cancel()
        if w.poll() is None:
            w.kill()
            w.wait()


def test_backup_then_restore_into_a_fresh_node_gives_the_same_state_hash(cluster, tmp_path):
    leader = cluster.leader()
    base = f"/bk/{uuid.uuid4().hex}"
    for i in range(50):
        requests.put(f"{cluster.url(leader)}{base}/{i}.json", json={"i": i, "t": "x" * i}, timeout=10).raise_for_status()
    st = cluster.wait_converged()
    expected = {s["stateHash"] for s in st}
    assert len(expected) == 1
    out = tmp_path / "c.ember"
    p = ember("backup", "--node", cluster.url(cluster.followers()[0]), "--out", str(out))
    assert "backup" in p.stderr and out.exists()
    data = tmp_path / "fresh"
    restored = json.loads(ember("restore", "--in", str(out), "--data", str(data), "--json").stdout)
    assert {restored["stateHash"]} == expected
    # Restoring over data is refused without --force.
    assert_fails(ember("restore", "--in", str(out), "--data", str(data), check=False), "already holds data")
    node = Node(data_dir=str(data)).start()
    try:
        s = requests.get(node.url + "/.ember/status", timeout=10).json()
        assert {s["stateHash"]} == expected
        assert s["appliedIndex"] == restored["appliedIndex"]
        assert requests.get(f"{node.url}{base}/7.json", timeout=10).json() == {"i": 7, "t": "x" * 7}
    finally:
        node.stop()
    # A damaged file is refused before anything is written.
    bad = tmp_path / "bad.ember"
    raw = bytearray(out.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad.write_bytes(bytes(raw))
    assert_fails(ember("restore", "--in", str(bad), "--data", str(tmp_path / "other"), check=False), "checksum")
    assert not (tmp_path / "other").exists()


def test_backup_needs_an_admin_token(cluster, tmp_path):
    url = cluster.url(cluster.leader())
    assert requests.get(url + "/.ember/backup", timeout=10).status_code == 401
    assert requests.get(url + "/.ember/backup", headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
    assert_fails(ember("backup", "--node", url, "--out", str(tmp_path / "x"), "--token", "nope", check=False), "HTTP 401")
    assert not (tmp_path / "x").exists()


def test_health_readiness_and_metrics(cluster):
    leader = cluster.leader()
    for n in cluster.nodes:
        assert requests.get(n["url"] + "/healthz", timeout=5).status_code == 200
        r = requests.get(n["url"] + "/readyz", timeout=5)
        assert r.status_code == 200 and r.json()["ready"] is True
    for i in range(5):
        requests.put(f"{cluster.url(leader)}/metrics-test/{i}.json", json=i, timeout=10).raise_for_status()
    requests.put(f"{cluster.url(leader)}/bad.json", data="{nope", timeout=10)
    text = requests.get(cluster.url(leader) + "/metrics", timeout=5).text
    families = {f.name: f for f in text_string_to_metric_families(text)}

    def samples(name):
        return [s for s in families[name].samples]

    writes = {s.labels["result"]: s.value for s in samples("ember_client_writes") if s.name.endswith("_total")}
    assert writes["ok"] >= 5
    latency = {s.name: s.value for s in samples("ember_commit_latency_seconds")}
    assert latency["ember_commit_latency_seconds_count"] >= 5
    assert latency["ember_commit_latency_seconds_sum"] > 0
    batches = {s.name: s.value for s in samples("ember_commit_batch_entries")}
    assert batches["ember_commit_batch_entries_count"] >= 1
    assert samples("ember_raft_term")[0].value >= 1
    assert samples("ember_raft_is_leader")[0].value == 1
    assert samples("ember_raft_applied_index")[0].value >= 5
    lag = {s.labels["peer"] for s in samples("ember_peer_lag_entries")}
    assert lag == {n["id"] for n in cluster.nodes} - {leader}
    assert {s.labels["peer"] for s in samples("ember_peer_outbound_queue_frames")} == lag
    rejected = {s.labels["reason"]: s.value for s in samples("ember_rejected_requests") if s.name.endswith("_total")}
    assert rejected["bad_request"] >= 1
    assert {s.labels["kind"] for s in samples("ember_connections")} == {"websocket", "sse"}
    follower_text = requests.get(cluster.url(cluster.followers()[0]) + "/metrics", timeout=5).text
    follower = {f.name: f for f in text_string_to_metric_families(follower_text)}
    assert follower["ember_raft_is_leader"].samples[0].value == 0


def test_readyz_fails_without_a_leader(tmp_path):
    """A member started alone (its peers never come up) is alive but not ready."""
    certs = tmp_path / "certs"
    ember("certs", "init", "--out", str(certs), "--nodes", "a1,a2,a3")
    peers = dict(zip(("a1", "a2", "a3"), free_ports(3)))
    node = Node(data_dir=str(tmp_path / "a1"), extra_args=[
        "--node-id", "a1", "--peers", ",".join(f"{i}=127.0.0.1:{p}" for i, p in peers.items()),
        "--peer-tls-cert", str(certs / "a1.pem"), "--peer-tls-key", str(certs / "a1.key"), "--peer-tls-ca", str(certs / "ca.pem")])
    # Alone it never catches up with a cluster, so it serves no read (docs/CLUSTER.md): wait
    # until it is alive.
    node.start(alive_only=True)
    try:
        assert requests.get(node.url + "/healthz", timeout=5).status_code == 200
        r = requests.get(node.url + "/readyz", timeout=5)
        assert r.status_code == 503
        assert "no leader" in r.json()["reason"]
    finally:
        node.stop()


def test_leader_transfer_and_member_remove_then_add(cluster):
    """Uses the cluster runtime's membership endpoints (POST /.ember/members, DELETE
    /.ember/members/ID, POST /.ember/leader/transfer)."""
    leader = cluster.leader()
    probe = requests.post(cluster.url(leader) + "/.ember/leader/transfer", json={"to": leader},
                          headers={"Authorization": "Bearer owner"}, timeout=10)
    # Transferring to the current leader is a no-op the endpoint accepts.
    assert probe.status_code == 200, probe.text
    target = cluster.followers()[0]
    ember("leader", "transfer", "--to", target, "--node", cluster.url(leader))
    assert cluster.leader(timeout=15) == target
    victim = next(i for i in cluster.followers() if i != target)
    ember("members", "remove", victim, "--node", cluster.url(target))
    deadline = time.time() + 15
    while time.time() < deadline and victim in cluster.status(target)["voters"]:
        time.sleep(0.1)
    assert victim not in cluster.status(target)["voters"]
    layout = json.load(open(os.path.join(cluster.dir, "layout.json")))
    peer_port = next(n["peerPort"] for n in layout["nodes"] if n["id"] == victim)
    # The same node under another spelling than its configured client URL, so the check below
    # sees the CLI's value and not the configuration's.
    announced = cluster.url(victim).replace("127.0.0.1", "localhost")
    assert announced != cluster.url(victim)
    ember("members", "add", victim, f"127.0.0.1:{peer_port}", "--node", cluster.url(target),
          "--client-url", announced)
    deadline = time.time() + 15
    while time.time() < deadline and victim not in cluster.status(target)["voters"]:
        time.sleep(0.1)
    assert victim in cluster.status(target)["voters"]
    # The client URL given to `members add` is what the cluster announces for the node.
    assert cluster.status(target)["members"][victim]["url"] == announced
    assert_fails(ember("members", "add", "n9", "127.0.0.1:1", "--node", cluster.url(target), "--client-url", "ftp://x",
                       check=False), "--client-url must be an http(s) URL")
    assert "n9" not in cluster.status(target)["voters"]
    cluster.wait_converged()


def test_restore_seeds_a_whole_cluster(tmp_path):
    """The same backup restored into every node's empty data directory: the cluster starts from
    it (as its Raft snapshot), elects a leader, holds the backup's state and takes writes."""
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        for i in range(30):
            requests.put(f"{c.url(leader)}/seed/{i}.json", json=i, timeout=10).raise_for_status()
        st = c.wait_converged()
        backup = tmp_path / "b.ember"
        ember("backup", "--node", c.url(leader), "--out", str(backup), "--quiet")
        expected, index = st[0]["stateHash"], st[0]["appliedIndex"]
        for i in range(30, 40):  # after the backup: gone once restored
            requests.put(f"{c.url(leader)}/seed/{i}.json", json=i, timeout=10).raise_for_status()
        c.down()
        layout = json.load(open(os.path.join(c.dir, "layout.json")))
        for n in layout["nodes"]:
            subprocess.run(["rm", "-rf", n["data"]], check=True)
            out = json.loads(ember("restore", "--in", str(backup), "--data", n["data"], "--json").stdout)
            assert out["stateHash"] == expected and out["appliedIndex"] == index
        for n in layout["nodes"]:
            script("start-node", "--dir", c.dir, "--id", n["id"])
        leader = c.leader()
        st = c.wait_converged()
        assert {s["stateHash"] for s in st} == {expected}
        assert requests.get(f"{c.url(leader)}/seed.json", timeout=10).json() == list(range(30))
        requests.put(f"{c.url(leader)}/seed/30.json", json="new", timeout=10).raise_for_status()
        st = c.wait_converged()
        assert all(s["appliedIndex"] > index for s in st)
        # A dead node: status still lists it (by the id the others give it), and exits non-zero.
        dead = c.followers()[0]
        c.kill9(dead)
        p = ember("status", "--node", c.url(leader), "--json", check=False)
        assert p.returncode != 0 and p.stderr.startswith("ember: 1 of 3 node(s) did not answer")
        rows = {n["id"]: n for n in json.loads(p.stdout)["nodes"]}
        assert sorted(rows) == ["n1", "n2", "n3"] and "error" in rows[dead]
        assert rows[leader]["role"] == "leader"
    finally:
        c.down()


def test_cli_speaks_mutual_tls_with_certificates_from_certs_init(tmp_path):
    """`ember certs init` output used by a standard TLS stack (Python's ssl, OpenSSL): a node
    certificate serves HTTPS and demands a client certificate; the CLI connects with --cacert,
    --cert admin.pem, --key admin.key. Without a client certificate the handshake fails."""
    import http.server
    import ssl
    import threading

    certs = tmp_path / "certs"
    ember("certs", "init", "--out", str(certs), "--nodes", "n1")
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization"), self.connection.getpeercert()))
            body = b'{"hello": "tls"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "n1.pem", certs / "n1.key")
    ctx.load_verify_locations(certs / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        url = f"https://localhost:{server.server_address[1]}"
        tls = ["--cacert", str(certs / "ca.pem"), "--cert", str(certs / "admin.pem"), "--key", str(certs / "admin.key")]
        out = ember("get", "/x", "--node", url, "--token", "secret", "--json", *tls).stdout
        assert json.loads(out) == {"hello": "tls"}
        path, auth, peer = seen[-1]
        assert path == "/x.json" and auth == "Bearer secret"
        assert dict(x[0] for x in peer["subject"])["commonName"] == "admin"
        assert_fails(ember("get", "/x", "--node", url, "--cacert", str(certs / "ca.pem"), check=False))
        # A server certificate from another CA is not trusted.
        other = tmp_path / "other"
        ember("certs", "init", "--out", str(other))
        assert_fails(ember("get", "/x", "--node", url, "--cacert", str(other / "ca.pem"),
                           "--cert", str(certs / "admin.pem"), "--key", str(certs / "admin.key"), check=False))
    finally:
        server.shutdown()


def test_rules_get_prints_the_nodes_rules(cluster):
    out = json.loads(ember("rules", "get", "--node", cluster.url(cluster.leader())).stdout)
    assert out["rules"][".read"] is True
    assert out["rules"]["dinosaurs"][".indexOn"] == ["height", "weight", "length", "dimensions/height"]


def test_rules_set_replaces_the_rules(tmp_path):
    """Uses the node's rules endpoint (PUT /.settings/rules.json, from the rules work)."""
    node = Node().start()
    try:
        probe = requests.put(node.url + "/.settings/rules.json", data=json.dumps({"rules": {".read": True, ".write": True}}),
                             headers={"Authorization": "Bearer owner"}, timeout=10)
        assert probe.status_code == 200, probe.text
        f = tmp_path / "rules.json"
        f.write_text('{"rules": {".read": true, ".write": false, "open": {".write": true}}}')
        ember("rules", "set", str(f), "--node", node.url)
        assert json.loads(ember("rules", "get", "--node", node.url).stdout)["rules"]["open"] == {".write": True}
        assert_fails(ember("rules", "set", str(tmp_path / "missing.json"), "--node", node.url, check=False), "cannot read")
    finally:
        node.stop()
