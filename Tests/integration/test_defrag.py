"""Online defrag (issue 41) against real emberd processes: `POST /.ember/defrag` and
`ember defrag` rewrite a running node's data file compactly while writes and listeners go on;
kill -9 in the middle leaves a node that restarts on the old or the new file; a filesystem
without room for the copy gets 507 and the bytes needed."""
import json
import os
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from cluster_helpers import Cluster, assert_no_acknowledged_write_lost
from conftest import EMBERD, Node
from test_ops import ember

ADMIN = {"Authorization": "Bearer owner"}


def load_and_thin(url, children=20_000, keep_every=4, ns=None):
    """Indexed children (`scores` has `.indexOn: .value`), then all but one in `keep_every`
    deleted: a file with many free pages."""
    q = f"?ns={ns}&print=silent" if ns else "?print=silent"
    body = {f"c{i:06d}": (i * 7919) % children for i in range(children)}
    requests.put(f"{url}/scores.json{q}", data=json.dumps(body), headers=ADMIN, timeout=120).raise_for_status()
    gone = [f"c{i:06d}" for i in range(children) if i % keep_every]
    for at in range(0, len(gone), 10_000):  # an update has at most 10,000 paths
        requests.patch(f"{url}/scores.json{q}", data=json.dumps({k: None for k in gone[at:at + 10_000]}),
                       headers=ADMIN, timeout=120).raise_for_status()


class Writer(threading.Thread):
    """PUTs /live/kNNNNN = N one after another until stopped; keeps the acknowledged ones."""

    def __init__(self, url_of):
        super().__init__(daemon=True)
        self.url_of, self.acked, self.stop = url_of, {}, threading.Event()

    def run(self):
        s = requests.Session()
        i = 1  # k00000 is the listener's initial data
        while not self.stop.is_set():
            key = f"k{i:05d}"
            try:
                r = s.put(f"{self.url_of()}/live/{key}.json?print=silent", data=str(i), timeout=10)
                if r.status_code == 204:
                    self.acked[key] = i
            except requests.RequestException:
                pass  # a leadership move: not acknowledged, so not expected
            i += 1


