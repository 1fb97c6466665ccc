"""Point-in-time archive in a 3-node cluster (issue 37): only the leader writes; kill -9 of the
leader while it archives leaves no gap and no duplicate, and the new leader continues from the
replicated position. Every member mounts the same archive directory."""
import json
import threading
import time

import requests

from cluster_helpers import Cluster
from conftest import Node, wait_for
from test_pitr import ember, ls, restore


class Writer:
    """PUTs /w/k{i} round the given nodes from a thread until stopped; `acked` holds every write a
    node acknowledged (refused and failed ones are left out: the node may be down or deposed)."""

    def __init__(self, urls):
        self.urls, self.acked, self.stop = urls, {}, threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                r = requests.put(f"{self.urls[i % len(self.urls)]}/w/k{i}.json", data=str(i), timeout=5)
                if r.status_code == 200:
                    self.acked[f"k{i}"] = i
            except requests.RequestException:
                pass
            i += 1

    def join(self):
        self.stop.set()
        self.thread.join()


def test_kill9_of_the_archiving_leader_leaves_no_gap_and_no_duplicate(tmp_path):
    archive = str(tmp_path / "archive")
    c = Cluster(tmp_path / "c", extra=("--archive", archive, "--archive-segment-age", "0.2s", "--archive-base-every", "1h"))
    try:
        leader = c.leader()
        wait_for("the leader archives", lambda: c.status(leader)["archive"]["active"])
        followers = [n["id"] for n in c.nodes if n["id"] != leader]
        assert not any(c.status(f)["archive"]["active"] for f in followers), "a follower must never write the archive"
        w = Writer([c.url(f) for f in followers])
        acked = w.acked
        wait_for("segments written", lambda: len(ls(archive)["segments"]) >= 3 and len(acked) > 50)
        c.kill9(leader)
        new = c.leader(among=followers, timeout=30)
        wait_for("the new leader archives", lambda: c.status(new)["archive"]["active"])
        wait_for("more writes", lambda: len(acked) > 200)
        w.join()
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


def test_the_archiving_leader_removed_and_re_added_leaves_no_gap_and_no_duplicate(tmp_path):
    """The leader that writes the archive is removed from the cluster while writes go on (it hands
    leadership over; the new leader continues the archive), then re-added with its old data and
    made the leader again: it resumes from the replicated position, after what the others stored."""
    archive = str(tmp_path / "archive")
    c = Cluster(tmp_path / "c", extra=("--archive", archive, "--archive-segment-age", "0.2s", "--archive-base-every", "1h"))
    owner = {"Authorization": "Bearer owner"}
    try:
        old = c.leader()
        wait_for("the leader archives", lambda: c.status(old)["archive"]["active"])
        member = c.status(old)["members"][old]
        stay = [n["id"] for n in c.nodes if n["id"] != old]
        w = Writer([c.url(n) for n in stay])
        acked = w.acked
        try:
            wait_for("segments written", lambda: len(ls(archive)["segments"]) >= 2 and len(acked) > 30)
            # Removed (asked of a node that stays: forwarded to the leader, which steps aside first).
            r = requests.delete(f"{c.url(stay[0])}/.ember/members/{old}", headers=owner, timeout=30)
            assert r.status_code == 200, r.text
            new = c.leader(among=stay, timeout=30)
            wait_for("the new leader archives", lambda: c.status(new)["archive"]["active"])
            wait_for("the removed member knows it", lambda: c.status(old)["member"] is False)
            assert not c.status(old)["archive"]["active"], "a removed member must not write the archive"
            segments_before = len(ls(archive)["segments"])
            wait_for("the new leader stores segments", lambda: len(ls(archive)["segments"]) >= segments_before + 2)
            # Re-added with the data it had: it catches up, then leads (and archives) again.
            r = requests.post(f"{c.url(stay[0])}/.ember/members", headers=owner, timeout=30,
                              json={"id": old, "address": member["peer"], "clientURL": c.url(old)})
            assert r.status_code == 200, r.text
            wait_for("the re-added member is a member again", lambda: c.status(old)["member"] is True, timeout=30)
            wait_for("the re-added member caught up", lambda: c.status(old)["appliedIndex"] >= c.status(new)["appliedIndex"], timeout=30)
            r = requests.post(f"{c.url(new)}/.ember/leader/transfer", headers=owner, json={"to": old}, timeout=30)
            assert r.status_code == 200 and r.json()["leader"] == old, r.text
            wait_for("the re-added member archives", lambda: c.status(old)["archive"]["active"])
            segments_before = len(ls(archive)["segments"])
            wait_for("it stores segments again", lambda: len(ls(archive)["segments"]) >= segments_before + 2)
        finally:
            w.join()
        ids = [n["id"] for n in c.nodes]
        wait_for("archive caught up", lambda: (lambda a: a["active"] and a["lagEntries"] == 0 and a["lastError"] is None)(
            c.status(old)["archive"]))
        wait_for("only the leader archives", lambda: [i for i in ids if c.status(i)["archive"]["active"]] == [old])
        live = c.wait_converged()
        listing = ls(archive)
        segs = listing["segments"]
        ranges = [(s["first"], s["last"]) for s in segs]
        assert listing["gaps"] == [] and all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:])), ranges
        v = json.loads(ember("archive", "verify", "--json", archive).stdout)
        assert v["ok"] and v["problems"] == [], v
        # From the first base across all three writers' segments: the live state, every acknowledged write.
        data, p = restore(archive, "--to-index", str(segs[-1]["last"]))
        out = json.loads(p.stdout)
        assert out["hashVerified"] is True and out["stateHash"] == live[0]["stateHash"]
        n = Node(data_dir=data).start()
        try:
            got = requests.get(f"{n.url}/w.json", timeout=10).json()
        finally:
            n.stop()
        assert all(got.get(k) == v for k, v in acked.items())
    finally:
        c.down()
