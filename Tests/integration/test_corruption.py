"""Corruption detection (issue 40 item 4, etcd's corrupt check) against real emberd processes.

A 3-node cluster checks its state hashes every second (--corruption-check-interval 1). One
follower is stopped and one stored value in its LMDB data file is altered in place, without
the log (lmdb_alter.c: what a bad sector or a bad copy does); restarted, it must raise CORRUPT
within FOUND_WITHIN, refuse reads, listens and writes (REST 503 with {"error": ...}, wire
`unavailable`) while the others go on, and be healthy again after the repair OPERATIONS.md
gives (stop, wipe the data directory, start: it resyncs from the leader)."""
import json
import os
import shutil
import subprocess
import time

import requests

from cluster_helpers import Cluster
from conftest import wait_for
from fault_helpers import alarms, build_tool, data_dir, layout, metric, start_node, stop_node, wire
from test_ops import ember

NS = "integrity"
# From the restart of the altered member to its CORRUPT alarm: its first check round runs a
# second after it starts (the interval), then it catches up and compares; the rest is slack for
# a loaded debug build.
FOUND_WITHIN = 30
PRISTINE = "pristine-value-0001"
TAMPERED = "tampered-value-0001"


def put(url, path, value):
    return requests.put(f"{url}/{path}.json?ns={NS}", data=json.dumps(value), timeout=10)


def get(url, path, **headers):
    return requests.get(f"{url}/{path}.json?ns={NS}", headers=headers, timeout=10)


def test_a_follower_with_an_altered_value_raises_corrupt_and_the_cluster_goes_on(tmp_path):
    tool = build_tool("lmdb_alter.c", str(tmp_path), libs=["-llmdb"])
    c = Cluster(tmp_path / "c", extra=("--corruption-check-interval", "1"))
    try:
        leader = c.leader()
        bad, good = c.followers()
        assert put(c.url(leader), "victim", PRISTINE).status_code == 200
        for i in range(20):
            assert put(c.url(leader), f"others/k{i}", i).status_code == 200
        c.wait_converged()
        assert all(alarms(c.status(n)) == set() for n in (leader, bad, good))
        out = ember("check", "hashes", "--cluster", "--node", c.url(leader))
        assert "agrees with the majority" in out.stdout and "CORRUPT" not in out.stdout, out.stdout

        stop_node(c, bad)
        altered = subprocess.run([tool, data_dir(c, bad), PRISTINE, TAMPERED], capture_output=True, text=True)
        assert altered.returncode == 0 and altered.stdout.strip() == "1", altered
        start_node(c, bad)
        started = time.time()

        # The status event: the alarm on the altered member, within the named time.
        st = wait_for("CORRUPT on the altered member", lambda: "CORRUPT" in alarms(c.status(bad)) and c.status(bad),
                      timeout=FOUND_WITHIN)
        found = time.time() - started
        print(f"CORRUPT raised {found:.1f} s after the restart")
        alarm = next(a for a in st["alarms"] if a["alarm"] == "CORRUPT")
        assert "state hash" in alarm["message"], alarm

        # It serves no data: REST reads and SSE listens 503 with an error, wire gets and
        # listens `unavailable`, writes refused too; readiness fails; metrics and log say why.
        r = get(c.url(bad), "victim")
        assert r.status_code == 503 and "CORRUPT" in r.json()["error"], r.text
        r = get(c.url(bad), "others", Accept="text/event-stream")
        assert r.status_code == 503 and "CORRUPT" in r.json()["error"], r.text
        assert put(c.url(bad), "fromBad", 1).status_code == 503
        assert wire(c.url(bad), NS, "g", {"p": "/victim", "q": {}})["s"] == "unavailable"
        assert wire(c.url(bad), NS, "q", {"p": "/others", "h": ""})["s"] == "unavailable"
        ready = requests.get(c.url(bad) + "/readyz", timeout=5)
        assert ready.status_code == 503 and "CORRUPT" in ready.json()["reason"], ready.text
        assert metric(c.url(bad), 'ember_alarm{alarm="CORRUPT"}') == 1
        assert metric(c.url(leader), 'ember_alarm{alarm="CORRUPT"}') == 0
        with open(os.path.join(c.dir, f"{bad}.log"), errors="replace") as f:
            assert any("alarm raised" in line and "CORRUPT" in line for line in f), "no CORRUPT line in the log"

        # The others go on: no alarm, writes commit, reads on both healthy members see them.
        assert alarms(c.status(leader)) == set() and alarms(c.status(good)) == set()
        assert put(c.url(leader), "after", "from-leader").status_code == 200
        assert put(c.url(good), "after2", "from-follower").status_code == 200
        for n in (leader, good):
            wait_for(f"writes on {n}", lambda n=n: get(c.url(n), "after").json() == "from-leader"
                     and get(c.url(n), "after2").json() == "from-follower")
            assert get(c.url(n), "victim").json() == PRISTINE

        # The on-demand check names the member and fails.
        p = ember("check", "hashes", "--cluster", "--node", c.url(leader), check=False)
        assert p.returncode != 0 and f"{bad} is CORRUPT" in p.stderr, (p.stdout, p.stderr)

        # The repair OPERATIONS.md gives: out of the membership, stopped, its data directory
        # wiped (the alarm's marker with it), started with --join and added back; it resyncs
        # from the leader's snapshot.
        ember("members", "remove", bad, "--node", c.url(leader))
        stop_node(c, bad)
        shutil.rmtree(data_dir(c, bad))
        start_node(c, bad, join=True)
        peer_port = next(n["peerPort"] for n in layout(c)["nodes"] if n["id"] == bad)
        wait_for(f"{bad} added back", lambda: ember("members", "add", bad, f"127.0.0.1:{peer_port}", "--client-url", c.url(bad),
                                                    "--node", c.url(leader), check=False).returncode == 0)
        c.wait_converged(timeout=60)
        assert alarms(c.status(bad)) == set()
        assert get(c.url(bad), "victim").json() == PRISTINE
        assert get(c.url(bad), "after2").json() == "from-follower"
        out = ember("check", "hashes", "--cluster", "--node", c.url(bad))
        assert out.stdout.count("agrees with the majority") == 3, out.stdout
    finally:
        c.down()


