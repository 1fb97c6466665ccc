#!/usr/bin/env python3
"""Large data in bounded memory (issue 42): generate a Firebase-style export, import it with
`ember import`, export it back with `ember export`, and report the resident memory of emberd and
of the CLI with the throughput. The export must equal the file byte for byte (the generator
writes exactly Ember's export serialization: compact, keys in Firebase order, priorities).

  scripts/large-data.py --mb 1024                 # the BENCHMARKS.md run (release build, quiet machine)
  scripts/large-data.py --mb 100 --build debug    # a sanity run
  scripts/large-data.py --mb 1024 --interrupt 2   # kill the import twice, --resume, compare again
  scripts/large-data.py --mb 1024 --nodes 3       # import into (and export from) a 3-node cluster

emberd's memory is sampled every 50 ms (RssAnon: its heap; LMDB's mapped file pages are not
its buffers) and reported above its level before each step; the CLI's peak is its VmHWM.
Each step also prints the CPU seconds (user + system) emberd and the CLI spent on it: unlike
throughput, they mean something on a busy machine (compare builds by them, not by wall time).
With --nodes N (> 1) the nodes run as a local cluster (deploy/local-cluster, one machine): the
import and the export go through the leader, whose memory is sampled; CPU is every node's.
Prints the load average: figures from a busy machine are sanity checks only.
"""
import argparse
import hashlib
import json
import resource
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import local_cluster  # noqa: E402

_local_cluster = local_cluster.load()

PUSH_CHARS = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def _local_cluster_script():
    return local_cluster.SCRIPT


def push_ids(rng, n, start_ms):
    """n push-ID-like keys in increasing byte order (time prefix, then random)."""
    out = []
    t = start_ms
    for _ in range(n):
        t += rng.randint(1, 50)
        ts, x = "", t
        for _ in range(8):
            ts = PUSH_CHARS[x % 64] + ts
            x //= 64
        out.append(ts + "".join(rng.choice(PUSH_CHARS) for _ in range(12)))
    out.sort()
    return out


def obj(members):
    """Compact JSON object with keys in Firebase order (no integer-like keys are generated, so
    byte order), values already serialized."""
    return "{" + ",".join(f'"{k}":{v}' for k, v in sorted(members.items(), key=lambda kv: kv[0].encode())) + "}"


def user(rng, uid_n):
    posts = push_ids(rng, rng.randint(0, 6), 1_600_000_000_000)
    post_members = {}
    for p in posts:
        m = {"title": '"' + "t" * rng.randint(5, 40) + '"', "likes": str(rng.randint(0, 10_000)),
             "body": '"' + "b" * rng.randint(20, 300) + '"'}
        if rng.random() < 0.3:
            m[".priority"] = str(rng.randint(1, 100))
        post_members[p] = obj(m)
    members = {"name": f'"user{uid_n}"', "age": str(rng.randint(13, 99)), "active": "true" if rng.random() < 0.5 else "false",
               "tags": obj({f"tag{t}": "true" for t in rng.sample(range(50), rng.randint(0, 4))}) if rng.random() < 0.8 else None}
    if post_members:
        members["posts"] = obj(post_members)
    if rng.random() < 0.2:
        members[".priority"] = f'"p{rng.randint(0, 999):03d}"'
    return obj({k: v for k, v in members.items() if v is not None and v != "{}"})


def generate(path, mb, seed=42):
    """Writes ~mb MiB: {"meta": {...}, "users": {<push id>: {...}}}; returns (bytes, children)."""
    rng = random.Random(seed)
    target = mb << 20
    with open(path, "w") as f:
        f.write('{"meta":{"generator":"large-data.py","seed":' + str(seed) + '},"users":{')
        written, n, first = 0, 0, True
        t = 1_500_000_000_000
        while written < target:
            batch = push_ids(rng, 1000, t)
            t += 1000 * 60
            for uid in batch:
                s = ("" if first else ",") + f'"{uid}":' + user(rng, n)
                first = False
                f.write(s)
                written += len(s)
                n += 1
        f.write("}}")
    return os.path.getsize(path), n


class Sampler:
    """Samples a process's RssAnon every 50 ms; `peak` above `base` in MiB."""

    def __init__(self, pid):
        self.pid = pid
        self.base = self.read()
        self.peak = self.base
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def read(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
        return 0

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, self.read())
            except OSError:
                return
            time.sleep(0.05)

    def done(self):
        self.stop.set()
        self.t.join()
        return self.peak - self.base


