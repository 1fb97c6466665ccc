"""A full disk (issue 40 item 5) against real emberd processes: the LMDB map full
(--max-db-size reached) and the filesystem full (a small tmpfs; root only), on a single node,
on a follower and on the leader of a 3-node cluster.

Ember's promise: writes fail with a clear error (REST 507 with {"error": "NOSPACE: ..."}, wire
`insufficient_storage`) before they reach the log, nothing acknowledged is lost, reads and
listeners go on, the NOSPACE alarm is raised (status, /metrics, log), writes resume by
themselves once space is freed (or after a bigger --max-db-size and a restart), and a follower
with a full disk neither stops the majority from committing nor stays behind once space returns.
"""
import json
import os
import threading

import pytest
import requests

from cluster_helpers import Cluster
from conftest import Node, wait_for
from fault_helpers import (Tmpfs, alarms, data_dir, metric, move_to_tmpfs, require_root, start_node, stop_node,
                           wire)

NS = "disk"
VALUE = "v" * 60_000  # large writes fill a small map or filesystem in a few dozen steps
MAX_FILL_WRITES = 400  # a node that never refuses within this many writes fails the test
FS_SIZE = "48m"
LEAVE = 4 << 20  # bytes left free on a filled tmpfs: below the 8 MiB reserve of a default map
MiB = 1 << 20


def put(url, key, value=VALUE):
    return requests.put(f"{url}/fill/{key}.json?ns={NS}", data=json.dumps(value), timeout=30)


def fill_until_refused(url, acked, prefix):
    """PUTs until the node answers 507; returns that answer. Acknowledged writes go to `acked`."""
    for i in range(MAX_FILL_WRITES):
        key = f"{prefix}{i:04d}"
        r = put(url, key)
        if r.status_code == 507:
            return r
        assert r.status_code == 200, r.text
        acked[key] = VALUE
    raise AssertionError(f"{url} took {MAX_FILL_WRITES} writes of {len(VALUE)} bytes without a 507")


def assert_refuses_writes(url):
    r = put(url, "refused")
    assert r.status_code == 507, r.text
    assert r.json()["error"].startswith("NOSPACE: "), r.text
    body = wire(url, NS, "p", {"p": "/fill/refusedWire", "d": 1})
    assert body["s"] == "insufficient_storage" and "NOSPACE" in body["d"], body


def assert_serves_reads(url, acked):
    keys = requests.get(f"{url}/fill.json?ns={NS}&shallow=true", timeout=30).json() or {}
    assert set(acked) <= set(keys), sorted(set(acked) - set(keys))[:5]
    some = sorted(acked)[-1]
    assert requests.get(f"{url}/fill/{some}.json?ns={NS}", timeout=30).json() == VALUE
    r = requests.get(f"{url}/fill/{some}.json?ns={NS}", headers={"Accept": "text/event-stream"}, stream=True, timeout=30)
    try:
        assert r.status_code == 200
        assert next(line for line in r.iter_lines() if line) == b"event: put"
    finally:
        r.close()


def assert_nospace_alarm(url, status):
    assert "NOSPACE" in alarms(status), status.get("alarms")
    assert metric(url, 'ember_alarm{alarm="NOSPACE"}') == 1


