"""A follower that fell behind or lost its data catches up: by the log at once, by a snapshot,
and behind a compaction with its listeners resynced (real 3-node clusters, cluster_helpers.py)."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import requests

from cluster_helpers import Cluster, script
from conftest import EMBERD


def put_bulk(session, url, megabytes):
    """Writes about `megabytes` MB of tree under /bulk/bN/kI, half a MB (500 leaves) per write
    (small enough that a debug leader's turn stays well under the election timeout)."""
    pad = "x" * 1000
    for b in range(megabytes):
        for half in range(2):
            body = json.dumps({f"k{i:04d}": f"{b}-{i}-{pad}" for i in range(half * 500, half * 500 + 500)})
            r = session.patch(f"{url}/bulk/b{b:04d}.json?print=silent", data=body, timeout=60)
            assert r.status_code == 204, r.text


def wipe_a_follower_and_restart_it(c, s, leader, writes_while_down):
    """kill -9 a follower, delete its data dir, write `/w/<i>` for each i while it is down, then
    start it again on the empty dir. Returns the follower's id and its start time."""
    victim = next(n["id"] for n in c.nodes if n["id"] != leader)
    c.kill9(victim)
    shutil.rmtree(os.path.join(c.dir, victim, "data"))
    for i in writes_while_down:
        assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
    started = time.time()
    script("start-node", "--dir", c.dir, "--id", victim)
    return victim, started


def test_wiped_follower_catches_up_by_log_at_once(tmp_path):
    """Default snapshot interval (no compaction happens): a follower restarted on an empty data
    dir is re-replicated from the leader's log within seconds, not after the next compaction
    (the leader lowers its matchIndex when the follower's rejection shows the log is gone)."""
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        s = requests.Session()
        for i in range(40):
            assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
        c.wait_converged(timeout=15)
        victim, started = wipe_a_follower_and_restart_it(c, s, leader, range(40, 50))
        c.wait_converged(timeout=10)
        print(f"wiped follower converged {time.time() - started:.1f} s after its start")
        assert requests.get(f"{c.url(victim)}/w.json", timeout=5).json() == list(range(50))
        assert c.status(leader)["snapshotIndex"] == 0, "the leader compacted: this test is about the log"
        with open(os.path.join(c.dir, f"{victim}.log"), errors="replace") as f:
            assert "installed snapshot from leader" not in f.read()
        # The returned follower serves live changes: its listener sees the next write.
        with requests.get(f"{c.url(victim)}/w/50.json", headers={"Accept": "text/event-stream"},
                          stream=True, timeout=20) as stream:
            lines = stream.iter_lines(decode_unicode=True)
            assert next(lines) == "event: put"
            assert json.loads(next(lines).removeprefix("data: ")) == {"path": "/", "data": None}
            assert s.put(f"{c.url(leader)}/w/50.json?print=silent", data="50", timeout=10).status_code == 204
            seen, event = None, None
            for line in lines:
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event != "keep-alive":
                    seen = (event, json.loads(line.removeprefix("data: ")))
                    break
            assert seen == ("put", {"path": "/", "data": 50})
    finally:
        c.down()


def test_wiped_follower_returns_by_snapshot(tmp_path):
    """The leader compacts every 20 entries, so a wiped follower returns by snapshot (at once, not
    at the next compaction). The snapshot is many chunks (1 MiB each): the follower stages and
    installs it in pieces."""
    megabytes = int(os.environ.get("EMBER_SNAPSHOT_TEST_MB", "200" if os.environ.get("EMBER_SOAK") else "20"))
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    try:
        leader = c.leader()
        s = requests.Session()
        put_bulk(s, c.url(leader), megabytes)
        for i in range(60):
            assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=str(i), timeout=10).status_code == 204
        # Status answers hash the whole tree when it changed: give the first polls time.
        leader = c.leader(timeout=60)
        victim, started = wipe_a_follower_and_restart_it(c, s, leader, range(60, 80))
        c.wait_converged(timeout=30 + megabytes)
        print(f"{megabytes} MB tree: wiped follower converged {time.time() - started:.1f} s after its start")
        assert requests.get(f"{c.url(victim)}/w.json", timeout=5).json() == list(range(80))
        last = requests.get(f"{c.url(victim)}/bulk/b{megabytes - 1:04d}/k0999.json", timeout=5).json()
        assert last == f"{megabytes - 1}-999-" + "x" * 1000
        assert c.status(leader)["snapshotIndex"] > 0
        with open(os.path.join(c.dir, f"{leader}.log"), errors="replace") as f:
            written = [l for l in f if "snapshot file written for followers" in l]
        assert written, "the leader wrote no snapshot file"
        size = int(written[-1].split("bytes=")[1].split()[0]) if "bytes=" in written[-1] else None
        with open(os.path.join(c.dir, f"{victim}.log"), errors="replace") as f:
            assert "installed snapshot from leader" in f.read()
        assert not os.path.exists(os.path.join(c.dir, victim, "data", "raft-snapshot-incoming"))
        if size is not None:
            assert size > 20 * (1 << 20) * megabytes // 24, f"snapshot of {size} bytes is not several chunks"
    finally:
        c.down()


def apply_at(model, path, data, merge=False):
    """Applies a Firebase put (replace) or patch/merge (children) at `path` to a JSON model."""
    keys = [k for k in path.split("/") if k]
    if not keys:
        if not merge:
            return data
        model = dict(model) if isinstance(model, dict) else {}
        for k, v in data.items():
            model = apply_at(model, k, v)
        return model
    model = dict(model) if isinstance(model, dict) else {}
    child = apply_at(model.get(keys[0]), "/".join(keys[1:]), data, merge)
    if child is None or child == {}:
        model.pop(keys[0], None)
    else:
        model[keys[0]] = child
    return model or None


