"""A 3-node cluster of real emberd processes on loopback, mutual TLS between peers: elections,
writes and reads through any node, foreign peers refused, listeners on followers, leader hand-over,
kill -9 of the leader under load, rules on every replica, listeners across a leader change.
Catching up (log, snapshots, compaction) is in test_cluster_catchup.py; batched and pipelined
writes in test_cluster_batches.py; the helpers in cluster_helpers.py.
"""
import json
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
import requests

from conftest import EMBERD, free_port
from cluster_helpers import CHAOS_ROUNDS, ELECTION_TIMEOUT, Cluster, assert_no_acknowledged_write_lost, cluster, lc, script  # noqa: F401, F811  (`cluster`: the module's fixture)


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