class Listener(threading.Thread):
    """An SSE stream on /fill: the keys its events have shown so far."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.keys, self.ready, self.closed = url, set(), threading.Event(), threading.Event()
        self.response = None

    def run(self):
        self.response = requests.get(f"{self.url}/fill.json?ns={NS}", headers={"Accept": "text/event-stream"},
                                     stream=True, timeout=300)
        try:
            self.read()
        except (requests.RequestException, AttributeError, OSError):
            if not self.closed.is_set():
                raise

    def read(self):
        event = None
        for line in self.response.iter_lines():
            line = line.decode()
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event in ("put", "patch"):
                d = json.loads(line[6:])
                if d["path"] == "/":
                    if event == "put":
                        self.keys = set((d["data"] or {}).keys())
                    else:
                        self.keys |= set((d["data"] or {}).keys())
                    self.ready.set()
                else:
                    self.keys.add(d["path"].strip("/").split("/")[0])

    def close(self):
        self.closed.set()
        if self.response is not None:
            self.response.close()


# MARK: - Single node


def test_single_node_map_full_refuses_writes_and_resumes_with_a_bigger_map(tmp_path):
    n = Node(data_dir=str(tmp_path / "d"), extra_args=["--max-db-size", "4MiB"]).start()
    acked = {}
    try:
        refused = fill_until_refused(n.url, acked, "k")
        assert refused.json()["error"].startswith("NOSPACE: "), refused.text
        st = requests.get(n.url + "/.ember/status", timeout=5).json()
        assert_nospace_alarm(n.url, st)
        assert "--max-db-size" in next(a for a in st["alarms"] if a["alarm"] == "NOSPACE")["message"]
        assert_refuses_writes(n.url)
        assert_serves_reads(n.url, acked)
        with open(n.data_dir + ".log", errors="replace") as f:
            assert any("alarm raised" in line and "NOSPACE" in line for line in f)
    finally:
        n.stop()
    # OPERATIONS.md: a bigger --max-db-size and a restart.
    n = Node(data_dir=str(tmp_path / "d"), extra_args=["--max-db-size", "64MiB"]).start()
    try:
        assert put(n.url, "after").status_code == 200
        acked["after"] = VALUE
        assert alarms(requests.get(n.url + "/.ember/status", timeout=5).json()) == set()
        assert_serves_reads(n.url, acked)
    finally:
        n.stop()


def test_single_node_filesystem_full_refuses_writes_and_resumes_when_space_is_freed(tmp_path):
    require_root("a full filesystem")
    fs = Tmpfs(str(tmp_path / "mnt"), FS_SIZE)
    n = None
    try:
        n = Node(data_dir=os.path.join(fs.path, "data")).start()
        acked = {}
        for i in range(5):
            assert put(n.url, f"a{i}").status_code == 200
            acked[f"a{i}"] = VALUE
        listener = Listener(n.url)
        listener.start()
        assert listener.ready.wait(30)
        fs.fill(LEAVE)
        refused = fill_until_refused(n.url, acked, "b")  # the guard measures every 250 ms
        assert "filesystem" in refused.json()["error"], refused.text
        assert_nospace_alarm(n.url, requests.get(n.url + "/.ember/status", timeout=5).json())
        assert_refuses_writes(n.url)
        assert_serves_reads(n.url, acked)
        fs.unfill()
        # Writes resume by themselves: no restart.
        wait_for("a write after space was freed", lambda: put(n.url, "after").status_code == 200)
        acked["after"] = VALUE
        wait_for("NOSPACE cleared", lambda: alarms(requests.get(n.url + "/.ember/status", timeout=5).json()) == set())
        assert_serves_reads(n.url, acked)
        wait_for("the listener saw every acknowledged write", lambda: set(acked) <= listener.keys)
        listener.close()
    finally:
        if n:
            n.stop()
        fs.close()


# MARK: - Cluster


def assert_every_node_holds(c, acked):
    for n in c.nodes:
        keys = set(requests.get(f"{n['url']}/fill.json?ns={NS}&shallow=true", timeout=30).json() or {})
        assert set(acked) <= keys, f"{n['id']} lost acknowledged writes: {sorted(set(acked) - keys)[:5]}"


def map_room_flags(c, node_id, room):
    """--max-db-size for a stopped member: its data file's size plus `room` bytes."""
    size = os.path.getsize(os.path.join(data_dir(c, node_id), "data.mdb"))
    return ["--max-db-size", f"{(size + room) // 1024}KiB"]


@pytest.mark.parametrize("kind", ["filesystem", "map"])
def test_cluster_follower_then_leader_with_a_full_disk(tmp_path, kind):
    if kind == "filesystem":
        require_root("a full filesystem")
    c = Cluster(tmp_path / "c")
    fs = None
    acked = {}
    try:
        leader = c.leader()
        full, other = c.followers()
        for i in range(3):
            assert put(c.url(leader), f"a{i}").status_code == 200
            acked[f"a{i}"] = VALUE
        c.wait_converged()

        # A follower's disk fills up.
        if kind == "filesystem":
            fs = move_to_tmpfs(c, full, str(tmp_path / "mnt"), FS_SIZE)
        else:
            stop_node(c, full)
            start_node(c, full, extra=map_room_flags(c, full, 3 * MiB))
        leader = c.leader()
        listener = Listener(c.url(full))
        listener.start()
        assert listener.ready.wait(30)
        if kind == "filesystem":
            fs.fill(LEAVE)
        # The majority commits throughout (the leader and the other follower).
        i = 0
        while "NOSPACE" not in alarms(c.status(full)):
            assert i < MAX_FILL_WRITES, f"{full} never raised NOSPACE"
            key = f"f{i:04d}"
            r = put(c.url(leader), key)
            assert r.status_code == 200, r.text
            acked[key] = VALUE
            i += 1
        for j in range(10):
            assert put(c.url(leader), f"g{j}").status_code == 200
            acked[f"g{j}"] = VALUE
        wait_for(f"{other} holds every acknowledged write",
                 lambda: set(acked) <= set(requests.get(f"{c.url(other)}/fill.json?ns={NS}&shallow=true", timeout=30).json()))
        assert_nospace_alarm(c.url(full), c.status(full))
        assert_refuses_writes(c.url(full))
        keys_on_full = set(requests.get(f"{c.url(full)}/fill.json?ns={NS}&shallow=true", timeout=30).json())
        assert_serves_reads(c.url(full), {k: v for k, v in acked.items() if k in keys_on_full})
        assert c.status(full)["role"] == "follower" and alarms(c.status(leader)) == set()

        # Space returns: the follower catches up by itself (filesystem) or after a restart with
        # a bigger map (OPERATIONS.md); its listener saw every acknowledged write.
        if kind == "filesystem":
            fs.unfill()
        else:
            listener.close()
            stop_node(c, full)
            start_node(c, full, extra=map_room_flags(c, full, 12 * MiB))
            listener = Listener(c.url(full))
            listener.start()
            assert listener.ready.wait(30)
        c.wait_converged(timeout=60)
        wait_for("NOSPACE cleared on the follower", lambda: alarms(c.status(full)) == set())
        wait_for("the follower's listener saw every acknowledged write", lambda: set(acked) <= listener.keys)
        listener.close()
        assert_every_node_holds(c, acked)

        # The same node leads, and its disk fills up: every member refuses writes (a follower
        # forwards them to the leader, which refuses them), reads go on everywhere.
        requests.post(c.url(leader) + "/.ember/leader/transfer", json={"to": full},
                      headers={"Authorization": "Bearer owner"}, timeout=30).raise_for_status()
        assert c.leader() == full
        if kind == "filesystem":
            fs.fill(LEAVE)
            wait_for("NOSPACE on the leader", lambda: "NOSPACE" in alarms(c.status(full)))
        else:
            fill_until_refused(c.url(full), acked, "h")
        assert_nospace_alarm(c.url(full), c.status(full))
        for n in (full, other):
            assert_refuses_writes(c.url(n))
            assert_serves_reads(c.url(n), acked)
        assert c.leader() == full  # still leading: it persists what it must within the reserve

        # Space returns: writes resume (by themselves on the filesystem; after a restart with a
        # bigger map, under a new leader, for the map).
        if kind == "filesystem":
            fs.unfill()
        else:
            stop_node(c, full)
            start_node(c, full, extra=["--max-db-size", "256MiB"])
        wait_for("writes resume", lambda: put(c.url(other), "after").status_code == 200)
        acked["after"] = VALUE
        c.wait_converged(timeout=60)
        wait_for("NOSPACE cleared", lambda: all(alarms(c.status(n["id"])) == set() for n in c.nodes))
        assert_every_node_holds(c, acked)
    finally:
        c.down()
        if fs:
            fs.close()


