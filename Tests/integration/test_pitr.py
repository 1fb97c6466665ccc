"""Point-in-time recovery (issue 37): `emberd --archive DIR` writes committed entries and base
snapshots; `ember restore --archive DIR --to TIME | --to-index N` rebuilds the state of any
instant of the window. Real processes, a real archive directory, restored data directories
served by real nodes and compared with the state each instant had.
"""
import asyncio
import json
import math
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from conftest import EMBERD, Node, wait_for
from wire import WireClient

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
SEED = int(os.environ.get("EMBER_PITR_SEED", "37"))
# Random instants restored and served by a node (the long target raises it).
INSTANTS = int(os.environ.get("EMBER_PITR_INSTANTS", "20" if os.environ.get("EMBER_SOAK") else "5"))
FAST = ["--archive-segment-age", "0.3s", "--archive-base-every", "1h"]


def ember(*args, check=True):
    p = subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, f"ember {' '.join(args)}: {p.returncode} {p.stdout} {p.stderr}"
    return p


def rfc3339(ms):
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000))
    return f"{s}.{ms % 1000:03d}Z"


def now_ms():
    return time.time() * 1000


def archive_status(url):
    return requests.get(url + "/.ember/status", timeout=5).json()["archive"]


def wait_archived(url):
    """Everything applied is in the archive (a trailing mark alone is not lag)."""
    return wait_for("archive caught up", lambda: (lambda a: a["active"] and a["lagEntries"] == 0 and a["lastSegment"])(archive_status(url)))


def ls(archive):
    return json.loads(ember("archive", "ls", "--json", archive).stdout)


def restore(archive, *target, check=True):
    data = tempfile.mkdtemp(prefix="ember-pitr-restore-")
    shutil.rmtree(data)
    p = ember("restore", "--archive", archive, *target, "--data", data, "--json", check=check)
    return data, p


def served(data, ns):
    """The namespace as a node started on the restored directory serves it."""
    n = Node(data_dir=data).start()
    try:
        return requests.get(f"{n.url}/.json?ns={ns}", timeout=10).json()
    finally:
        n.stop()