class Listener(threading.Thread):
    """An SSE listener on /live: every put/patch event, in order."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.events, self.ready = url, [], threading.Event()

    def run(self):
        try:
            with requests.get(f"{self.url}/live.json", headers={"Accept": "text/event-stream"}, stream=True,
                              timeout=120) as stream:
                event = None
                for line in stream.iter_lines(decode_unicode=True):
                    if line.startswith("event: "):
                        event = line[len("event: "):]
                    elif line.startswith("data: ") and event in ("put", "patch"):
                        self.events.append(json.loads(line[len("data: "):]))
                        self.ready.set()
        except requests.RequestException:
            pass

    def keys_seen(self):
        """Keys of single-child puts after the initial snapshot, in arrival order."""
        return [e["path"].strip("/") for e in self.events[1:] if e["path"] != "/"]

    def wait_for(self, key, timeout=30):
        deadline = time.time() + timeout
        while key not in self.keys_seen():
            assert time.time() < deadline, f"listener never saw {key}"
            time.sleep(0.02)


def check_writes_and_events(acked, listener, marker):
    """Every acknowledged write reached the listener exactly once, in order (`marker` is the
    last key written, after the writer stopped)."""
    listener.wait_for(marker)
    seen = listener.keys_seen()
    assert len(seen) == len(set(seen)), "a listener event was repeated"
    missing = [k for k in acked if k not in seen]
    assert not missing, f"listener lost {len(missing)} events, e.g. {missing[:5]}"
    assert seen == sorted(seen), "listener events out of order"


def data_file(dir_):
    return os.path.getsize(os.path.join(dir_, "data.mdb"))


def test_defrag_under_writes_and_a_listener():
    n = Node().start()
    try:
        load_and_thin(n.url)
        requests.put(f"{n.url}/live/k00000.json", data="0", timeout=10).raise_for_status()
        listener = Listener(n.url)
        listener.start()
        assert listener.ready.wait(10)
        writer = Writer(lambda: n.url)
        writer.start()
        while len(writer.acked) < 20:
            time.sleep(0.01)
        before = data_file(n.data_dir)
        out = json.loads(ember("defrag", "--node", n.url, "--json").stdout)
        mark = len(writer.acked) + 20
        while len(writer.acked) < mark:  # writes go on after the switch
            time.sleep(0.01)
        writer.stop.set()
        writer.join()
        requests.put(f"{n.url}/live/zz.json", data="0", timeout=10).raise_for_status()
        # (writes after the switch may have grown the new file since)
        assert out["bytesBefore"] == before and out["bytesAfter"] <= data_file(n.data_dir) < before * 0.7, out
        assert 0 < out["pauseMs"] < 1000, out
        live = requests.get(f"{n.url}/live.json", timeout=10).json()
        assert all(live.get(k) == v for k, v in writer.acked.items())
        check_writes_and_events(writer.acked, listener, "zz")
        status = requests.get(n.url + "/.ember/status", timeout=10).json()
        assert status["storage"]["lastDefrag"]["bytesAfter"] == out["bytesAfter"]
        metrics = requests.get(n.url + "/metrics", timeout=10).text
        assert f"ember_defrag_last_bytes_after {out['bytesAfter']}" in metrics and "ember_storage_free_pages" in metrics
        h = status["stateHash"]
        # Only an admin may start one, and only with POST.
        assert requests.post(n.url + "/.ember/defrag", timeout=10).status_code == 401
        assert requests.get(n.url + "/.ember/defrag", headers=ADMIN, timeout=10).status_code == 405
    finally:
        n.stop()
    assert n.proc.returncode == 0
    n.start()
    try:
        assert requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"] == h
        assert not [f for f in os.listdir(n.data_dir) if f.startswith(".defrag-")]
    finally:
        n.stop()


def test_kill9_during_a_defrag_restarts_on_a_whole_file():
    n = Node().start()
    try:
        load_and_thin(n.url, children=60_000, keep_every=2)
        h = requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"]
        def start_defrag():
            try:
                requests.post(n.url + "/.ember/defrag", headers=ADMIN, timeout=120)
            except requests.RequestException:
                pass  # killed while it runs: the point of the test

        threading.Thread(target=start_defrag, daemon=True).start()
        copy = os.path.join(n.data_dir, ".defrag-copy", "data.mdb")
        deadline = time.time() + 30
        while not os.path.exists(copy):  # the copy has begun
            assert time.time() < deadline
            time.sleep(0.002)
        n.kill9()
        n.start()
        assert requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"] == h
        assert not os.path.exists(os.path.dirname(copy)), "the cut-short copy was not removed"
        # Killed right after a defrag finished: the new file.
        r = requests.post(n.url + "/.ember/defrag", headers=ADMIN, timeout=120)
        assert r.status_code == 200, r.text
        n.kill9()
        n.start()
        assert requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"] == h
        assert data_file(n.data_dir) == r.json()["bytesAfter"]
    finally:
        n.stop()


def test_refused_with_507_when_the_filesystem_lacks_room():
    mnt = tempfile.mkdtemp(prefix="ember-small-fs-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        n = Node(data_dir=os.path.join(mnt, "d")).start()
        try:
            load_and_thin(n.url, children=20_000, keep_every=1)
            # Fill the rest of the filesystem but ~1 MB: less than the copy needs.
            st = os.statvfs(mnt)
            with open(os.path.join(mnt, "filler"), "wb") as f:
                f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - (1 << 20)))
            h = requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"]
            r = requests.post(n.url + "/.ember/defrag", headers=ADMIN, timeout=60)
            assert r.status_code == 507, r.text
            body = r.json()
            assert body["neededBytes"] > body["availableBytes"] and "needs" in body["error"]
            p = ember("defrag", "--node", n.url, check=False)
            assert p.returncode != 0 and "507" in p.stderr and "needs" in p.stderr
            assert not os.path.exists(os.path.join(n.data_dir, ".defrag-copy"))
            assert requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"] == h
        finally:
            n.stop()
    finally:
        subprocess.run(["umount", mnt])
        os.rmdir(mnt)


def test_cluster_defrag_member_by_member_leader_last(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        load_and_thin(c.url(leader), children=10_000)
        c.wait_converged()
        follower = c.followers()[0]
        requests.put(f"{c.url(leader)}/live/k00000.json", data="0", timeout=10).raise_for_status()
        listener = Listener(c.url(follower))
        listener.start()
        assert listener.ready.wait(10)
        writer = Writer(lambda: c.url(c.leader()))
        writer.start()
        while len(writer.acked) < 20:
            time.sleep(0.01)
        data_dir = {n["id"]: os.path.join(c.dir, n["id"], "data") for n in c.nodes}  # deploy/local-cluster's layout
        files = {i: data_file(d) for i, d in data_dir.items()}
        # The leader as the CLI finds it: on a loaded machine an election may have moved it
        # during the load (the first `leader` only picked where to load and listen).
        leader = c.leader()
        p = ember("defrag", "--cluster", "--node", c.url(follower), "--json", timeout=300)
        reports = [json.loads(line) for line in p.stdout.splitlines()]
        assert [r["node"] for r in reports][-1] == c.url(leader), "the leader goes last"
        assert len(reports) == 3 and len({r["node"] for r in reports}) == 3
        assert c.leader() != leader, "leadership moved before the leader's defrag"
        mark = len(writer.acked) + 20
        while len(writer.acked) < mark:
            time.sleep(0.01)
        writer.stop.set()
        writer.join()
        requests.put(f"{c.url(c.leader())}/live/zz.json", data="0", timeout=10).raise_for_status()
        c.wait_converged()
        assert_no_acknowledged_write_lost({n["id"]: n["url"] for n in c.nodes}, "live", writer.acked)
        check_writes_and_events(writer.acked, listener, "zz")
        for r in reports:
            assert r["bytesAfter"] < r["bytesBefore"], r
        for n in c.nodes:
            assert c.status(n["id"])["storage"]["lastDefrag"] is not None
        for n in c.nodes:
            assert data_file(data_dir[n["id"]]) < files[n["id"]], "a member's file did not shrink"
    finally:
        c.down()


def test_auto_defrag_runs_after_a_quiet_window():
    n = Node(extra_args=["--auto-defrag", "0.2,0,1s"]).start()
    try:
        load_and_thin(n.url, children=10_000)
        before = data_file(n.data_dir)
        deadline = time.time() + 30  # checked every 5 s once 1 s passed without a write
        while (last := requests.get(n.url + "/.ember/status", timeout=10).json()["storage"]["lastDefrag"]) is None:
            assert time.time() < deadline, "no automatic defrag"
            time.sleep(0.2)
        assert last["bytesBefore"] == before and last["bytesAfter"] < before * 0.7
        assert data_file(n.data_dir) == last["bytesAfter"]
    finally:
        n.stop()
    p = subprocess.run([EMBERD, "--data", n.data_dir, "--auto-defrag", "2,1M,1s", "--check-config"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--auto-defrag" in p.stderr
