"""Shared by the cluster tests: a 3-node cluster of real emberd processes on loopback (mutual
TLS between peers) made by deploy/local-cluster (so the script is tested too), and what the tests
ask of it. One module-scoped cluster (`cluster`) serves each module's read-mostly tests; the
kill -9, wiped-follower and compaction tests make their own.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from conftest import EMBERD, RULES, ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import local_cluster  # noqa: E402  (scripts/local_cluster.py, shared with scripts/bench-snapshot.py)
from local_cluster import SCRIPT  # noqa: E402

ELECTION_TIMEOUT = 1.0  # seconds: 10 ticks of 50 ms, randomized up to 2x
CHAOS_ROUNDS = int(os.environ.get("EMBER_CLUSTER_CHAOS_ROUNDS", "20" if os.environ.get("EMBER_SOAK") else "0"))


lc = local_cluster.load()


def script(*args):
    subprocess.run([sys.executable, SCRIPT, *args], check=True, env={**os.environ, "EMBERD": EMBERD})


class Cluster:
    def __init__(self, dir_, nodes=3, extra=()):
        self.dir = str(dir_)
        rules = os.path.join(self.dir + "-rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        script("up", "--nodes", str(nodes), "--dir", self.dir, "--rules", rules, "--", *extra)

    @property
    def nodes(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)["nodes"]

    def url(self, node_id):
        return next(n["url"] for n in self.nodes if n["id"] == node_id)

    def pid(self, node_id):
        return next(n["pid"] for n in self.nodes if n["id"] == node_id)

    def status(self, node_id, timeout=2):
        return requests.get(self.url(node_id) + "/.ember/status", timeout=timeout).json()

    def leader(self, among=None, timeout=15):
        """Waits until the given nodes agree on a leader among them; returns its id."""
        return agreed_leader(self.status, among or [n["id"] for n in self.nodes], timeout)

    def followers(self):
        leader = self.leader()
        return [n["id"] for n in self.nodes if n["id"] != leader]

    def wait_converged(self, timeout=30):
        """Every node applied the same index and holds the same state hash."""
        return converged(self.status, [n["id"] for n in self.nodes], timeout)

    def kill9(self, node_id):
        os.kill(self.pid(node_id), signal.SIGKILL)
        deadline = time.time() + 5
        while lc.alive(self.pid(node_id)) and time.time() < deadline:
            time.sleep(0.05)

    def down(self):
        script("down", "--dir", self.dir)


def agreed_leader(status, among, timeout):
    """Waits until the nodes `among` (ids; `status(id)` is a node's /.ember/status) agree on a
    leader among them; returns its id."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            leaders = {status(i)["leader"] for i in among}
            if len(leaders) == 1 and None not in leaders and leaders <= set(among):
                return leaders.pop()
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no leader among {among} within {timeout} s")


def converged(status, ids, timeout):
    """Waits until every node applied the same index and holds the same state hash; returns
    their statuses."""
    deadline = time.time() + timeout
    st = []
    while time.time() < deadline:
        try:
            st = [status(i) for i in ids]
            if len({s["appliedIndex"] for s in st}) == 1 and len({s["stateHash"] for s in st}) == 1:
                return st
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nodes did not converge: {st}")


def assert_no_acknowledged_write_lost(urls, path, acked):
    """Every node (id → client URL) holds every acknowledged write (key → value) under `path`."""
    for node_id, url in urls.items():
        data = requests.get(f"{url}/{path}.json", timeout=10).json() or {}
        lost = [k for k, v in acked.items() if data.get(k) != v]
        assert not lost, f"{node_id} lost {len(lost)} acknowledged writes, e.g. {lost[:5]}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster") / "c")
    yield c
    c.down()



def module_cluster(tmp_path_factory, name, **kw):
    """A cluster for a module-scoped fixture (`yield from module_cluster(...)`): made under a
    fresh directory `name`, taken down when the module is done."""
    c = Cluster(tmp_path_factory.mktemp(name) / "c", **kw)
    try:
        yield c
    finally:
        c.down()