class History:
    """Writes of every kind through REST, each bracketed by the client's clock, and the state
    after each as the live node serves it (server values resolved there) checked against a model."""

    def __init__(self, url, ns, rng):
        self.url, self.ns, self.rng = url, ns, rng
        self.model = {}
        self.steps = []  # (before ms, after ms, state after)
        self.kinds = set()

    def req(self, method, path, body=None, headers=None):
        r = requests.request(method, f"{self.url}/{path}.json?ns={self.ns}", data=None if body is None else json.dumps(body),
                             headers=headers or {}, timeout=10)
        assert r.status_code == 200, r.text
        return r

    def state(self):
        return requests.get(f"{self.url}/.json?ns={self.ns}", timeout=10).json()

    def one(self, i):
        kind = self.rng.choice(["set", "update", "transaction", "increment", "timestamp", "delete", "set", "update", "ondisconnect"])
        self.kinds.add(kind)
        before = now_ms()
        if kind == "set":
            k, v = f"k{self.rng.randrange(8)}", {"n": i, "s": "x" * self.rng.randrange(5)}
            self.req("PUT", f"items/{k}", v)
            self.model.setdefault("items", {})[k] = v
        elif kind == "update":
            parts = {f"k{self.rng.randrange(8)}/n": i, f"u{i % 3}": i}
            self.req("PATCH", "items", parts)
            items = self.model.setdefault("items", {})
            for p, v in parts.items():
                if "/" in p:
                    a, b = p.split("/")
                    items[a] = items.get(a) if isinstance(items.get(a), dict) else {}
                    items[a][b] = v
                else:
                    items[p] = v
        elif kind == "transaction":
            # A REST transaction: read with the ETag, write if it still matches.
            r = requests.get(f"{self.url}/counter.json?ns={self.ns}", headers={"X-Firebase-ETag": "true"}, timeout=10)
            cur = r.json() or 0
            self.req("PUT", "counter", cur + 10, headers={"if-match": r.headers["ETag"]})
            self.model["counter"] = cur + 10
        elif kind == "increment":
            self.req("PUT", "inc", {".sv": {"increment": 3}})
            self.model["inc"] = self.model.get("inc", 0) + 3
        elif kind == "timestamp":
            self.req("PUT", "ts", {".sv": "timestamp"})
            self.model["ts"] = None  # the server's time: taken from the node below
        elif kind == "ondisconnect":
            # A wire client registers onDisconnect writes and goes: the node runs them.
            asyncio.run(self.ondisconnect(i))
            self.model.setdefault("od", {})[f"c{i}"] = i
            self.model["odruns"] = self.model.get("odruns", 0) + 1
            wait_for("onDisconnect ran", lambda: (requests.get(f"{self.url}/od/c{i}.json?ns={self.ns}", timeout=5).json() == i
                                                  and requests.get(f"{self.url}/odruns.json?ns={self.ns}", timeout=5).json() == self.model["odruns"]))
        elif kind == "delete":
            k = f"k{self.rng.randrange(8)}"
            self.req("DELETE", f"items/{k}")
            self.model.get("items", {}).pop(k, None)
            if self.model.get("items") == {}:
                del self.model["items"]
        after = now_ms()
        state = self.state() or {}
        if kind == "timestamp":
            # The write's time: within the client's bracket (same machine clock, ms).
            assert math.floor(before) <= state["ts"] <= math.ceil(after)
            self.model["ts"] = state["ts"]
        assert state == self.model, (kind, state, self.model)
        self.steps.append((before, after, json.loads(json.dumps(self.model)) or None))
        time.sleep(0.012)  # separate instants: each write's time is known to lie in [before, after]

    async def ondisconnect(self, i):
        c = await WireClient.connect(self.url, self.ns)
        for action, body in [("o", {"p": f"od/c{i}", "d": i}), ("o", {"p": "odruns", "d": {".sv": {"increment": 1}}})]:
            _, r = await c.request(action, body)
            assert r["s"] == "ok", r
        await c.close()

    def rules(self, text):
        before = now_ms()
        r = requests.put(f"{self.url}/.settings/rules.json?ns={self.ns}", data=text, headers={"Authorization": "Bearer owner"}, timeout=10)
        assert r.status_code == 200, r.text
        after = now_ms()
        self.steps.append((before, after, json.loads(json.dumps(self.model)) or None))
        time.sleep(0.012)


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """A single node (the default deployment) archiving a history of every kind of write."""
    base = tmp_path_factory.mktemp("pitr")
    archive = str(base / "archive")
    n = Node(data_dir=str(base / "data"), extra_args=["--archive", archive, *FAST]).start()
    ns = "pitr"
    h = History(n.url, ns, random.Random(SEED))
    wait_for("first base", lambda: archive_status(n.url)["lastBase"])
    for i in range(60):
        h.one(i)
        if i == 30:
            h.rules('{"rules": {".read": true, ".write": true, "items": {".indexOn": ["n"]}}}')
    wait_archived(n.url)
    assert h.kinds == {"set", "update", "transaction", "increment", "timestamp", "delete", "ondisconnect"}, h.kinds
    yield n, archive, ns, h
    n.stop()
    assert n.proc.returncode == 0


def test_status_and_metrics_show_the_archive(archived):
    n, archive, _, _ = archived
    a = archive_status(n.url)
    assert a["active"] and a["lagEntries"] == 0 and a["gaps"] == [] and a["lastError"] is None
    assert a["lastBase"].startswith("base-") and a["lastSegment"].startswith("seg-") and a["windowStart"]
    m = requests.get(n.url + "/metrics", timeout=5).text
    for name in ["ember_archive_active 1", "ember_archive_lag_entries 0", "ember_archive_archived_index ",
                 "ember_archive_last_segment_timestamp_seconds ", "ember_archive_window_start_timestamp_seconds "]:
        assert name in m
    # The archiver thread has stored a base and segments by now: its CPU counter moved.
    cpu = [l for l in m.splitlines() if l.startswith("ember_archive_cpu_seconds_total ")]
    assert len(cpu) == 1 and float(cpu[0].split()[1]) > 0
    out = ember("status", "--node", n.url).stdout
    assert f"archive {archive}: through index" in out


def test_ls_and_verify_show_one_continuous_window(archived):
    _, archive, _, h = archived
    listing = ls(archive)
    assert listing["gaps"] == [] and listing["bases"] and len(listing["segments"]) >= 2
    firsts = [s["first"] for s in listing["segments"]]
    lasts = [s["last"] for s in listing["segments"]]
    assert firsts[0] == listing["bases"][0]["first"] + 1
    assert all(b == a + 1 for a, b in zip(lasts, firsts[1:])), "segments must neither gap nor overlap"
    v = json.loads(ember("archive", "verify", "--json", archive).stdout)
    assert v["ok"] and v["problems"] == [] and v["checked"] == len(listing["segments"]) + len(listing["bases"])
    assert ember("archive", "ls", archive).stdout.startswith("recoverable: ")


def test_restore_to_every_segment_end_reproduces_the_recorded_hash(archived):
    _, archive, _, _ = archived
    for s in ls(archive)["segments"]:
        data, p = restore(archive, "--to-index", str(s["last"]))
        out = json.loads(p.stdout)
        assert out["index"] == s["last"] and out["hashVerified"] is True and out["stateHash"] == s["stateHash"], out
        shutil.rmtree(data)


