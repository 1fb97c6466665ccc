"""A local emberd cluster for the fault campaign: every peer connection goes through its own
userspace proxy link (Tests/integration/netproxy.py), so the nemesis can cut, blackhole or heal
any direction of any pair, and each node's process can be killed, paused or wiped."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import local_cluster  # noqa: E402
from netproxy import Proxy, ReservedPorts  # noqa: E402

lc = local_cluster.load()
EMBERD = os.environ.get("EMBERD", os.path.join(ROOT, ".build", "debug", "emberd"))
RULES = {"rules": {".read": True, ".write": True}}
OWNER = {"Authorization": "Bearer owner"}


def free_port():
    return lc.free_port()


def build_slowdisk(out_dir):
    """Compiles slowdisk.c into `out_dir` with the C compiler beside swift (else cc); None when
    neither works (the campaign then runs without slow disks and says so)."""
    target = os.path.join(out_dir, "slowdisk.so")
    swift = shutil.which("swift")
    compilers = [os.path.join(os.path.dirname(os.path.realpath(swift)), "clang")] if swift else []
    compilers += ["cc"]
    for cc in compilers:
        try:
            subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", target, os.path.join(HERE, "slowdisk.c"), "-ldl"],
                           check=True, capture_output=True, timeout=120)
            return target
        except (OSError, subprocess.SubprocessError):
            continue
    return None


class Cluster:
    def __init__(self, directory, n=3, extra=(), slowdisk=None, rules=None):
        self.dir = str(directory)
        # The LD_PRELOAD library that delays syncs while a node's control file exists (slowdisk.c).
        self.slowdisk = slowdisk
        os.makedirs(self.dir, exist_ok=True)
        self.certs = os.path.join(self.dir, "certs")
        lc.make_ca(self.certs, emberd=EMBERD)
        self.ids = [f"n{i}" for i in range(1, n + 1)]
        for i in self.ids:
            lc.make_node_cert(self.certs, i, emberd=EMBERD)
        self.rules = os.path.join(self.dir, "rules.json")
        with open(self.rules, "w") as f:
            json.dump(rules or RULES, f)
        reserved = ReservedPorts(2 * len(self.ids))  # held while the links bind theirs
        ports = reserved.ports
        self.port = dict(zip(self.ids, ports))
        self.peer_port = dict(zip(self.ids, ports[len(self.ids):]))
        self.proxy = Proxy()
        self.links = {(a, b): self.proxy.link(f"{a}->{b}", self.peer_port[b])
                      for a in self.ids for b in self.ids if a != b}
        reserved.release()
        self.extra = list(extra)
        self.procs = {}
        self.paused = set()
        self.removed = set()  # removed from the membership, to be added back at the heal
        self.readded = {}     # node -> the answer to its last re-add
        for i in self.ids:
            self.start(i)

    def data(self, i):
        return os.path.join(self.dir, i)

    def start(self, i, join=False):
        peers = ",".join(f"{b}=127.0.0.1:{self.peer_port[b] if b == i else self.links[(i, b)].port}" for b in self.ids)
        # After a membership change every node learns the leader's directory, whose addresses
        # are the leader's own proxy links: --peer-dial keeps each node on its per-pair links.
        dial = ",".join(f"{b}=127.0.0.1:{self.links[(i, b)].port}" for b in self.ids if b != i)
        log = open(os.path.join(self.dir, f"{i}.log"), "ab")
        env = dict(os.environ)
        if self.slowdisk:
            env["LD_PRELOAD"] = self.slowdisk
            env["EMBER_SLOWDISK_FILE"] = self.slow_file(i)
        self.procs[i] = subprocess.Popen(
            [EMBERD, "--data", self.data(i), "--port", str(self.port[i]), "--rules", self.rules,
             "--node-id", i, "--peers", peers, "--peer-dial", dial,
             "--peer-tls-cert", os.path.join(self.certs, f"{i}.pem"),
             "--peer-tls-key", os.path.join(self.certs, f"{i}.key"),
             "--peer-tls-ca", os.path.join(self.certs, "ca.pem")] + (["--join"] if join else []) + self.extra,
            stdout=log, stderr=log, env=env)
        log.close()

    def slow_file(self, i):
        return os.path.join(self.dir, f"{i}.slowdisk")

    def slow_disk(self, i, ms):
        """Every fsync/fdatasync/msync of node i takes `ms` longer until `heal`."""
        with open(self.slow_file(i), "w") as f:
            f.write(str(int(ms)))

    def alive(self, i):
        return self.procs[i].poll() is None

    def url(self, i):
        return f"http://127.0.0.1:{self.port[i]}"

    def status(self, i, timeout=2):
        return requests.get(self.url(i) + "/.ember/status", timeout=timeout).json()

    # --- faults -----------------------------------------------------------------------------

    def kill9(self, i):
        self.resume(i)
        if self.alive(i):
            self.procs[i].send_signal(signal.SIGKILL)
            self.procs[i].wait()

    def pause(self, i):
        if self.alive(i):
            self.procs[i].send_signal(signal.SIGSTOP)
            self.paused.add(i)

    def resume(self, i):
        if i in self.paused and self.alive(i):
            self.procs[i].send_signal(signal.SIGCONT)
        self.paused.discard(i)

    def wipe(self, i):
        self.kill9(i)
        shutil.rmtree(self.data(i), ignore_errors=True)
        self.start(i)

    def cut(self, a, b, mode="blackhole"):
        self.links[(a, b)].set(mode)
        self.links[(b, a)].set(mode)

    def partition(self, groups, mode="blackhole"):
        """Only nodes sharing a group talk; a node may be in several groups (a bridge)."""
        for a in self.ids:
            for b in self.ids:
                if a < b and not any(a in g and b in g for g in groups):
                    self.cut(a, b, mode)

    def heal(self):
        for link in self.links.values():
            link.set("pass")
        for i in self.ids:
            try:
                os.remove(self.slow_file(i))
            except FileNotFoundError:
                pass

    def admin(self, method, path, body=None):
        """An admin request to the first node that answers it (a follower forwards it to the
        leader; a node that knows no leader, e.g. one waiting to be added, answers 503)."""
        code = None
        for i in self.ids:
            if not self.alive(i) or i in self.paused:
                continue
            try:
                code = requests.request(method, self.url(i) + path, json=body, headers=OWNER, timeout=15).status_code
            except requests.RequestException:
                continue
            if code != 503:
                return code
        return code

    def remove_member(self, i):
        return self.admin("DELETE", f"/.ember/members/{i}")

    def add_member(self, i):
        """200 once added; 409 when it is a member already."""
        return self.admin("POST", "/.ember/members", {"id": i, "address": f"127.0.0.1:{self.peer_port[i]}"})

    def rejoin(self, i):
        """Member remove and re-add: out of the membership, its data wiped, back with --join."""
        removed = self.remove_member(i)
        self.kill9(i)
        shutil.rmtree(self.data(i), ignore_errors=True)
        self.start(i, join=True)
        self.removed.add(i)
        return removed

    def readd(self, i, timeout=60):
        """Adds a node back (retried: no leader, or another change pending, answer 503/409)."""
        deadline = time.time() + timeout
        code = None
        while time.time() < deadline:
            code = self.add_member(i)
            if code == 200:
                break
            try:
                if any(i in self.status(j)["voters"] for j in self.ids if j != i and self.alive(j)):
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(0.5)
        self.removed.discard(i)
        self.readded[i] = code
        return code

    def transfer(self, to):
        for i in self.ids:
            try:
                return requests.post(self.url(i) + "/.ember/leader/transfer", json={"to": to}, headers=OWNER, timeout=10).status_code
            except requests.RequestException:
                continue
        return None

    # --- waiting ----------------------------------------------------------------------------

    def leader(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                leaders = {self.status(i)["leader"] for i in self.ids}
                if len(leaders) == 1 and None not in leaders:
                    return leaders.pop()
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no leader within {timeout} s")

    def wait_converged(self, timeout=60):
        deadline = time.time() + timeout
        st = {}
        while time.time() < deadline:
            try:
                st = {i: self.status(i) for i in self.ids}
                if len({s["appliedIndex"] for s in st.values()}) == 1 and len({s["stateHash"] for s in st.values()}) == 1:
                    return st
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.2)
        return st

    def heal_all(self):
        self.heal()
        for i in self.ids:
            self.resume(i)
            if not self.alive(i):
                self.start(i)
        for i in sorted(self.removed):
            self.readd(i)

    def down(self):
        for i in self.ids:
            self.resume(i)
            if self.alive(i):
                self.procs[i].send_signal(signal.SIGTERM)
        for i in self.ids:
            try:
                self.procs[i].wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.procs[i].kill()
                self.procs[i].wait()
        self.proxy.close()
