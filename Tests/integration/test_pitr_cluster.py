"""Point-in-time archive in a 3-node cluster (issue 37): only the leader writes; kill -9 of the
leader while it archives leaves no gap and no duplicate, and the new leader continues from the
replicated position. Every member mounts the same archive directory."""
import json
import threading
import time

import requests

from cluster_helpers import Cluster
from conftest import wait_for
from test_pitr import ember, ls, restore


def test_kill9_of_the_archiving_leader_leaves_no_gap_and_no_duplicate(tmp_path):
    archive = str(tmp_path / "archive")
    c = Cluster(tmp_path / "c", extra=("--archive", archive, "--archive-segment-age", "0.2s", "--archive-base-every", "1h"))
    try:
        leader = c.leader()
        wait_for("the leader archives", lambda: c.status(leader)["archive"]["active"])
        followers = [n["id"] for n in c.nodes if n["id"] != leader]
        assert not any(c.status(f)["archive"]["active"] for f in followers), "a follower must never write the archive"
        acked = {}
        stop = threading.Event()

        def writer(node_ids):
            i = 0
            while not stop.is_set():
                for nid in node_ids:
                    try:
                        r = requests.put(f"{c.url(nid)}/w/k{i}.json", data=str(i), timeout=5)
                        if r.status_code == 200:
                            acked[f"k{i}"] = i
                    except requests.RequestException:
                        pass
                    i += 1
        t = threading.Thread(target=writer, args=(followers,))
        t.start()
        wait_for("segments written", lambda: len(ls(archive)["segments"]) >= 3 and len(acked) > 50)
        c.kill9(leader)
        new = c.leader(among=followers, timeout=30)
        wait_for("the new leader archives", lambda: c.status(new)["archive"]["active"])
        wait_for("more writes", lambda: len(acked) > 200)
        stop.set()
        t.join()
        wait_for("archive caught up", lambda: (lambda a: a["lagEntries"] == 0 and a["lastError"] is None)(c.status(new)["archive"]))
        listing = ls(archive)
        assert listing["gaps"] == []
        segs = listing["segments"]
        assert all(b["first"] == a["last"] + 1 for a, b in zip(segs, segs[1:])), "no gap and no duplicate"
        assert ember("archive", "verify", archive).returncode == 0
        # The end of the archive is the live state: every acknowledged write, the same hash.
        live = wait_for("converged", lambda: (lambda st: st if len({s["stateHash"] for s in st}) == 1 else None)(
            [c.status(f) for f in followers]))
        data, p = restore(archive, "--to-index", str(segs[-1]["last"]))
        out = json.loads(p.stdout)
        assert out["hashVerified"] is True
        assert out["stateHash"] == live[0]["stateHash"]
    finally:
        c.down()


def test_a_partitioned_leader_leaves_no_gap_and_no_duplicate(tmp_path):
    from test_partition import ProxiedCluster, put
    archive = str(tmp_path / "archive")
    c = ProxiedCluster(tmp_path / "p", extra=["--archive", archive, "--archive-segment-age", "0.2s", "--archive-base-every", "1h"])
    try:
        old = c.leader()
        wait_for("the leader archives", lambda: c.status(old)["archive"]["active"])
        acked = {}
        n = iter(range(10**6))

        def written_and_archived():
            i = next(n)
            assert put(c.url(old), f"a{i}", i, acked) == 204
            return len(ls(archive)["segments"]) >= 2
        wait_for("segments written", written_and_archived)
        c.isolate(old, "blackhole")
        majority = [i for i in c.ids if i != old]
        new = c.leader(among=majority)
        wait_for("the new leader archives", lambda: c.status(new)["archive"]["active"])
        for i in range(30):
            assert put(c.url(majority[i % 2]), f"b{i}", i, acked) == 204
        wait_for("the isolated leader steps down", lambda: c.status(old)["role"] != "leader")
        c.heal()
        live = c.wait_converged()
        leader = c.leader()
        wait_for("archive caught up", lambda: (lambda a: a["active"] and a["lagEntries"] == 0 and a["lastError"] is None)(
            c.status(leader)["archive"]))
        wait_for("only the leader archives", lambda: [i for i in c.ids if c.status(i)["archive"]["active"]] == [leader])
        listing = ls(archive)
        segs = listing["segments"]
        assert listing["gaps"] == [] and all(b["first"] == a["last"] + 1 for a, b in zip(segs, segs[1:])), segs
        assert ember("archive", "verify", archive).returncode == 0
        data, p = restore(archive, "--to-index", str(segs[-1]["last"]))
        out = json.loads(p.stdout)
        assert out["hashVerified"] is True and out["stateHash"] == live[0]["stateHash"]
    finally:
        c.down()
