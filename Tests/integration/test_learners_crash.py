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


def log_rows(c, node_id):
    return c.status(node_id)["storage"]["tables"]["log"]["entries"]


def test_learner_killed_under_writes_restarts_to_the_same_state_without_a_log(tmp_path):
    c = Cluster(tmp_path / "c")
    done = threading.Event()
    written = [0] * WRITERS
    errors = []

    def writer(url, w):
        s = requests.Session()
        for i in range(MAX_WRITES_PER_WRITER):
            if done.is_set():
                return
            r = s.put(f"{url}/w{w}/{i % 50}.json?print=silent", data=str(i), timeout=15)
            if r.status_code != 204:
                errors.append(r.text)
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