def test_restore_to_random_instants_equals_the_state_then(archived):
    _, archive, ns, h = archived
    rng = random.Random(SEED + 1)
    # Instants strictly between two writes' brackets: the state there is the earlier one's.
    gaps = [i for i in range(len(h.steps) - 1) if math.floor(h.steps[i + 1][0]) - math.ceil(h.steps[i][1]) >= 2]
    for i in rng.sample(gaps, min(INSTANTS, len(gaps))):
        at = math.ceil(h.steps[i][1]) + (math.floor(h.steps[i + 1][0]) - math.ceil(h.steps[i][1])) // 2
        data, p = restore(archive, "--to", rfc3339(at))
        out = json.loads(p.stdout)
        assert out["time"] <= rfc3339(at)
        assert served(data, ns) == h.steps[i][2], f"state at {rfc3339(at)} (after write {i})"
        shutil.rmtree(data)


def test_targets_outside_the_window_are_refused(archived):
    _, archive, _, h = archived
    listing = ls(archive)
    # (A target before the window: see the retention test, whose window starts after index 0.)
    for target in (["--to", rfc3339(int(time.time() * 1000) + 3_600_000)],
                   ["--to-index", str(listing["windowEndIndex"] + 1000)]):
        data, p = restore(archive, *target, check=False)
        assert p.returncode == 1 and ("window" in p.stderr or "end" in p.stderr), p.stderr
        assert not os.path.exists(os.path.join(data, "data.mdb"))


def test_a_corrupt_byte_is_found_by_verify_and_refused_by_restore_past_it(archived, tmp_path):
    _, archive, _, _ = archived
    copy = str(tmp_path / "copy")
    shutil.copytree(archive, copy)
    segments = ls(copy)["segments"]
    bad = segments[len(segments) // 2]
    path = os.path.join(copy, bad["name"])
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x20]))
    v = ember("archive", "verify", "--json", copy, check=False)
    assert v.returncode == 1
    report = json.loads(v.stdout)
    assert not report["ok"] and len(report["problems"]) == 1 and bad["name"] in report["problems"][0]
    data, p = restore(copy, "--to-index", str(bad["last"]), check=False)
    assert p.returncode == 1 and bad["name"] in p.stderr and "checksum" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(data, "data.mdb"))
    # Before it the archive still restores.
    data, p = restore(copy, "--to-index", str(bad["first"] - 1))
    assert json.loads(p.stdout)["index"] == bad["first"] - 1
    # A missing segment is a gap: listed, and no restore crosses it.
    os.remove(path)
    assert ls(copy)["gaps"] == [{"from": bad["first"], "to": bad["last"]}]
    data, p = restore(copy, "--to-index", str(segments[-1]["last"]), check=False)
    assert p.returncode == 1 and "gap" in p.stderr


def test_the_existing_backup_restore_still_works(archived, tmp_path):
    n, _, ns, h = archived
    backup = str(tmp_path / "b.ember")
    ember("backup", "--node", n.url, "--out", backup, "--quiet")
    data = str(tmp_path / "restored")
    out = json.loads(ember("restore", "--in", backup, "--data", data, "--json").stdout)
    assert out["appliedIndex"] > 0
    p = ember("restore", "--in", backup, "--archive", "x", "--data", data, check=False)
    assert p.returncode != 0


def test_retention_removes_old_objects_and_the_window_stays_restorable(tmp_path):
    archive = str(tmp_path / "archive")
    n = Node(data_dir=str(tmp_path / "data"),
             extra_args=["--archive", archive, "--archive-retention", "2s", "--archive-base-every", "1s",
                         "--archive-segment-age", "0.2s"]).start()
    try:
        first = wait_for("first base", lambda: archive_status(n.url)["lastBase"])
        i = 0

        def written_and_expired():
            nonlocal i
            requests.put(f"{n.url}/r/{i}.json?ns=ret", data=str(i), timeout=5).raise_for_status()
            i += 1
            return first not in os.listdir(archive)
        wait_for("the first base expired", written_and_expired)
        wait_archived(n.url)
        # Stopped before the checks: retention (every second) would keep moving the window.
        n.stop()
        listing = ls(archive)
        assert listing["gaps"] == [] and len(listing["bases"]) >= 1
        # The newest base before the window's start is kept: a restore to the window's start works.
        assert ember("archive", "verify", archive).returncode == 0
        data, p = restore(archive, "--to-index", str(listing["windowStartIndex"] + 1))
        assert json.loads(p.stdout)["index"] == listing["windowStartIndex"] + 1
        # Before the window (what retention removed): refused, nothing created.
        assert listing["windowStartIndex"] > 0
        for target in (["--to-index", str(listing["windowStartIndex"] - 1)], ["--to", "2001-01-01T00:00:00.000Z"]):
            data, p = restore(archive, *target, check=False)
            assert p.returncode == 1 and "before the archive's window" in p.stderr, p.stderr
            assert not os.path.exists(os.path.join(data, "data.mdb"))
    finally:
        n.stop()