def test_a_leader_whose_admitted_write_outgrows_the_reserve_waits_instead_of_stopping(tmp_path):
    """A write admitted with room above the reserve can still need more room than is left (one
    7 MiB value: its log entry and its tree record, against 12 MiB of map). Before 0.5.1 the Raft
    host stopped the node on that failed append; now the Raft loop waits for room and retries
    (NOSPACE up), the others elect a leader and go on, and after a restart with a bigger map the
    member catches up and the cluster agrees again."""
    c = Cluster(tmp_path / "c")
    acked = {}
    try:
        leader = c.leader()
        assert put(c.url(leader), "a0").status_code == 200
        acked["a0"] = VALUE
        c.wait_converged()
        small = c.followers()[0]
        stop_node(c, small)
        start_node(c, small, extra=map_room_flags(c, small, 12 * MiB))
        c.wait_converged()
        requests.post(c.url(leader) + "/.ember/leader/transfer", json={"to": small},
                      headers={"Authorization": "Bearer owner"}, timeout=30).raise_for_status()
        assert c.leader() == small
        pid = c.pid(small)
        assert alarms(c.status(small)) == set()

        big = "b" * (7 * MiB)
        answers = []

        def write_big():
            try:
                answers.append(put(c.url(small), "big", big).status_code)
            except requests.RequestException as e:
                answers.append(type(e).__name__)
        t = threading.Thread(target=write_big, daemon=True)
        t.start()

        # The member stays up with NOSPACE raised; the other two elect a leader and commit.
        wait_for("NOSPACE on the member whose append failed", lambda: "NOSPACE" in alarms(c.status(small)), timeout=60)
        others = [n["id"] for n in c.nodes if n["id"] != small]
        new_leader = c.leader(among=others, timeout=60)
        wait_for("writes commit without the stalled member",
                 lambda: put(c.url(new_leader), "after1").status_code == 200, timeout=60)
        acked["after1"] = VALUE
        assert lc_alive(pid), "the member stopped"
        with open(os.path.join(c.dir, f"{small}.log"), errors="replace") as f:
            log = f.read()
        assert "storage out of room; the Raft loop waits for space and retries" in log
        assert "storage failure; stopping" not in log

        # OPERATIONS.md: a bigger --max-db-size and a restart; it catches up and agrees.
        stop_node(c, small)
        t.join(60)
        assert answers and answers[0] != 200, answers  # never acknowledged by the stalled member
        start_node(c, small, extra=["--max-db-size", "256MiB"])
        c.wait_converged(timeout=90)
        wait_for("NOSPACE cleared", lambda: alarms(c.status(small)) == set())
        assert_every_node_holds(c, acked)
        # The 7 MiB write is on every member or on none (it may have committed on the other two).
        held = {requests.get(f"{n['url']}/fill/big.json?ns={NS}", timeout=60).json() == big for n in c.nodes}
        assert len(held) == 1, held
    finally:
        c.down()


def lc_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
