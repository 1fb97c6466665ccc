"""Learners (non-voting members, issue 38) on real emberd processes (mutual TLS).

3 voters -> add n4 as a learner (starts empty with --join, catches up by snapshot + log) ->
it reports role "learner" (status and `ember status`), serves an SSE listener, takes writes
(forwarded to the leader, read back at once) -> killing it does not stop commits; restarted it is
still a learner -> with 2 of 3 voters down the leader and the learner commit nothing (the learner
is not in the quorum) -> promoted, it is a voter: counted in the quorum and able to lead.
"""
import json
import os
import signal
import subprocess
import time

import requests

from conftest import EMBERD
from cluster_helpers import Cluster, lc, script
from test_membership import add_node, admin, handshake_nodes, wait_converged, wait_for, write_range

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))


def stop(c, node_id):
    os.kill(c.pid(node_id), signal.SIGKILL)
    deadline = time.time() + 5
    while lc.alive(c.pid(node_id)) and time.time() < deadline:
        time.sleep(0.05)


def test_learner_replicates_serves_and_is_not_in_the_quorum(tmp_path):
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    try:
        three = ["n1", "n2", "n3"]
        leader = c.leader()
        write_range(c.url(leader), 0, 40)
        assert c.status(leader)["snapshotIndex"] > 0  # n4 needs a snapshot to catch up

        # --- refused bodies change nothing ---
        n4 = add_node(c, "n4")
        follower = next(i for i in three if i != leader)
        body = {"id": "n4", "address": n4["peerAddress"], "clientURL": n4["url"]}
        assert admin(c.url(follower), "POST", "/.ember/members", {**body, "learner": "yes"}).status_code == 400
        r = admin(c.url(follower), "POST", "/.ember/members/n9/promote")
        assert r.status_code == 404 and "not a learner" in r.json()["error"]
        assert admin(c.url(follower), "POST", "/.ember/members/n2/promote").status_code == 409
        assert admin(c.url(follower), "POST", "/.ember/members/a%2Fb/promote").status_code == 400

        # --- refused while a member has not shown it reads learners (peer level 3): here a
        # voter n9 that never connected, as a member of an older build would look ---
        r = admin(c.url(leader), "POST", "/.ember/members", {"id": "n9", "address": "127.0.0.1:1"})
        assert r.status_code == 200, r.text
        r = admin(c.url(follower), "POST", "/.ember/members", {**body, "learner": True})
        assert r.status_code == 409 and "n9" in r.json()["error"] and "level 3" in r.json()["error"], r.text
        assert admin(c.url(leader), "DELETE", "/.ember/members/n9").status_code == 200

        # --- add n4 as a learner through a follower (forwarded to the leader) ---
        r = admin(c.url(follower), "POST", "/.ember/members", {**body, "learner": True})
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == three and r.json()["learners"] == ["n4"]
        assert admin(c.url(leader), "POST", "/.ember/members", body).status_code == 409
        r = admin(c.url(leader), "POST", "/.ember/leader/transfer", {"to": "n4"})
        assert r.status_code == 409 and "learner" in r.json()["error"]
        all4 = three + ["n4"]
        wait_converged(c, all4)
        # The role is Raft's view, published after the apply that installed the configuration.
        wait_for(lambda: c.status("n4")["role"] == "learner", "n4 to report the learner role")
        st = wait_converged(c, all4)
        assert st["n4"]["role"] == "learner" and st["n4"]["member"] is True
        assert all(s["voters"] == three and s["learners"] == ["n4"] for s in st.values())
        assert st["n4"]["members"]["n4"] == {"peer": n4["peerAddress"], "url": n4["url"], "learner": True}
        assert requests.get(n4["url"] + "/m.json", timeout=5).json() == list(range(40))
        # Queries are served from the learner's applied state too.
        q = requests.get(n4["url"] + "/m.json", params={"orderBy": '"$key"', "startAt": '"38"', "endAt": '"39"'}, timeout=5)
        assert q.status_code == 200 and q.json() == {"38": 38, "39": 39}, q.text
        with open(os.path.join(c.dir, "n4.log"), errors="replace") as f:
            assert "installed snapshot from leader" in f.read()
        out = subprocess.run([EMBER, "status", "--node", c.url(leader)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        row = next(line for line in out.stdout.splitlines() if line.split()[:1] == ["n4"])
        assert row.split()[1] == "learner", out.stdout
        # Clients are told about the learner with the voters (the wire handshake's node list).
        assert n4["url"] in handshake_nodes(c.url(leader))

        # --- a listener on the learner sees a write made at the leader ---
        with requests.get(f"{n4['url']}/live.json", headers={"Accept": "text/event-stream"},
                          stream=True, timeout=20) as stream:
            lines = stream.iter_lines(decode_unicode=True)
            assert next(lines) == "event: put"
            assert json.loads(next(lines)[len("data: "):]) == {"path": "/", "data": None}
            assert requests.put(f"{c.url(leader)}/live/v.json", data="42", timeout=10).status_code == 200
            for line in lines:
                if line.startswith("data: ") and "42" in line:
                    assert json.loads(line[len("data: "):]) == {"path": "/v", "data": 42}
                    break

        # --- writes through the learner: forwarded, and read back there at once ---
        for i in range(5):
            r = requests.put(f"{n4['url']}/ryw/{i}.json", data=str(i), timeout=10)
            assert r.status_code == 200, r.text
            assert requests.get(f"{n4['url']}/ryw/{i}.json", timeout=5).json() == i
        assert requests.get(f"{c.url(leader)}/ryw.json", timeout=5).json() == list(range(5))

        # --- losing the learner does not stop commits; restarted it is still a learner ---
        stop(c, "n4")
        write_range(c.url(leader), 40, 50)
        script("start-node", "--dir", c.dir, "--id", "n4")
        st = wait_converged(c, all4)
        assert st["n4"]["role"] == "learner" and st["n4"]["learners"] == ["n4"]
        assert requests.get(n4["url"] + "/m.json", timeout=5).json() == list(range(50))

        # --- 2 of 3 voters down: the leader and the learner are not a quorum ---
        leader = c.leader(among=all4)
        down = [i for i in three if i != leader]
        for i in down:
            stop(c, i)
        before = c.status("n4")["appliedIndex"]
        r = requests.put(f"{c.url(leader)}/noquorum.json", data="1", timeout=40)
        assert r.status_code == 503, r.text
        # The leader stepped down (CheckQuorum: the learner's answers are not a quorum either).
        wait_for(lambda: c.status(leader)["role"] != "leader", f"{leader} to step down")
        assert requests.get(f"{n4['url']}/noquorum.json", timeout=5).json() is None
        assert c.status("n4")["appliedIndex"] == before
        for i in down:
            script("start-node", "--dir", c.dir, "--id", i)
        leader = c.leader(among=three, timeout=20)
        wait_converged(c, all4)

        # --- promote: n4 votes (3 of 4 needed with one original voter down) and can lead ---
        r = admin(c.url(follower), "POST", "/.ember/members/n4/promote")
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == all4 and r.json()["learners"] == []
        st = wait_converged(c, all4)
        assert all(s["voters"] == all4 and s["learners"] == [] for s in st.values())
        assert st["n4"]["role"] == "follower"
        r = admin(c.url(leader), "POST", "/.ember/leader/transfer", {"to": "n4"})
        assert r.status_code == 200, r.text
        assert c.leader(among=all4) == "n4"
        victim = next(i for i in three if i != follower)
        stop(c, victim)
        write_range(n4["url"], 50, 55)  # n4 + 2 voters: 3 of 4
        rest = [i for i in all4 if i != victim]
        wait_converged(c, rest)
        assert requests.get(c.url(follower) + "/m.json", timeout=5).json() == list(range(55))

        # --- demote it again: back to a learner that keeps replicating ---
        script("start-node", "--dir", c.dir, "--id", victim)
        r = admin(c.url(follower), "POST", "/.ember/members/n4/demote")
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == three and r.json()["learners"] == ["n4"]
        leader = c.leader(among=three, timeout=20)
        write_range(c.url(leader), 55, 60)
        st = wait_converged(c, all4)
        assert st["n4"]["role"] == "learner"
        assert requests.get(n4["url"] + "/m.json", timeout=5).json() == list(range(60))
    finally:
        c.down()


def test_learner_sync_interval_flag_range(tmp_path):
    """--learner-sync-interval-ms: in --help; accepted at both ends of 0...60000, refused outside
    (or not a number) with the range named and a usage exit status, before anything starts."""
    out = subprocess.run([EMBERD, "--help"], capture_output=True, text=True, timeout=60)
    assert "--learner-sync-interval-ms" in out.stdout
    for good in ["0", "60000"]:
        p = subprocess.run([EMBERD, "--data", str(tmp_path / "d"), f"--learner-sync-interval-ms={good}", "--check-config"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and json.loads(p.stdout)["ok"] is True, p.stderr
    for bad in ["-1", "60001"]:
        p = subprocess.run([EMBERD, "--data", str(tmp_path / "d"), f"--learner-sync-interval-ms={bad}", "--check-config"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 64 and "--learner-sync-interval-ms must be 0...60000" in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([EMBERD, "--data", str(tmp_path / "d"), "--learner-sync-interval-ms=soon", "--check-config"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 64 and "learner-sync-interval-ms" in p.stderr and "soon" in p.stderr, (p.returncode, p.stderr)
    # --check-config opens no data.
    assert not os.path.exists(tmp_path / "d") or os.listdir(tmp_path / "d") == []


def test_promotion_threshold_flag(tmp_path):
    """--max-promotion-lag: promote is refused (409, with the lag and the limit) while the learner
    is further behind than the flag says, accepted once it has caught up. The learner is held
    back with SIGSTOP, so its lag is certain (it acknowledges nothing while stopped)."""
    out = subprocess.run([EMBERD, "--help"], capture_output=True, text=True, timeout=60)
    assert "--max-promotion-lag" in out.stdout
    p = subprocess.run([EMBERD, "--max-promotion-lag", "100000001", "--check-config"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--max-promotion-lag must be 0...100000000" in p.stderr, p.stderr

    c = Cluster(tmp_path / "c", extra=["--max-promotion-lag", "5"])
    try:
        leader = c.leader()
        n4 = add_node(c, "n4")
        body = {"id": "n4", "address": n4["peerAddress"], "clientURL": n4["url"], "learner": True}
        assert admin(c.url(leader), "POST", "/.ember/members", body).status_code == 200
        all4 = ["n1", "n2", "n3", "n4"]
        wait_converged(c, all4)

        os.kill(c.pid("n4"), signal.SIGSTOP)
        try:
            write_range(c.url(leader), 0, 20)
            r = admin(c.url(leader), "POST", "/.ember/members/n4/promote")
            assert r.status_code == 409, r.text
            assert "entries behind" in r.json()["error"] and "only within 5" in r.json()["error"], r.text
            assert c.status(leader)["learners"] == ["n4"]
        finally:
            os.kill(c.pid("n4"), signal.SIGCONT)

        wait_converged(c, all4)
        r = admin(c.url(leader), "POST", "/.ember/members/n4/promote")
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == all4 and r.json()["learners"] == []
    finally:
        c.down()