def test_a_restarted_node_continues_its_archive_without_gap_or_overlap(tmp_path):
    archive = str(tmp_path / "archive")
    # Segments close only at stop (age 1h): the last one is stored at SIGTERM, before its mark.
    n = Node(data_dir=str(tmp_path / "data"),
             extra_args=["--archive", archive, "--archive-segment-age", "1h", "--archive-base-every", "1h"]).start()
    try:
        for i in range(10):
            requests.put(f"{n.url}/r/a{i}.json?ns=rs", data=str(i), timeout=5).raise_for_status()
        n.stop()
        assert n.proc.returncode == 0
        stored = ls(archive)["segments"]
        assert len(stored) == 1
        n.start()
        for i in range(10):
            requests.put(f"{n.url}/r/b{i}.json?ns=rs", data=str(i), timeout=5).raise_for_status()
        live = requests.get(f"{n.url}/.json?ns=rs", timeout=5).json()
    finally:
        n.stop()
    listing = ls(archive)
    segs = listing["segments"]
    assert segs[0] == stored[0] and len(segs) == 2 and listing["gaps"] == []
    assert segs[1]["first"] == segs[0]["last"] + 1, "the restarted node adopted the unmarked segment"
    assert ember("archive", "verify", archive).returncode == 0
    data, p = restore(archive, "--to-index", str(segs[-1]["last"]))
    out = json.loads(p.stdout)
    assert out["hashVerified"] is True and out["stateHash"] == segs[-1]["stateHash"]
    assert served(data, "rs") == live
    # From the first run's base across both segments (the later bases removed from a copy).
    copy = str(tmp_path / "copy")
    shutil.copytree(archive, copy)
    for b in listing["bases"]:
        if b["first"] > segs[0]["last"]:
            os.remove(os.path.join(copy, b["name"]))
    data, p = restore(copy, "--to-index", str(segs[-1]["last"]))
    out = json.loads(p.stdout)
    assert out["baseIndex"] <= segs[0]["last"] and out["hashVerified"] is True
    assert served(data, "rs") == live


def test_kill_9_while_writing_leaves_the_archive_without_gap_or_duplicate(tmp_path):
    """A single node keeps the entries its archive lacks as log rows written in each batch's
    own transaction: kill -9 under concurrent writes and a restart leave an archive whose
    segments follow each other exactly (every acknowledged write in it, none twice), and whose
    restore is the live state."""
    archive = str(tmp_path / "archive")
    data = str(tmp_path / "data")
    n = Node(data_dir=data, extra_args=["--archive", archive, *FAST]).start()
    acked = []
    stop = False

    def writer(w):
        s = requests.Session()
        i = 0
        while not stop:
            try:
                s.put(f"{n.url}/k/w{w}/i{i}.json?ns=kill", data=str(i), timeout=5).raise_for_status()
            except requests.RequestException:
                return
            acked.append((w, i))
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    try:
        wait_for("writes acknowledged", lambda: len(acked) >= 400)
        n.proc.kill()  # SIGKILL while the writes go on
        n.proc.wait()
    finally:
        stop = True
        for t in threads:
            t.join()
    n.start()
    try:
        live = requests.get(f"{n.url}/.json?ns=kill", timeout=10).json()
        for w, i in acked:
            assert live["k"][f"w{w}"][f"i{i}"] == i, "an acknowledged write survived"
        for i in range(20):
            requests.put(f"{n.url}/k/after/i{i}.json?ns=kill", data=str(i), timeout=5).raise_for_status()
        wait_archived(n.url)
        live = requests.get(f"{n.url}/.json?ns=kill", timeout=10).json()
    finally:
        n.stop()
    listing = ls(archive)
    segs = listing["segments"]
    assert listing["gaps"] == [] and segs and segs[0]["first"] == 1
    for a, b in zip(segs, segs[1:]):
        assert b["first"] == a["last"] + 1, f"{a['name']} then {b['name']}: a gap or an entry twice"
    assert ember("archive", "verify", archive).returncode == 0
    restored, p = restore(archive, "--to-index", str(segs[-1]["last"]))
    assert json.loads(p.stdout)["hashVerified"] is True
    assert served(restored, "kill") == live
