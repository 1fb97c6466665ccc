"""A learner under writes killed with SIGKILL (issue 38): it keeps no log (its leader sends it
committed entries only and it applies them without log rows, without a data sync), so restarted
it resumes from its applied index and catches up to the same state as the voters, still a
learner, still without a log; the voters' log is untouched."""
import os
import threading
import time

import requests

from cluster_helpers import Cluster, script
from test_learners import stop
from test_membership import add_node, admin, wait_converged, wait_for

WRITERS = 3
# Bounded: each writer stops by itself after this many writes or once told.
MAX_WRITES_PER_WRITER = 20_000
# Attempts at one write before the writer gives up (an election under load refuses a few).
MAX_ATTEMPTS_PER_WRITE = 50
# Pause between attempts at one write (woken early when the writers are told to stop).
RETRY_PAUSE_S = 0.05
# A cluster 503 that says the write was never applied (RaftHost.swift ClusterError): the
# leadership changed before it committed, no leader was reachable, or the node refused it.
NOT_APPLIED = ("it was not applied", "No cluster leader was reachable", "too many pending requests")


def log_rows(c, node_id):
    return c.status(node_id)["storage"]["tables"]["log"]["entries"]


def test_learner_killed_under_writes_restarts_to_the_same_state_without_a_log(tmp_path):
    c = Cluster(tmp_path / "c")
    done = threading.Event()
    written = [0] * WRITERS
    retried = [0] * WRITERS
    errors = []

    def put_once(s, url, w, i):
        """One attempt at write i of writer w: "ok", "retry" (known not applied) or "unknown"."""
        try:
            r = s.put(f"{url}/w{w}/{i % 50}.json?print=silent", data=str(i), timeout=15)
        except requests.RequestException:
            return "unknown"
        if r.status_code == 204:
            return "ok"
        if r.status_code == 503 and any(m in r.text for m in NOT_APPLIED):
            return "retry"
        if r.status_code == 503 and "outcome is unknown" in r.text:
            return "unknown"
        errors.append(f"{r.status_code} {r.text}")
        return "failed"

    def landed(s, url, w, i):
        """Whether write i of writer w is in the cluster's state (its key holds i: this writer owns
        the key and wrote i - 50 there before; nothing else writes it); None: no answer."""
        try:
            r = s.get(f"{url}/w{w}/{i % 50}.json?consistency=linearizable", timeout=15)
        except requests.RequestException:
            return None
        return r.json() == i if r.status_code == 200 else None

    def writer(url, w):
        # An election under load (the learner's restart, a slow sync) may refuse or lose writes in
        # flight: a write known not applied is sent again; one of unknown outcome is read
        # (linearizable) until the read answers, and sent again only if it is not there. Sent
        # again, it carries the same value to the same key: should the first attempt still land,
        # the key holds i either way.
        s = requests.Session()
        for i in range(MAX_WRITES_PER_WRITER):
            unknown = False
            for _ in range(MAX_ATTEMPTS_PER_WRITE):
                if done.is_set():
                    return
                if unknown:
                    seen = landed(s, url, w, i)
                    if seen:
                        break
                    if seen is None:
                        done.wait(RETRY_PAUSE_S)
                        continue
                outcome = put_once(s, url, w, i)
                if outcome == "ok":
                    break
                if outcome == "failed":
                    return
                unknown = outcome == "unknown"
                retried[w] += 1
                done.wait(RETRY_PAUSE_S)
            else:
                errors.append(f"writer {w}: write {i} not known applied after {MAX_ATTEMPTS_PER_WRITE} attempts")
                return
            written[w] += 1

    try:
        leader = c.leader()
        n4 = add_node(c, "n4")
        body = {"id": "n4", "address": n4["peerAddress"], "clientURL": n4["url"], "learner": True}
        assert admin(c.url(leader), "POST", "/.ember/members", body).status_code == 200
        all4 = ["n1", "n2", "n3", "n4"]
        wait_converged(c, all4)
        wait_for(lambda: c.status("n4")["role"] == "learner", "n4 to report the learner role")

        threads = [threading.Thread(target=writer, args=(c.url(leader), w), daemon=True) for w in range(WRITERS)]
        for t in threads:
            t.start()
        wait_for(lambda: sum(written) >= 300, "writes flowing to the learner")
        applied = c.status("n4")["appliedIndex"]
        wait_for(lambda: c.status("n4")["appliedIndex"] > applied + 100, "the learner applying under writes")
        # The learner's store holds no log rows; a voter's holds its retained log.
        assert log_rows(c, "n4") == 0
        assert log_rows(c, leader) > 0

        stop(c, "n4")  # SIGKILL, mid-stream
        # Its batches committed without a data sync (--learner-sync-interval-ms): the marker that
        # names this boot is there, so restarted in the same boot it opens (the kernel kept its
        # writes); after another boot it would refuse (LazySyncTests).
        marker = os.path.join(c.dir, "n4", "data", "unsynced-commits")
        with open("/proc/sys/kernel/random/boot_id") as f, open(marker) as m:
            assert m.read().strip() == f.read().strip()
        before = sum(written)
        wait_for(lambda: sum(written) > before + 200, "commits going on without the learner")
        script("start-node", "--dir", c.dir, "--id", "n4")
        wait_for(lambda: c.status("n4")["appliedIndex"] > 0, "n4 back", timeout=30)
        after = sum(written)
        wait_for(lambda: sum(written) > after + 200, "writes after the restart")
        done.set()
        for t in threads:
            t.join(timeout=30)
        assert not errors, errors[:3]
        print(f"writes {written}, attempts sent again {retried}")

        st = wait_converged(c, all4, timeout=60)
        assert st["n4"]["role"] == "learner" and st["n4"]["learners"] == ["n4"]
        # The same state as the voters (status stateHash, compared by wait_converged), the same data.
        assert len({s["stateHash"] for s in st.values()}) == 1
        for w in range(WRITERS):
            assert requests.get(f"{n4['url']}/w{w}.json", timeout=10).json() == \
                requests.get(f"{c.url(leader)}/w{w}.json", timeout=10).json()
        assert log_rows(c, "n4") == 0
        with open(os.path.join(c.dir, "n4.log"), errors="replace") as f:
            assert "storage failure" not in f.read()
    finally:
        done.set()
        c.down()