def cpu_seconds(pid):
    """user + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cli(args, interrupt_at=None):
    """Runs the CLI; returns (seconds, peak RSS MiB, returncode). interrupt_at: SIGKILL after that
    many seconds (an interrupted import)."""
    t0 = time.time()
    p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    peak = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
        if interrupt_at is not None and time.time() - t0 > interrupt_at:
            p.send_signal(signal.SIGKILL)
            p.wait()
            return time.time() - t0, peak, -9
        time.sleep(0.05)
    out, err = p.communicate()
    if p.returncode != 0:
        print(err, file=sys.stderr)
    return time.time() - t0, peak, p.returncode


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--build", default="release")
    ap.add_argument("--interrupt", type=int, default=0, help="kill the import this many times and --resume")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--nodes", type=int, default=1, help="a local cluster of this many nodes (default: one node)")
    ap.add_argument("--bindir", help="the directory of emberd and ember (default .build/BUILD)")
    a = ap.parse_args()
    bindir = a.bindir or os.path.join(ROOT, ".build", a.build)
    work = tempfile.mkdtemp(prefix="ember-large-")
    src = os.path.join(work, "export.json")
    print(f"load average {os.getloadavg()}")
    t0 = time.time()
    size, children = generate(src, a.mb)
    print(f"generated {size / 2**20:.1f} MiB, {children} users in {time.time() - t0:.1f} s")
    node, cluster_dir = None, None
    if a.nodes > 1:
        cluster_dir = os.path.join(work, "cluster")
        subprocess.run([_local_cluster_script(), "up", "--nodes", str(a.nodes), "--dir", cluster_dir,
                        "--emberd", os.path.join(bindir, "emberd")], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(cluster_dir, "cluster.json")) as f:
            members = json.load(f)["nodes"]
        leader = _local_cluster.get_json(members[0]["url"] + "/.ember/status")["leader"]
        lead = next(m for m in members if m["id"] == leader)
        url, pid, pids = lead["url"], lead["pid"], [m["pid"] for m in members]
        print(f"{a.nodes}-node cluster, through the leader {leader}")
    else:
        port = _local_cluster.free_port()
        data = os.path.join(work, "data")
        log = open(os.path.join(work, "emberd.log"), "ab")
        node = subprocess.Popen([os.path.join(bindir, "emberd"), "--data", data, "--port", str(port)], stdout=log, stderr=log)
        url, pid = f"http://127.0.0.1:{port}", node.pid
        pids = [pid]

    cpu_label = "emberd" if a.nodes == 1 else f"{a.nodes} emberds"

    def nodes_cpu():
        return sum(cpu_seconds(p) for p in pids)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/.json?shallow=true", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        time.sleep(1)
        ember = os.path.join(bindir, "ember")
        imp = [ember, "import", src, "/data", "--node", url, "--quiet", "--timeout", "600"]
        s = Sampler(pid)
        cpu0, cli0 = nodes_cpu(), children_cpu()
        each0 = [cpu_seconds(p) for p in pids]
        term0 = _local_cluster.get_json(url + "/.ember/status", timeout=60).get("term") if a.nodes > 1 else None
        total = 0.0
        for k in range(a.interrupt):
            secs, cli, rc = run_cli(imp + (["--resume"] if k else []), interrupt_at=2 + 3 * k)
            total += secs
            print(f"import interrupted after {secs:.1f} s (rc {rc}); CLI peak {cli:.0f} MiB")
        secs, cli, rc = run_cli(imp + (["--resume"] if a.interrupt else []))
        total += secs
        grown = s.done()
        assert rc == 0, "import failed"
        print(f"import: {total:.1f} s, {size / 2**20 / total:.1f} MiB/s, {children / total:.0f} users/s; "
              f"CLI peak {cli:.0f} MiB; emberd +{grown:.0f} MiB (RssAnon above {s.base:.0f} MiB); "
              f"CPU {cpu_label} {nodes_cpu() - cpu0:.1f} s, CLI {children_cpu() - cli0:.1f} s")
        mb = size / 1e6
        each = [cpu_seconds(p) - c for p, c in zip(pids, each0)]
        roles = ["leader" if p == pid else "follower" for p in pids] if a.nodes > 1 else ["emberd"]
        print("import CPU-s/MB: " + ", ".join(f"{r} {c / mb:.3f}" for r, c in zip(roles, each))
              + f", CLI {(children_cpu() - cli0) / mb:.3f}, total {(nodes_cpu() - cpu0 + children_cpu() - cli0) / mb:.3f}")
        if a.nodes > 1:
            # A big import must not move leadership (issue 42): the term before and after it.
            st = _local_cluster.get_json(url + "/.ember/status", timeout=60)
            print(f"term before the import {term0}, after {st.get('term')}; leader after {st.get('leader')}")
        out = os.path.join(work, "back.json")
        s = Sampler(pid)
        cpu0, cli0 = nodes_cpu(), children_cpu()
        secs, cli, rc = run_cli([ember, "export", out, "/data", "--node", url, "--quiet"])
        grown = s.done()
        assert rc == 0, "export failed"
        print(f"export: {secs:.1f} s, {size / 2**20 / secs:.1f} MiB/s; CLI peak {cli:.0f} MiB; emberd +{grown:.0f} MiB; "
              f"CPU {cpu_label} {nodes_cpu() - cpu0:.1f} s, CLI {children_cpu() - cli0:.1f} s")
        same = digest(src) == digest(out)
        print("export equals the file" if same else "EXPORT DIFFERS FROM THE FILE")
        print(f"load average {os.getloadavg()}")
        sys.exit(0 if same else 1)
    finally:
        if node:
            node.send_signal(signal.SIGTERM)
            node.wait(timeout=60)
        if cluster_dir:
            subprocess.run([_local_cluster_script(), "down", "--dir", cluster_dir], stdout=subprocess.DEVNULL)
        if not a.keep:
            subprocess.run(["rm", "-rf", work])
        else:
            print("kept", work)


if __name__ == "__main__":
    main()
