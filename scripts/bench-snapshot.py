#!/usr/bin/env python3
"""Snapshot benchmark: a 3-node cluster holding a large tree (issue 4).

  scripts/bench-snapshot.py --emberd PATH [--leaves 500000] [--leaf-bytes 400] [--dir DIR]

Starts a cluster with deploy/local-cluster, loads `--leaves` leaves (1000 per PUT) through the
leader, then measures and prints:
  1. start-to-serving of a follower holding the tree: SIGTERM it, start it again, time until it
     answers HTTP and until a GET of a leaf returns the right value; its peak RSS (VmHWM) then;
  2. a snapshot transfer: kill -9 a follower, delete its data, start it, time until it serves the
     last leaf and has applied the leader's index; peak RSS and peak anonymous RSS (RssAnon: heap,
     not LMDB's file-backed pages) of the leader and of that follower, sampled every 100 ms.
The `ember` CLI next to this checkout's emberd (or $EMBER) makes the certificates, so
`--emberd` may point at any build (e.g. a copy of the base commit's binary).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import local_cluster  # next to this script (scripts/ is sys.path[0] when it runs)
from local_cluster import ROOT, SCRIPT

lc = local_cluster.load()


def http(method, url, body=None, timeout=60, retries=20):
    """One request; 503s (no leader yet, busy) are retried after a pause."""
    for attempt in range(retries + 1):
        req = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code != 503 or attempt == retries:
                raise
            time.sleep(0.5)


def status(url, timeout=5):
    return json.loads(http("GET", url + "/.ember/status", timeout=timeout)[1])


def proc_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler:
    """Peak VmRSS / RssAnon of some pids, sampled on demand."""

    def __init__(self, pids):
        self.pids = pids
        self.rss = {p: 0 for p in pids}
        self.anon = {p: 0 for p in pids}

    def sample(self):
        for p in self.pids:
            self.rss[p] = max(self.rss[p], proc_kb(p, "VmRSS") or 0)
            self.anon[p] = max(self.anon[p], proc_kb(p, "RssAnon") or 0)


def leaf_value(b, i, pad):
    return f"{b}-{i}-{pad}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emberd", required=True)
    ap.add_argument("--leaves", type=int, default=500_000)
    ap.add_argument("--leaf-bytes", type=int, default=400)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    ap.add_argument("--transfer-timeout", type=float, default=1800)
    args = ap.parse_args()
    emberd = os.path.abspath(args.emberd)
    os.environ.setdefault("EMBER", os.path.join(ROOT, ".build", "debug", "ember"))
    base = args.dir or tempfile.mkdtemp(prefix="ember-bench-snap-")
    cdir = os.path.join(base, "c")
    subprocess.run([sys.executable, SCRIPT, "up", "--nodes", "3", "--dir", cdir, "--emberd", emberd, "--",
                    "--snapshot-entries", "200"], check=True, env={**os.environ, "EMBERD": emberd})
    layout = json.load(open(os.path.join(cdir, "layout.json")))
    cluster = lambda: json.load(open(os.path.join(cdir, "cluster.json")))["nodes"]
    url = {n["id"]: n["url"] for n in cluster()}
    pid = lambda i: next(n["pid"] for n in cluster() if n["id"] == i)
    try:
        leader = status(url["n1"])["leader"]
        followers = sorted(i for i in url if i != leader)
        pad = "x" * max(0, args.leaf_bytes - 16)
        batches = max(1, args.leaves // 1000)
        t0 = time.time()
        for b in range(batches):
            body = json.dumps({f"k{i:04d}": leaf_value(b, i, pad) for i in range(1000)}).encode()
            code, _ = http("PUT", f"{url[leader]}/bulk/b{b:05d}.json?print=silent", body)
            assert code == 204
        load_s = time.time() - t0
        last = f"/bulk/b{batches - 1:05d}/k0999.json"
        expected = json.dumps(leaf_value(batches - 1, 999, pad)).encode()

        def serves_last(node_url):
            try:
                code, body = http("GET", node_url + last, timeout=10)
                return code == 200 and body == expected
            except Exception:
                return False

        while not all(serves_last(url[i]) for i in url):
            time.sleep(0.5)
        # (/.ember/status hashes the whole tree once per applied index: called only when idle.)
        leader = status(url["n1"], timeout=600)["leader"]
        followers = sorted(i for i in url if i != leader)
        du = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(layout["nodes"][0]["data"]) for f in fs)
        print(f"loaded {batches * 1000} leaves of {args.leaf_bytes} B in {load_s:.1f} s; "
              f"data dir of n1 {du / 2**20:.0f} MiB; leader {leader}")
        def spawn(node_id):
            layout_now, nodes = lc.load(cdir)
            new_pid = lc.spawn(layout_now, next(n for n in layout_now["nodes"] if n["id"] == node_id))
            for n in nodes["nodes"]:
                if n["id"] == node_id:
                    n["pid"] = new_pid
            lc.save_cluster(cdir, nodes)
            return new_pid

        def wait_exit(p_id, timeout=60):
            deadline = time.time() + timeout
            while lc.alive(p_id) and time.time() < deadline:
                time.sleep(0.05)

        # 1. Restart of a follower holding the tree.
        f = followers[0]
        os.kill(pid(f), signal.SIGTERM)
        wait_exit(pid(f))
        started = time.time()
        fpid = spawn(f)
        answered = serving = None
        while serving is None and time.time() - started < 600:
            try:
                code, body = http("GET", url[f] + last, timeout=5)
                answered = answered or time.time() - started
                if code == 200 and body == expected:
                    serving = time.time() - started
            except Exception:
                pass
            if serving is None:
                time.sleep(0.05)
        print(f"restart of {f}: answers HTTP after {answered:.2f} s, serves the last leaf after {serving:.2f} s, "
              f"VmHWM {proc_kb(fpid, 'VmHWM') / 1024:.0f} MiB")

        # 2. Snapshot transfer to a wiped follower.
        f = followers[1]
        print(f"before the transfer: leader {leader} RSS {proc_kb(pid(leader), 'VmRSS') / 1024:.0f} MiB, "
              f"RssAnon {proc_kb(pid(leader), 'RssAnon') / 1024:.0f} MiB")
        os.kill(pid(f), signal.SIGKILL)
        wait_exit(pid(f))
        shutil.rmtree(next(n["data"] for n in layout["nodes"] if n["id"] == f))
        # Enough writes for the leader to compact past what the wiped node had acknowledged
        # (Raft never lowers a match index: below the log start it sends a snapshot).
        for i in range(250):
            http("PUT", f"{url[leader]}/after-wipe/{i}.json?print=silent", b"1")
        started = time.time()
        fpid = spawn(f)
        sampler = Sampler([pid(leader), fpid])
        done = None
        next_probe = 0
        while done is None and time.time() - started < args.transfer_timeout:
            sampler.sample()
            if time.time() >= next_probe:
                next_probe = time.time() + 0.5
                if serves_last(url[f]):
                    done = time.time() - started
            time.sleep(0.1)
        sampler.sample()
        lp, fp = pid(leader), fpid
        print(f"snapshot transfer to wiped {f}: " + (f"serving the last leaf after {done:.1f} s" if done
              else f"NOT caught up within {args.transfer_timeout:.0f} s"))
        print(f"  leader {leader}: peak RSS {sampler.rss[lp] / 1024:.0f} MiB, peak RssAnon {sampler.anon[lp] / 1024:.0f} MiB, "
              f"VmHWM {proc_kb(lp, 'VmHWM') / 1024:.0f} MiB")
        print(f"  follower {f}: peak RSS {sampler.rss[fp] / 1024:.0f} MiB, peak RssAnon {sampler.anon[fp] / 1024:.0f} MiB, "
              f"VmHWM {proc_kb(fp, 'VmHWM') / 1024:.0f} MiB")
    finally:
        if not args.keep:
            subprocess.run([sys.executable, SCRIPT, "down", "--dir", cdir])
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
