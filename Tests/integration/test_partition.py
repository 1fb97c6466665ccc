"""Network partitions between real emberd processes, through a userspace TCP proxy (netproxy.py).

Every node reaches every other node through its own proxied link (a->b is one link: Ember peer
connections are one-way), so a test can cut, blackhole or delay any direction of any pair.
The default run is short; EMBER_SOAK=1 adds rounds of random partitions under load.
"""
import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest
import requests

from conftest import EMBERD, RULES
from netproxy import Proxy, ReservedPorts
from cluster_helpers import agreed_leader, assert_no_acknowledged_write_lost, converged, lc

SOAK_ROUNDS = int(os.environ.get("EMBER_PARTITION_ROUNDS", "10" if os.environ.get("EMBER_SOAK") else "0"))


class ProxiedCluster:
    def __init__(self, base, n=3, extra=()):
        self.dir = str(base)
        os.makedirs(self.dir)
        certs = os.path.join(self.dir, "certs")
        lc.make_ca(certs)
        self.ids = [f"n{i}" for i in range(1, n + 1)]
        for i in self.ids:
            lc.make_node_cert(certs, i)
        rules = os.path.join(self.dir, "rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        reserved = ReservedPorts(2 * len(self.ids))
        ports = reserved.ports
        self.port = dict(zip(self.ids, ports))
        peer = dict(zip(self.ids, ports[len(self.ids):]))
        self.proxy = Proxy()
        self.links = {(a, b): self.proxy.link(f"{a}->{b}", peer[b]) for a in self.ids for b in self.ids if a != b}
        reserved.release()  # the links are bound: only the nodes bind from here on
        self.procs = {}
        for a in self.ids:
            peers = ",".join(f"{b}=127.0.0.1:{peer[b] if a == b else self.links[(a, b)].port}" for b in self.ids)
            log = open(os.path.join(self.dir, f"{a}.log"), "ab")
            self.procs[a] = subprocess.Popen(
                [EMBERD, "--data", os.path.join(self.dir, a), "--port", str(self.port[a]), "--rules", rules,
                 "--node-id", a, "--peers", peers,
                 "--peer-tls-cert", os.path.join(certs, f"{a}.pem"), "--peer-tls-key", os.path.join(certs, f"{a}.key"),
                 "--peer-tls-ca", os.path.join(certs, "ca.pem"), *extra], stdout=log, stderr=log)

    def url(self, i):
        return f"http://127.0.0.1:{self.port[i]}"

    def status(self, i):
        return requests.get(self.url(i) + "/.ember/status", timeout=2).json()

    def leader(self, among=None, timeout=20):
        return agreed_leader(self.status, among or self.ids, timeout)

    def isolate(self, node, mode="blackhole"):
        for (a, b), link in self.links.items():
            if node in (a, b):
                link.set(mode)

    def heal(self):
        for link in self.links.values():
            link.set("pass")

    def wait_converged(self, timeout=30):
        return converged(self.status, self.ids, timeout)

    def down(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proxy.close()


@pytest.fixture
def pc(tmp_path):
    c = ProxiedCluster(tmp_path / "p")
    yield c
    c.down()


def put(url, key, value, acked, timeout=15):
    try:
        r = requests.put(f"{url}/p/{key}.json?print=silent", data=json.dumps(value), timeout=timeout)
    except requests.RequestException:
        return None
    if r.status_code == 204:
        acked[key] = value
    return r.status_code


def test_partitioned_leader_is_replaced_and_its_unacknowledged_writes_vanish(pc):
    old = pc.leader()
    acked = {}
    # Slow links (50 ms per chunk each way) still replicate.
    for link in pc.links.values():
        link.set("pass", delay=0.05)
    for i in range(5):
        assert put(pc.url(old), f"slow{i}", i, acked) == 204
    pc.heal()

    pc.isolate(old, "blackhole")
    majority = [i for i in pc.ids if i != old]
    new = pc.leader(among=majority)
    assert new != old
    # The stale leader cannot commit: its write is never acknowledged.
    stale = {}
    stale_status = []
    t = threading.Thread(target=lambda: stale_status.append(put(pc.url(old), "stale", "lost", stale, timeout=30)))
    t.start()
    for i in range(20):
        assert put(pc.url(majority[i % 2]), f"maj{i}", i, acked) == 204
    # Check-quorum: the isolated leader steps down on its own.
    deadline = time.time() + 10
    while pc.status(old)["role"] == "leader" and time.time() < deadline:
        time.sleep(0.1)
    assert pc.status(old)["role"] != "leader"
    t.join()
    assert stale == {} and stale_status[0] != 204, stale_status

    pc.heal()
    pc.wait_converged()
    for i in pc.ids:
        data = requests.get(f"{pc.url(i)}/p.json", timeout=5).json() or {}
        assert "stale" not in data, i
        assert all(data.get(k) == v for k, v in acked.items()), (i, data)


def test_dropped_links_heal_and_converge(pc):
    """Hard drops (connections reset, redials refused) of one follower, then heal."""
    leader = pc.leader()
    victim = next(i for i in pc.ids if i != leader)
    acked = {}
    pc.isolate(victim, "drop")
    for i in range(20):
        assert put(pc.url(leader), f"d{i}", i, acked) == 204
    assert pc.status(victim)["appliedIndex"] < pc.status(leader)["appliedIndex"]
    pc.heal()
    pc.wait_converged()
    assert requests.get(f"{pc.url(victim)}/p.json", timeout=5).json() == acked


@pytest.mark.skipif(SOAK_ROUNDS == 0, reason="soak only (EMBER_SOAK=1 or EMBER_PARTITION_ROUNDS=N)")
def test_random_partitions_under_load(pc):
    rng = random.Random(int(os.environ.get("EMBER_CHAOS_SEED", "1")))
    stop, lock, acked = threading.Event(), threading.Lock(), {}

    def load(worker):
        i = 0
        while not stop.is_set():
            i += 1
            key, node = f"w{worker}_{i}", pc.ids[(worker + i) % len(pc.ids)]
            got = {}
            if put(pc.url(node), key, i, got, timeout=20) == 204:
                with lock:
                    acked.update(got)
            else:
                time.sleep(0.05)

    workers = [threading.Thread(target=load, args=(w,)) for w in range(3)]
    for t in workers:
        t.start()
    for _ in range(SOAK_ROUNDS):
        time.sleep(rng.uniform(0.5, 2))
        victim = rng.choice(pc.ids)
        pc.isolate(victim, rng.choice(["drop", "blackhole"]))
        time.sleep(rng.uniform(0.5, 3))
        pc.heal()
    time.sleep(2)
    stop.set()
    for t in workers:
        t.join()
    pc.wait_converged(timeout=60)
    assert_no_acknowledged_write_lost({i: pc.url(i) for i in pc.ids}, "p", acked)
    print(f"{SOAK_ROUNDS} partition rounds, {len(acked)} acknowledged writes")
