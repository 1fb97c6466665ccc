"""A 3-node cluster of real emberd processes on loopback, mutual TLS between peers.

The clusters are made by deploy/local-cluster (so the script is tested too). One cluster serves
the read-mostly tests; the kill -9 and wiped-follower tests get their own.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
import requests

from conftest import EMBERD, RULES, ROOT, free_port

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import local_cluster  # noqa: E402  (scripts/local_cluster.py, shared with scripts/bench-snapshot.py)
from local_cluster import SCRIPT  # noqa: E402

ELECTION_TIMEOUT = 1.0  # seconds: 10 ticks of 50 ms, randomized up to 2x
CHAOS_ROUNDS = int(os.environ.get("EMBER_CLUSTER_CHAOS_ROUNDS", "20" if os.environ.get("EMBER_SOAK") else "0"))


lc = local_cluster.load()


def script(*args):
    subprocess.run([sys.executable, SCRIPT, *args], check=True, env={**os.environ, "EMBERD": EMBERD})


class Cluster:
    def __init__(self, dir_, nodes=3, extra=()):
        self.dir = str(dir_)
        rules = os.path.join(self.dir + "-rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        script("up", "--nodes", str(nodes), "--dir", self.dir, "--rules", rules, "--", *extra)

    @property
    def nodes(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)["nodes"]

    def url(self, node_id):
        return next(n["url"] for n in self.nodes if n["id"] == node_id)

    def pid(self, node_id):
        return next(n["pid"] for n in self.nodes if n["id"] == node_id)

    def status(self, node_id, timeout=2):
        return requests.get(self.url(node_id) + "/.ember/status", timeout=timeout).json()

    def leader(self, among=None, timeout=15):
        """Waits until the given nodes agree on a leader among them; returns its id."""
        among = among or [n["id"] for n in self.nodes]
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                st = [self.status(i) for i in among]
                leaders = {s["leader"] for s in st}
                if len(leaders) == 1 and None not in leaders and leaders <= set(among):
                    return leaders.pop()
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise AssertionError(f"no leader among {among} within {timeout} s")

    def followers(self):
        leader = self.leader()
        return [n["id"] for n in self.nodes if n["id"] != leader]

    def wait_converged(self, timeout=30):
        """Every node applied the same index and holds the same state hash."""
        deadline = time.time() + timeout
        st = []
        while time.time() < deadline:
            try:
                st = [self.status(n["id"]) for n in self.nodes]
                if len({s["appliedIndex"] for s in st}) == 1 and len({s["stateHash"] for s in st}) == 1:
                    return st
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(f"nodes did not converge: {st}")

    def kill9(self, node_id):
        os.kill(self.pid(node_id), signal.SIGKILL)
        deadline = time.time() + 5
        while lc.alive(self.pid(node_id)) and time.time() < deadline:
            time.sleep(0.05)

    def down(self):
        script("down", "--dir", self.dir)


def assert_no_acknowledged_write_lost(urls, path, acked):
    """Every node (id → client URL) holds every acknowledged write (key → value) under `path`."""
    for node_id, url in urls.items():
        data = requests.get(f"{url}/{path}.json", timeout=10).json() or {}
        lost = [k for k, v in acked.items() if data.get(k) != v]
        assert not lost, f"{node_id} lost {len(lost)} acknowledged writes, e.g. {lost[:5]}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster") / "c")
    yield c
    c.down()


def test_three_nodes_elect_exactly_one_leader(cluster):
    leader = cluster.leader()
    st = {n["id"]: cluster.status(n["id"]) for n in cluster.nodes}
    assert [i for i, s in st.items() if s["role"] == "leader"] == [leader]
    assert all(s["role"] == "follower" for i, s in st.items() if i != leader)
    assert len({s["term"] for s in st.values()}) == 1
    assert sorted(st[leader]["peers"]) == sorted(i for i in st if i != leader)
    assert all(sorted(s["links"]) == sorted(i for i in st if i != sid) for sid, s in st.items())
    # The leader's first entry (its no-op) reaches both followers.
    deadline = time.time() + 5
    while time.time() < deadline:
        peers = cluster.status(leader)["peers"]
        if all(p["matchIndex"] >= 1 for p in peers.values()):
            break
        time.sleep(0.05)
    assert all(p["matchIndex"] >= 1 for p in peers.values()), peers


def test_write_through_follower_is_readable_everywhere(cluster):
    follower = cluster.followers()[0]
    key = uuid.uuid4().hex
    r = requests.put(f"{cluster.url(follower)}/rw/{key}.json", json={"v": 1, "at": {".sv": "timestamp"}}, timeout=10)
    assert r.status_code == 200, r.text
    written = r.json()
    # Read-your-writes on the follower that took the write, without any waiting.
    assert requests.get(f"{cluster.url(follower)}/rw/{key}.json", timeout=5).json() == written
    for n in cluster.nodes:
        # A linearizable read on any node sees it; a local read sees it once applied there.
        lin = requests.get(f"{n['url']}/rw/{key}.json?consistency=linearizable", timeout=10)
        assert lin.status_code == 200 and lin.json() == written, (n["id"], lin.text)
    cluster.wait_converged()
    for n in cluster.nodes:
        assert requests.get(f"{n['url']}/rw/{key}.json", timeout=5).json() == written


def test_firebase_admin_against_a_follower(cluster):
    import firebase_admin
    from firebase_admin import db as fdb
    follower = cluster.followers()[-1]
    ns = "c" + uuid.uuid4().hex[:10]
    app = firebase_admin.initialize_app(options={"databaseURL": f"{cluster.url(follower)}?ns={ns}"}, name=ns)
    try:
        ref = fdb.reference("/counter", app=app)
        ref.set({"n": 1, "who": "admin"})
        assert ref.get() == {"n": 1, "who": "admin"}
        for _ in range(3):
            ref.child("n").transaction(lambda v: (v or 0) + 1)
        assert ref.child("n").get() == 4
        pushed = fdb.reference("/list", app=app).push({"x": 1})
        assert pushed.get() == {"x": 1}
    finally:
        firebase_admin.delete_app(app)
    cluster.wait_converged()
    for n in cluster.nodes:
        assert requests.get(f"{n['url']}/counter/n.json?ns={ns}", timeout=5).json() == 4


def start_intruder(cluster, tmp_path, certs, ca_file, log_path):
    layout = json.load(open(os.path.join(cluster.dir, "layout.json")))
    peers = ",".join(f"{n['id']}=127.0.0.1:{n['peerPort']}" for n in layout["nodes"])
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [EMBERD, "--data", str(tmp_path / "intruder-data"), "--port", str(free_port()), "--node-id", "n4",
             "--peers", peers + f",n4=127.0.0.1:{free_port()}",
             "--peer-tls-cert", os.path.join(certs, "n4.pem"), "--peer-tls-key", os.path.join(certs, "n4.key"),
             "--peer-tls-ca", ca_file], stdout=log, stderr=log)


@pytest.mark.parametrize("kind", ["other-ca", "not-a-member"])
def test_peer_with_foreign_certificate_is_refused(cluster, tmp_path, kind):
    """other-ca: signed by another CA (the intruder trusts ours, so OUR check of ITS certificate
    is what refuses it). not-a-member: signed by the cluster CA but naming no member."""
    certs = str(tmp_path / "intruder")
    cluster_ca = os.path.join(cluster.dir, "certs")
    if kind == "other-ca":
        lc.make_ca(certs, name="rogue-ca")
        lc.make_node_cert(certs, "n4")
        ca_file = os.path.join(certs, "both-cas.pem")
        with open(ca_file, "w") as f:
            f.write(open(os.path.join(cluster_ca, "ca.pem")).read() + open(os.path.join(certs, "ca.pem")).read())
        expected_log = "peer connection refused"
    else:
        os.makedirs(certs)
        lc.make_node_cert(certs, "n4", ca_dir=cluster_ca)
        ca_file = os.path.join(cluster_ca, "ca.pem")
        expected_log = "certificate names no cluster member"
    term_before = max(cluster.status(n["id"])["term"] for n in cluster.nodes)
    logs = {n["id"]: os.path.getsize(os.path.join(cluster.dir, f"{n['id']}.log")) for n in cluster.nodes}
    intruder = start_intruder(cluster, tmp_path, certs, ca_file, str(tmp_path / "intruder.log"))
    try:
        refused = False
        deadline = time.time() + 15
        while time.time() < deadline and not refused:
            for n in cluster.nodes:
                with open(os.path.join(cluster.dir, f"{n['id']}.log"), errors="replace") as f:
                    f.seek(logs[n["id"]])
                    if expected_log in f.read():
                        refused = True
            time.sleep(0.2)
        assert refused, f"no cluster node logged '{expected_log}'"
        # Its campaigns never reached the cluster: same leader, no disrupted terms.
        leader = cluster.leader()
        assert max(cluster.status(n["id"])["term"] for n in cluster.nodes) == term_before
        assert "n4" not in cluster.status(leader)["peers"]
    finally:
        intruder.kill()
        intruder.wait()


def test_sse_listener_on_a_follower_sees_writes_made_elsewhere(cluster):
    leader = cluster.leader()
    follower = cluster.followers()[0]
    key = uuid.uuid4().hex
    with requests.get(f"{cluster.url(follower)}/live/{key}.json", headers={"Accept": "text/event-stream"},
                      stream=True, timeout=10) as stream:
        lines = stream.iter_lines(decode_unicode=True)
        assert next(lines) == "event: put"
        assert json.loads(next(lines)[len("data: "):]) == {"path": "/", "data": None}
        r = requests.put(f"{cluster.url(leader)}/live/{key}/v.json", data="42", timeout=10)
        assert r.status_code == 200
        for line in lines:
            if line.startswith("data: ") and "42" in line:
                assert json.loads(line[len("data: "):]) == {"path": "/v", "data": 42}
                break


def test_websocket_clients_on_two_followers(cluster):
    """A wire-protocol write at one follower reaches a listener on the other follower."""
    import asyncio
    from wire import WireClient
    f1, f2 = cluster.followers()[:2]
    ns = "w" + uuid.uuid4().hex[:10]

    async def go():
        writer = await WireClient.connect(cluster.url(f1), ns)
        listener = await WireClient.connect(cluster.url(f2), ns)
        await listener.request("q", {"p": "/room", "h": ""})
        _, resp = await writer.request("p", {"p": "room/msg", "d": {"text": "hi"}})
        assert resp == {"s": "ok", "d": ""}
        push = await listener.next_push()
        assert push["a"] == "d" and push["b"]["p"] == "room/msg" and push["b"]["d"] == {"text": "hi"}
        await writer.close()
        await listener.close()

    asyncio.run(go())


def test_stopping_the_leader_hands_leadership_over(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        old = c.leader()
        requests.put(f"{c.url(old)}/h.json", data="1", timeout=10)
        stopped_at = time.time()
        os.kill(c.pid(old), signal.SIGTERM)
        survivors = [n["id"] for n in c.nodes if n["id"] != old]
        new = c.leader(among=survivors, timeout=10)
        took = time.time() - stopped_at
        assert new != old
        with open(os.path.join(c.dir, f"{old}.log"), errors="replace") as f:
            assert "handing leadership over" in f.read()
        # A hand-over needs no election timeout (the new leader campaigns at once).
        assert took < 2 * ELECTION_TIMEOUT, f"hand-over took {took:.2f} s"
        assert requests.put(f"{c.url(new)}/h.json", data="2", timeout=10).status_code == 200
    finally:
        c.down()


def load(cluster, stop, acked, lock, worker):
    s = requests.Session()
    i = 0
    while not stop.is_set():
        i += 1
        nodes = cluster.nodes
        node = nodes[(worker + i) % len(nodes)]
        try:
            r = s.put(f"{node['url']}/k/w{worker}_{i}.json?print=silent", data=str(i), timeout=12)
        except requests.RequestException:
            continue  # node died mid-request: not acknowledged
        if r.status_code == 204:
            with lock:
                acked[f"w{worker}_{i}"] = i
        else:
            time.sleep(0.02)  # 503 while there is no leader: retry shortly


def test_kill9_leader_under_load_loses_no_acknowledged_write(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        old = c.leader()
        stop, lock, acked = threading.Event(), threading.Lock(), {}
        workers = [threading.Thread(target=load, args=(c, stop, acked, lock, w)) for w in range(4)]
        for t in workers:
            t.start()
        time.sleep(1.5)
        killed_at = time.time()
        c.kill9(old)
        survivors = [n["id"] for n in c.nodes if n["id"] != old]
        new = c.leader(among=survivors, timeout=10)
        failover = time.time() - killed_at
        assert new != old
        assert failover < 8 * ELECTION_TIMEOUT, f"failover took {failover:.1f} s"
        time.sleep(1.5)  # writes continue under the new leader
        stop.set()
        for t in workers:
            t.join()
        assert len(acked) > 20, f"only {len(acked)} writes acknowledged"
        script("start-node", "--dir", c.dir, "--id", old)
        st = c.wait_converged(timeout=30)
        assert_no_acknowledged_write_lost({n["id"]: n["url"] for n in c.nodes}, "k", acked)
        print(f"failover {failover:.2f} s, {len(acked)} acknowledged writes, applied {st[0]['appliedIndex']}")
    finally:
        c.down()


@pytest.mark.skipif(CHAOS_ROUNDS == 0, reason="soak only (EMBER_SOAK=1 or EMBER_CLUSTER_CHAOS_ROUNDS=N)")
def test_chaos_kill9_random_nodes_under_load(tmp_path):
    """Rounds of kill -9 + restart, or SIGSTOP + SIGCONT, of a random node (leader or not), under load."""
    import random
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "200"])
    try:
        stop, lock, acked = threading.Event(), threading.Lock(), {}
        workers = [threading.Thread(target=load, args=(c, stop, acked, lock, w)) for w in range(4)]
        for t in workers:
            t.start()
        rng = random.Random(int(os.environ.get("EMBER_CHAOS_SEED", "1")))
        for _ in range(CHAOS_ROUNDS):
            time.sleep(rng.uniform(0.3, 1.5))
            victim = rng.choice([n["id"] for n in c.nodes])
            if rng.random() < 0.5:
                c.kill9(victim)
                time.sleep(rng.uniform(0.1, 1.5))
                script("start-node", "--dir", c.dir, "--id", victim)
            else:
                # A stalled (not dead) node: a paused leader wakes up deposed, with requests in flight.
                os.kill(c.pid(victim), signal.SIGSTOP)
                time.sleep(rng.uniform(0.2, 2.5))
                os.kill(c.pid(victim), signal.SIGCONT)
        time.sleep(1)
        stop.set()
        for t in workers:
            t.join()
        c.wait_converged(timeout=60)
        assert_no_acknowledged_write_lost({n["id"]: n["url"] for n in c.nodes}, "k", acked)
        print(f"{CHAOS_ROUNDS} rounds, {len(acked)} acknowledged writes")
    finally:
        c.down()


def put_bulk(session, url, megabytes):
    """Writes about `megabytes` MB of tree under /bulk/bN/kI, half a MB (500 leaves) per write
    (small enough that a debug leader's turn stays well under the election timeout)."""
    pad = "x" * 1000
    for b in range(megabytes):
        for half in range(2):
            body = json.dumps({f"k{i:04d}": f"{b}-{i}-{pad}" for i in range(half * 500, half * 500 + 500)})
            r = session.patch(f"{url}/bulk/b{b:04d}.json?print=silent", data=body, timeout=60)
            assert r.status_code == 204, r.text


def wipe_a_follower_and_restart_it(c, s, leader, writes_while_down):
    """kill -9 a follower, delete its data dir, write `/w/<i>` for each i while it is down, then
    start it again on the empty dir. Returns the follower's id and its start time."""
    victim = next(n["id"] for n in c.nodes if n["id"] != leader)
    c.kill9(victim)
    shutil.rmtree(os.path.join(c.dir, victim, "data"))
    for i in writes_while_down:
        assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
    started = time.time()
    script("start-node", "--dir", c.dir, "--id", victim)
    return victim, started


def test_wiped_follower_catches_up_by_log_at_once(tmp_path):
    """Default snapshot interval (no compaction happens): a follower restarted on an empty data
    dir is re-replicated from the leader's log within seconds, not after the next compaction
    (the leader lowers its matchIndex when the follower's rejection shows the log is gone)."""
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        s = requests.Session()
        for i in range(40):
            assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
        c.wait_converged(timeout=15)
        victim, started = wipe_a_follower_and_restart_it(c, s, leader, range(40, 50))
        c.wait_converged(timeout=10)
        print(f"wiped follower converged {time.time() - started:.1f} s after its start")
        assert requests.get(f"{c.url(victim)}/w.json", timeout=5).json() == list(range(50))
        assert c.status(leader)["snapshotIndex"] == 0, "the leader compacted: this test is about the log"
        with open(os.path.join(c.dir, f"{victim}.log"), errors="replace") as f:
            assert "installed snapshot from leader" not in f.read()
        # The returned follower serves live changes: its listener sees the next write.
        with requests.get(f"{c.url(victim)}/w/50.json", headers={"Accept": "text/event-stream"},
                          stream=True, timeout=20) as stream:
            lines = stream.iter_lines(decode_unicode=True)
            assert next(lines) == "event: put"
            assert json.loads(next(lines).removeprefix("data: ")) == {"path": "/", "data": None}
            assert s.put(f"{c.url(leader)}/w/50.json?print=silent", data="50", timeout=10).status_code == 204
            seen, event = None, None
            for line in lines:
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event != "keep-alive":
                    seen = (event, json.loads(line.removeprefix("data: ")))
                    break
            assert seen == ("put", {"path": "/", "data": 50})
    finally:
        c.down()


def test_wiped_follower_returns_by_snapshot(tmp_path):
    """The leader compacts every 20 entries, so a wiped follower returns by snapshot (at once, not
    at the next compaction). The snapshot is many chunks (1 MiB each): the follower stages and
    installs it in pieces."""
    megabytes = int(os.environ.get("EMBER_SNAPSHOT_TEST_MB", "200" if os.environ.get("EMBER_SOAK") else "20"))
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    try:
        leader = c.leader()
        s = requests.Session()
        put_bulk(s, c.url(leader), megabytes)
        for i in range(60):
            assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
        # Status answers hash the whole tree when it changed: give the first polls time.
        leader = c.leader(timeout=60)
        victim, started = wipe_a_follower_and_restart_it(c, s, leader, range(60, 80))
        c.wait_converged(timeout=30 + megabytes)
        print(f"{megabytes} MB tree: wiped follower converged {time.time() - started:.1f} s after its start")
        assert requests.get(f"{c.url(victim)}/w.json", timeout=5).json() == list(range(80))
        last = requests.get(f"{c.url(victim)}/bulk/b{megabytes - 1:04d}/k0999.json", timeout=5).json()
        assert last == f"{megabytes - 1}-999-" + "x" * 1000
        assert c.status(leader)["snapshotIndex"] > 0
        with open(os.path.join(c.dir, f"{leader}.log"), errors="replace") as f:
            written = [l for l in f if "snapshot file written for followers" in l]
        assert written, "the leader wrote no snapshot file"
        size = int(written[-1].split("bytes=")[1].split()[0]) if "bytes=" in written[-1] else None
        with open(os.path.join(c.dir, f"{victim}.log"), errors="replace") as f:
            assert "installed snapshot from leader" in f.read()
        assert not os.path.exists(os.path.join(c.dir, victim, "data", "raft-snapshot-incoming"))
        if size is not None:
            assert size > 20 * (1 << 20) * megabytes // 24, f"snapshot of {size} bytes is not several chunks"
    finally:
        c.down()


def apply_at(model, path, data, merge=False):
    """Applies a Firebase put (replace) or patch/merge (children) at `path` to a JSON model."""
    keys = [k for k in path.split("/") if k]
    if not keys:
        if not merge:
            return data
        model = dict(model) if isinstance(model, dict) else {}
        for k, v in data.items():
            model = apply_at(model, k, v)
        return model
    model = dict(model) if isinstance(model, dict) else {}
    child = apply_at(model.get(keys[0]), "/".join(keys[1:]), data, merge)
    if child is None or child == {}:
        model.pop(keys[0], None)
    else:
        model[keys[0]] = child
    return model or None


def test_follower_behind_a_compaction_catches_up_by_snapshot_and_resyncs_listeners(tmp_path):
    """SIGSTOP a follower, compact the leader's log past it, SIGCONT: it installs a snapshot and
    its listeners stay open: an SSE stream gets a put at "/" with the whole new data, WebSocket
    listens (plain and a tagged query) their complete data again, then later writes with no gap."""
    import asyncio
    from wire import WireClient
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    ns = "resync"
    try:
        leader = c.leader()
        victim = c.followers()[0]
        s = requests.Session()
        assert s.put(f"{c.url(leader)}/w/k000.json?ns={ns}", data="-1", timeout=10).status_code == 200
        c.wait_converged(timeout=15)
        sse_events, pushes, closed = [], [], []
        sse_ready, ws_ready, stop = threading.Event(), threading.Event(), threading.Event()

        def follow_sse():
            try:
                with requests.get(f"{c.url(victim)}/w.json?ns={ns}", headers={"Accept": "text/event-stream"},
                                  stream=True, timeout=60) as stream:
                    event = None
                    for line in stream.iter_lines(decode_unicode=True):
                        if stop.is_set():
                            return
                        if line.startswith("event: "):
                            event = line[len("event: "):]
                        elif line.startswith("data: ") and event in ("put", "patch"):
                            sse_events.append((event, json.loads(line[len("data: "):])))
                            sse_ready.set()
            except Exception:
                pass  # the cluster going down at the end of the test
            closed.append("sse")

        def follow_ws():
            async def go():
                client = await WireClient.connect(c.url(victim), ns)
                await client.request("q", {"p": "/w", "h": ""})
                await client.request("q", {"p": "/w", "q": {"i": ".key", "l": 3, "vf": "r"}, "t": 1, "h": ""})
                pushes.extend(client.pushes)
                ws_ready.set()
                try:
                    while not stop.is_set():
                        try:
                            pushes.append(await client.next_push(timeout=1))
                        except asyncio.TimeoutError:
                            pass
                except Exception:
                    closed.append("ws")
                await client.close()
            asyncio.run(go())

        threads = [threading.Thread(target=f, daemon=True) for f in (follow_sse, follow_ws)]
        for t in threads:
            t.start()
        assert sse_ready.wait(10) and ws_ready.wait(10)
        os.kill(c.pid(victim), signal.SIGSTOP)
        try:
            for i in range(1, 61):
                assert s.put(f"{c.url(leader)}/w/k{i:03}.json?ns={ns}&print=silent", data=str(i),
                             timeout=10).status_code == 204
        finally:
            os.kill(c.pid(victim), signal.SIGCONT)
        log = os.path.join(c.dir, f"{victim}.log")
        deadline = time.time() + 15
        while "installed snapshot from leader" not in open(log, errors="replace").read():
            assert time.time() < deadline, "the follower did not install a snapshot"
            time.sleep(0.1)
        # Later writes, made on the leader after the install: puts, a delete and a multi-path patch.
        for i in range(61, 71):
            assert s.put(f"{c.url(leader)}/w/k{i:03}.json?ns={ns}&print=silent", data=str(i), timeout=10).status_code == 204
        assert s.delete(f"{c.url(leader)}/w/k005.json?ns={ns}", timeout=10).status_code == 200
        assert s.patch(f"{c.url(leader)}/w.json?ns={ns}", data=json.dumps({"k071": 71, "k070": None}),
                       timeout=10).status_code == 200
        c.wait_converged(timeout=30)
        final = requests.get(f"{c.url(victim)}/w.json?ns={ns}", timeout=5).json()
        assert len(final) == 70 and "k005" not in final and final["k071"] == 71

        def sse_model():
            model = None
            for event, msg in list(sse_events):
                model = apply_at(model, msg["path"], msg["data"], merge=(event == "patch"))
            return model

        def ws_models():
            root, window = None, None
            for push in list(pushes):
                b = push["b"]
                if push["a"] not in ("d", "m"):
                    continue
                if "t" in b:
                    window = apply_at(window, "", b["d"], merge=(push["a"] == "m"))
                else:
                    root = apply_at(root, b["p"], b["d"], merge=(push["a"] == "m"))
            return (root or {}).get("w"), window

        deadline = time.time() + 15
        while (sse_model(), ws_models()) != (final, (final, {k: final[k] for k in sorted(final)[-3:]})):
            assert time.time() < deadline, f"listeners did not converge: {sse_model()} {ws_models()}"
            time.sleep(0.1)
        assert not closed, f"listeners were dropped: {closed}"
        # The resynchronisation itself: a second put at "/" on the stream, a second untagged
        # full-data push at /w on the socket, both carrying data only the snapshot had.
        resync_puts = [m for e, m in sse_events if e == "put" and m["path"] == "/"]
        assert len(resync_puts) >= 2 and "k010" in resync_puts[1]["data"]
        full = [p for p in pushes if p["a"] == "d" and p["b"]["p"] == "w" and "t" not in p["b"]]
        assert len(full) >= 2 and "k010" in full[1]["b"]["d"]
        stop.set()
    finally:
        stop.set()
        c.down()


def test_rules_replicate_and_every_replica_reaches_the_same_verdict(cluster):
    ns = "rules" + uuid.uuid4().hex[:8]
    owner = {"Authorization": "Bearer owner"}
    leader = cluster.leader()
    follower = cluster.followers()[0]
    rules = {"rules": {".read": True, "$k": {".write": "newData.isNumber() && newData.val() > 10"}}}
    r = requests.put(cluster.url(follower) + f"/.settings/rules.json?ns={ns}", data=json.dumps(rules), headers=owner)
    assert r.status_code == 200, r.text
    assert requests.put(cluster.url(leader) + f"/a.json?ns={ns}", data="5").status_code == 401
    assert requests.put(cluster.url(follower) + f"/b.json?ns={ns}", data="50").status_code == 200
    assert requests.put(cluster.url(follower) + f"/c.json?ns={ns}", data="1").status_code == 401
    cluster.wait_converged()
    for n in cluster.nodes:
        assert json.loads(requests.get(n["url"] + f"/.settings/rules.json?ns={ns}", headers=owner).text) == rules
        assert requests.get(n["url"] + f"/.json?ns={ns}").json() == {"b": 50}


def test_listeners_stay_ordered_unique_and_gap_free_across_a_leader_change(tmp_path):
    """SSE listeners on both followers while one writer sets increasing values through a follower
    and the leader is killed: each listener sees the values strictly increasing (ordered, no
    duplicates) and every acknowledged value (no gap), across the election."""
    c = Cluster(tmp_path / "c")
    try:
        old = c.leader()
        f1, f2 = c.followers()
        seen = {f1: [], f2: []}
        ready = {f1: threading.Event(), f2: threading.Event()}
        stop = threading.Event()

        def listen(node):
            with requests.get(f"{c.url(node)}/seq.json", headers={"Accept": "text/event-stream"},
                              stream=True, timeout=30) as stream:
                event = None
                for line in stream.iter_lines(decode_unicode=True):
                    if line.startswith("event: "):
                        event = line[len("event: "):]
                    elif line.startswith("data: ") and event in ("put", "patch"):
                        msg = json.loads(line[len("data: "):])
                        if msg["path"] == "/" and not ready[node].is_set():
                            ready[node].set()
                            continue
                        assert event == "put" and msg["path"] == "/v", msg
                        seen[node].append(msg["data"])
                    if stop.is_set():
                        return

        listeners = [threading.Thread(target=listen, args=(n,), daemon=True) for n in (f1, f2)]
        for t in listeners:
            t.start()
        assert all(e.wait(10) for e in ready.values())
        acked, value, s = [], 0, requests.Session()
        killed_at, new = None, None
        deadline = time.time() + 40
        while time.time() < deadline:
            value += 1
            try:
                r = s.put(f"{c.url(f1)}/seq/v.json?print=silent", data=str(value), timeout=12)
                if r.status_code == 204:
                    acked.append(value)
                else:
                    time.sleep(0.02)  # no leader for a moment: the next attempt uses a new value
            except requests.RequestException:
                pass
            if killed_at is None and len(acked) == 30:
                killed_at = time.time()
                c.kill9(old)
            if killed_at is not None and new is None and time.time() - killed_at > 0.2:
                try:
                    new = c.leader(among=[f1, f2], timeout=0.5)
                except AssertionError:
                    pass
            if new is not None and len([v for v in acked if v > 30]) >= 60:
                break
        assert new in (f1, f2), "no new leader among the followers"
        assert len(acked) >= 90, f"only {len(acked)} writes acknowledged"
        # One more acknowledged write marks the end; wait until both listeners saw it.
        marker = value + 1
        assert s.put(f"{c.url(f1)}/seq/v.json?print=silent", data=str(marker), timeout=12).status_code == 204
        acked.append(marker)
        end = time.time() + 15
        while time.time() < end and not all(seen[n] and seen[n][-1] == marker for n in (f1, f2)):
            time.sleep(0.05)
        stop.set()
        for n in (f1, f2):
            got = seen[n]
            assert got and got[-1] == marker, f"{n} did not see the last write: {got[-5:]}"
            assert all(a < b for a, b in zip(got, got[1:])), f"{n} saw values out of order or twice: {got}"
            missing = sorted(set(acked) - set(got))
            assert not missing, f"{n} missed acknowledged writes {missing[:10]}"
    finally:
        c.down()


def test_mixed_batch_one_denied_one_cas_failing_the_rest_applied(cluster):
    """Writes entering at once (through a follower and the leader, so they share forwards, peer
    flushes, log entries and apply transactions): a rules denial and a failed compare-and-set
    affect only their own write."""
    ns = "mix" + uuid.uuid4().hex[:8]
    owner = {"Authorization": "Bearer owner"}
    leader = cluster.leader()
    follower = cluster.followers()[0]
    rules = {"rules": {".read": True, "$k": {".write": "newData.isNumber() && newData.val() > 10"}}}
    assert requests.put(cluster.url(leader) + f"/.settings/rules.json?ns={ns}", data=json.dumps(rules), headers=owner).status_code == 200
    assert requests.put(cluster.url(follower) + f"/cas.json?ns={ns}", data="100").status_code == 200
    etag = requests.get(cluster.url(follower) + f"/cas.json?ns={ns}", headers={"X-Firebase-ETag": "true"}).headers["ETag"]
    start = threading.Barrier(34)
    results = {}

    def put(name, url, body, headers=None):
        start.wait()
        results[name] = requests.put(f"{url}/{name}.json?ns={ns}", data=body, headers=headers or {}, timeout=15)

    jobs = [("ok%d" % i, cluster.url(follower if i % 2 else leader), str(20 + i), None) for i in range(30)]
    jobs.append(("denied", cluster.url(follower), "1", None))
    jobs.append(("cas", cluster.url(follower), "200", {"if-match": "not-" + etag}))
    jobs.append(("cas2", cluster.url(leader), "300", None))
    threads = [threading.Thread(target=put, args=job) for job in jobs]
    for t in threads:
        t.start()
    start.wait()
    for t in threads:
        t.join()
    assert results["denied"].status_code == 401, results["denied"].text
    assert "error" in results["denied"].json()
    assert results["cas"].status_code == 412, results["cas"].text
    for name, _, body, _ in jobs:
        if name.startswith("ok") or name == "cas2":
            assert results[name].status_code == 200 and results[name].json() == int(body), (name, results[name].text)
    cluster.wait_converged()
    expected = {f"ok{i}": 20 + i for i in range(30)} | {"cas": 100, "cas2": 300}
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/.json?ns={ns}").json() == expected, n["id"]


async def pipelined_wire_load(c, ns, worker, acked, stop, window=64):
    """Pipelined wire-protocol puts (`window` in flight) on one connection at a time; a put is
    acknowledged only by its `ok` response. A dead node's connection moves to the next node."""
    import asyncio
    import websockets
    seq, attempt = 0, worker
    while not stop.is_set():
        nodes = c.nodes
        url = nodes[attempt % len(nodes)]["url"].replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
        attempt += 1
        try:
            ws = await asyncio.wait_for(websockets.connect(url, max_size=1 << 24), 2)
            await asyncio.wait_for(ws.recv(), 2)  # hello
        except Exception:
            await asyncio.sleep(0.05)
            continue
        inflight, slots = {}, asyncio.Semaphore(window)

        async def reader():
            while True:
                frame = await ws.recv()
                if frame.isdigit() and len(frame) <= 6:
                    frame = "".join([await ws.recv() for _ in range(int(frame))])
                d = json.loads(frame).get("d", {})
                if "r" in d and d["r"] in inflight:
                    key, value = inflight.pop(d["r"])
                    slots.release()
                    if d.get("b", {}).get("s") == "ok":
                        acked[key] = value

        reading = asyncio.create_task(reader())
        try:
            r = 0
            while not stop.is_set() and not reading.done():
                try:
                    await asyncio.wait_for(slots.acquire(), 0.5)
                except asyncio.TimeoutError:
                    continue
                r += 1
                seq += 1
                key = f"p{worker}_{seq}"
                inflight[r] = (key, seq)
                # One multi-path update: the put, and this worker's latest sequence number (the
                # order check: a replica's `lastw` may never fall behind an acknowledged write).
                update = {f"pk/{key}": seq, f"lastw/w{worker}": seq}
                await ws.send(json.dumps({"t": "d", "d": {"r": r, "a": "m", "b": {"p": "/", "d": update}}}))
        except Exception:
            pass  # the node died mid-stream: what was not answered ok is not acknowledged
        finally:
            # Answers still on their way count once they arrive.
            try:
                await asyncio.wait_for(asyncio.shield(reading), 1.0 if stop.is_set() else 0.01)
            except BaseException:
                pass
            reading.cancel()
            try:
                await ws.close()
            except Exception:
                pass


def test_kill9_leader_under_pipelined_wire_load_loses_no_acknowledged_write(tmp_path):
    import asyncio
    c = Cluster(tmp_path / "c")
    ns = "pl" + uuid.uuid4().hex[:8]
    acked = {}
    try:
        old = c.leader()

        async def run():
            stop = asyncio.Event()
            workers = [asyncio.create_task(pipelined_wire_load(c, ns, w, acked, stop)) for w in range(3)]
            await asyncio.sleep(1.5)
            before = len(acked)
            await asyncio.to_thread(c.kill9, old)
            survivors = [n["id"] for n in c.nodes if n["id"] != old]
            new = await asyncio.to_thread(c.leader, survivors, 10)
            assert new != old
            await asyncio.sleep(1.5)  # pipelined writes continue under the new leader
            stop.set()
            await asyncio.gather(*workers)
            return before

        before = asyncio.run(run())
        assert before > 20 and len(acked) > before, f"{before} acknowledged before the kill, {len(acked)} in all"
        script("start-node", "--dir", c.dir, "--id", old)
        c.wait_converged(timeout=30)
        for n in c.nodes:
            data = requests.get(f"{n['url']}/pk.json?ns={ns}", timeout=10).json() or {}
            lost = [k for k, v in acked.items() if data.get(k) != v]
            assert not lost, f"{n['id']} lost {len(lost)} acknowledged pipelined writes, e.g. {lost[:5]}"
            # A worker's writes apply in the order it sent them: its last sequence number is at
            # least that of every write of its that was acknowledged.
            last = requests.get(f"{n['url']}/lastw.json?ns={ns}", timeout=10).json() or {}
            for w in range(3):
                top = max((v for k, v in acked.items() if k.startswith(f"p{w}_")), default=0)
                assert last.get(f"w{w}", 0) >= top, f"{n['id']}: worker {w} last {last.get(f'w{w}')} < acknowledged {top}"
        print(f"{len(acked)} acknowledged pipelined writes ({before} before the kill)")
    finally:
        c.down()


def test_pipelined_wire_writes_at_a_follower_apply_once_and_in_order(cluster):
    """2,000 `p` requests sent on a follower's WebSocket without waiting: the follower forwards
    them to the leader in batches; every answer is `ok`, in request order; a listener on the
    leader sees the counter only rise; every replica ends with every write exactly as sent."""
    import asyncio
    import websockets
    ns = "ord" + uuid.uuid4().hex[:8]
    follower, leader = cluster.followers()[0], cluster.leader()
    total = 2000
    seen = []
    sse = requests.get(cluster.url(leader) + f"/last.json?ns={ns}", headers={"Accept": "text/event-stream"}, stream=True, timeout=60)

    def listen():
        for line in sse.iter_lines(decode_unicode=True):
            if line and line.startswith("data: "):
                d = json.loads(line[6:])
                if d and isinstance(d.get("data"), int):
                    seen.append(d["data"])
                    if d["data"] == total - 1:
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()

    async def run():
        url = cluster.url(follower).replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
        async with websockets.connect(url, max_size=1 << 24) as ws:
            await ws.recv()  # hello
            for i in range(total):
                update = {f"items/i{i:05d}": i, "last": i}
                await ws.send(json.dumps({"t": "d", "d": {"r": i + 1, "a": "m", "b": {"p": "/", "d": update}}}))
            answers = []
            while len(answers) < total:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if frame.isdigit() and len(frame) <= 6:
                    frame = "".join([await ws.recv() for _ in range(int(frame))])
                d = json.loads(frame).get("d", {})
                if "r" in d:
                    answers.append((d["r"], d.get("b", {}).get("s")))
            return answers

    answers = asyncio.run(run())
    assert [r for r, _ in answers] == list(range(1, total + 1)), "answers out of request order"
    assert all(s == "ok" for _, s in answers), [a for a in answers if a[1] != "ok"][:5]
    listener.join(30)
    sse.close()
    assert seen and seen[-1] == total - 1, seen[-5:]
    assert all(a <= b for a, b in zip(seen, seen[1:])), "the counter went backwards: writes applied out of order"
    cluster.wait_converged()
    expected = {f"i{i:05d}": i for i in range(total)}
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/items.json?ns={ns}", timeout=10).json() == expected, n["id"]
        assert requests.get(n["url"] + f"/last.json?ns={ns}", timeout=10).json() == total - 1, n["id"]


def test_a_stamped_write_sent_again_to_another_node_applies_once(cluster):
    """A client that lost the answer of a write made through a follower sends it again to the
    leader (and to the other follower) with the same stamp: the log applies it once, every
    replica agrees, and every copy is answered ok."""
    import asyncio
    sys.path.insert(0, os.path.dirname(__file__))
    from wire import WireClient
    ns = "once" + uuid.uuid4().hex[:8]
    inc = {".sv": {"increment": 1}}
    f1, f2 = cluster.followers()[:2]
    leader = cluster.leader()

    async def send(node_id, n):
        c = await WireClient.connect(cluster.url(node_id), ns)
        _, resp = await c.request("m", {"p": "/", "d": {"c": inc, "last": n}, "w": {"id": "dev-1", "n": n}})
        await c.close()
        return resp["s"]

    async def go():
        answers = []
        for n in range(1, 6):
            for node_id in (f1, leader, f2):
                answers.append(await send(node_id, n))
        return answers

    answers = asyncio.run(go())
    assert answers == ["ok"] * 15, answers
    cluster.wait_converged()
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/.json?ns={ns}", timeout=10).json() == {"c": 5, "last": 5}, n["id"]