def test_follower_behind_a_compaction_catches_up_by_snapshot_and_resyncs_listeners(tmp_path):
    """SIGSTOP a follower, compact the leader's log past it, SIGCONT: it installs a snapshot and
    its listeners stay open: an SSE stream gets a put at "/" with the whole new data, WebSocket
    listens (plain and a tagged query) their complete data again, then later writes with no gap."""
    import asyncio
    from wire import WireClient
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    ns = "resync"
    try:
        leader = c.leader()
        victim = c.followers()[0]
        s = requests.Session()
        assert s.put(f"{c.url(leader)}/w/k000.json?ns={ns}", data="-1", timeout=10).status_code == 200
        c.wait_converged(timeout=15)
        sse_events, pushes, closed = [], [], []
        sse_ready, ws_ready, stop = threading.Event(), threading.Event(), threading.Event()

        def follow_sse():
            try:
                with requests.get(f"{c.url(victim)}/w.json?ns={ns}", headers={"Accept": "text/event-stream"},
                                  stream=True, timeout=60) as stream:
                    event = None
                    for line in stream.iter_lines(decode_unicode=True):
                        if stop.is_set():
                            return
                        if line.startswith("event: "):
                            event = line[len("event: "):]
                        elif line.startswith("data: ") and event in ("put", "patch"):
                            sse_events.append((event, json.loads(line[len("data: "):])))
                            sse_ready.set()
            except Exception:
                pass  # the cluster going down at the end of the test
            closed.append("sse")

        def follow_ws():
            async def go():
                client = await WireClient.connect(c.url(victim), ns)
                await client.request("q", {"p": "/w", "h": ""})
                await client.request("q", {"p": "/w", "q": {"i": ".key", "l": 3, "vf": "r"}, "t": 1, "h": ""})
                pushes.extend(client.pushes)
                ws_ready.set()
                try:
                    while not stop.is_set():
                        try:
                            pushes.append(await client.next_push(timeout=1))
                        except asyncio.TimeoutError:
                            pass
                except Exception:
                    closed.append("ws")
                await client.close()
            asyncio.run(go())

        threads = [threading.Thread(target=f, daemon=True) for f in (follow_sse, follow_ws)]
        for t in threads:
            t.start()
        assert sse_ready.wait(10) and ws_ready.wait(10)
        os.kill(c.pid(victim), signal.SIGSTOP)
        try:
            for i in range(1, 61):
                assert s.put(f"{c.url(leader)}/w/k{i:03}.json?ns={ns}&print=silent", data=str(i),
                             timeout=10).status_code == 204
        finally:
            os.kill(c.pid(victim), signal.SIGCONT)
        log = os.path.join(c.dir, f"{victim}.log")
        deadline = time.time() + 15
        while "installed snapshot from leader" not in open(log, errors="replace").read():
            assert time.time() < deadline, "the follower did not install a snapshot"
            time.sleep(0.1)
        # Later writes, made on the leader after the install: puts, a delete and a multi-path patch.
        for i in range(61, 71):
            assert s.put(f"{c.url(leader)}/w/k{i:03}.json?ns={ns}&print=silent", data=str(i), timeout=10).status_code == 204
        assert s.delete(f"{c.url(leader)}/w/k005.json?ns={ns}", timeout=10).status_code == 200
        assert s.patch(f"{c.url(leader)}/w.json?ns={ns}", data=json.dumps({"k071": 71, "k070": None}),
                       timeout=10).status_code == 200
        c.wait_converged(timeout=30)
        final = requests.get(f"{c.url(victim)}/w.json?ns={ns}", timeout=5).json()
        assert len(final) == 70 and "k005" not in final and final["k071"] == 71

        def sse_model():
            model = None
            for event, msg in list(sse_events):
                model = apply_at(model, msg["path"], msg["data"], merge=(event == "patch"))
            return model

        def ws_models():
            root, window = None, None
            for push in list(pushes):
                b = push["b"]
                if push["a"] not in ("d", "m"):
                    continue
                if "t" in b:
                    window = apply_at(window, "", b["d"], merge=(push["a"] == "m"))
                else:
                    root = apply_at(root, b["p"], b["d"], merge=(push["a"] == "m"))
            return (root or {}).get("w"), window

        deadline = time.time() + 15
        while (sse_model(), ws_models()) != (final, (final, {k: final[k] for k in sorted(final)[-3:]})):
            assert time.time() < deadline, f"listeners did not converge: {sse_model()} {ws_models()}"
            time.sleep(0.1)
        assert not closed, f"listeners were dropped: {closed}"
        # The resynchronisation itself: a second put at "/" on the stream, a second untagged
        # full-data push at /w on the socket, both carrying data only the snapshot had.
        resync_puts = [m for e, m in sse_events if e == "put" and m["path"] == "/"]
        assert len(resync_puts) >= 2 and "k010" in resync_puts[1]["data"]
        full = [p for p in pushes if p["a"] == "d" and p["b"]["p"] == "w" and "t" not in p["b"]]
        assert len(full) >= 2 and "k010" in full[1]["b"]["d"]
        stop.set()
    finally:
        stop.set()
        c.down()


def test_snapshot_catch_up_mb_flag():
    """--snapshot-catch-up-mb (the MiB of applied entries Raft's in-memory log keeps after a
    compaction): in --help, and refused outside 1...4096 before anything starts."""
    out = subprocess.run([EMBERD, "--help"], capture_output=True, text=True, timeout=60)
    assert "--snapshot-catch-up-mb" in out.stdout
    for bad in ["0", "4097"]:
        p = subprocess.run([EMBERD, "--snapshot-catch-up-mb", bad, "--check-config"], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "--snapshot-catch-up-mb must be 1...4096 MiB" in p.stderr, p.stderr