def test_the_check_concludes_under_steady_writes(tmp_path):
    """Every member stops its apply at the round's index and hashes the state there, so a round
    meets at one index while writes go on (before 0.5.1 a round compared only where members'
    applied indexes happened to meet, and under steady writes they rarely did)."""
    import threading
    c = Cluster(tmp_path / "c")
    stop = threading.Event()
    written = [0]

    def writer(url, w):
        s = requests.Session()
        while not stop.is_set():
            assert s.put(f"{url}/steady/w{w}/k{written[0] % 50}.json?ns={NS}", data=str(written[0]), timeout=10).status_code == 200
            written[0] += 1

    try:
        leader = c.leader()
        # Four writers, so several entries are in flight at every moment.
        for w in range(4):
            threading.Thread(target=writer, args=(c.url(leader), w), daemon=True).start()
        wait_for("writes flowing", lambda: written[0] >= 50)
        verdicts = []
        for _ in range(3):
            before = written[0]
            r = requests.post(c.url(leader) + "/.ember/check/hashes", headers={"Authorization": "Bearer owner"}, timeout=30)
            assert r.status_code == 200, r.text
            v = r.json()
            verdicts.append(v)
            # Writes went on during the round (it is a round under writes).
            wait_for("more writes", lambda: written[0] > before + 5)
            assert v["conclusive"] and not v["corrupt"] and v["missing"] == [], v
            assert set(v["hashes"]) == set(v["voters"]) and len(set(v["hashes"].values())) == 1, v
        print("rounds at", [v["appliedIndex"] for v in verdicts], "with", written[0], "writes")
    finally:
        stop.set()
        c.down()


def test_a_learner_with_an_altered_value_raises_corrupt_on_itself(tmp_path):
    """Learners are reporters in the check (issue 38): asked and told like voters, a learner
    whose state differs from the voters' majority raises CORRUPT on itself and serves no data;
    its hash is shown in a voter's verdict (learnerHashes) and never counted, so the voters stay
    healthy and keep committing."""
    from test_membership import add_node, admin, wait_converged
    tool = build_tool("lmdb_alter.c", str(tmp_path), libs=["-llmdb"])
    c = Cluster(tmp_path / "c", extra=("--corruption-check-interval", "1"))
    try:
        leader = c.leader()
        assert put(c.url(leader), "victim", PRISTINE).status_code == 200
        n4 = add_node(c, "n4")
        body = {"id": "n4", "address": n4["peerAddress"], "clientURL": n4["url"], "learner": True}
        assert admin(c.url(leader), "POST", "/.ember/members", body).status_code == 200
        all4 = ["n1", "n2", "n3", "n4"]
        wait_converged(c, all4)

        def verdict():
            r = requests.post(c.url(leader) + "/.ember/check/hashes", headers={"Authorization": "Bearer owner"}, timeout=30)
            assert r.status_code == 200, r.text
            return r.json()
        # Healthy: the leader's verdict shows the learner's hash, equal to the voters'.
        v = wait_for("the learner's hash in a verdict", lambda: (lambda v: "n4" in v["learnerHashes"] and v)(verdict()))
        assert v["learnerHashes"]["n4"] == v["stateHash"] and not v["corrupt"] and "n4" not in v["voters"], v

        stop_node(c, "n4")
        altered = subprocess.run([tool, data_dir(c, "n4"), PRISTINE, TAMPERED], capture_output=True, text=True)
        assert altered.returncode == 0 and altered.stdout.strip() == "1", altered
        start_node(c, "n4")
        st = wait_for("CORRUPT on the altered learner", lambda: "CORRUPT" in alarms(c.status("n4")) and c.status("n4"),
                      timeout=FOUND_WITHIN)
        assert st["role"] == "learner"
        alarm = next(a for a in st["alarms"] if a["alarm"] == "CORRUPT")
        assert "this learner's state hash" in alarm["message"] and "a majority of the voters" in alarm["message"], alarm
        r = get(c.url("n4"), "victim")
        assert r.status_code == 503 and "CORRUPT" in r.json()["error"], r.text

        # The voters: no alarm, writes commit; the leader sees the learner's other hash, uncounted.
        three = ["n1", "n2", "n3"]
        assert all(alarms(c.status(n)) == set() for n in three)
        assert put(c.url(leader), "after", "x").status_code == 200
        v = wait_for("the learner's other hash in a verdict",
                     lambda: (lambda v: v["learnerHashes"].get("n4") not in (None, v["stateHash"]) and v)(verdict()))
        assert v["conclusive"] and not v["corrupt"] and set(v["hashes"]) == set(three), v
    finally:
        c.down()
