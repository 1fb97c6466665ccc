"""Durable onDisconnect with real emberd processes: the writes a connection registers live in the
replicated log, so they run once when the connection closes, when its node is killed (the leader
runs them after the lease), and at the next start of a single node that crashed.

"Exactly once" is checked with an increment (a second run would make it 2) and with the node's
count of sessions whose writes are still pending (`/.ember/status` onDisconnect.pendingSessions):
writes are deleted from the log's state when they run, so once that count is 0 nothing can run
them again.
"""
import asyncio
import os
import sys
import uuid

import pytest
import requests

from conftest import WAIT, Node, get, wait_for
from cluster_helpers import module_cluster, script
from wire import WireClient

LEASE = 3  # seconds (--ondisconnect-lease)


def pending_sessions(url):
    return requests.get(url + "/.ember/status", timeout=5).json()["onDisconnect"]["pendingSessions"]


async def register_presence(url, ns, who):
    """A client's presence as the SDKs' docs show it: online, and offline when it goes; plus an
    increment (counts runs) and a cancelled write (must never run)."""
    c = await WireClient.connect(url, ns)
    answers = []
    for action, body in [
        ("o", {"p": f"presence/{who}/online", "d": False}),
        ("o", {"p": f"runs/{who}", "d": {".sv": {"increment": 1}}}),
        ("om", {"p": f"presence/{who}", "d": {"seen": {".sv": "timestamp"}}}),
        ("o", {"p": f"cancelled/{who}/x", "d": True}),
        ("oc", {"p": f"cancelled/{who}"}),
        ("p", {"p": f"presence/{who}/online", "d": True}),
    ]:
        _, r = await c.request(action, body)
        answers.append(r["s"])
    assert answers == ["ok"] * 6, answers
    return c


def assert_ran_once(url, ns, who):
    assert get(url, f"presence/{who}/online", ns) is False
    assert isinstance(get(url, f"presence/{who}/seen", ns), int)
    assert get(url, f"runs/{who}", ns) == 1
    assert get(url, f"cancelled/{who}", ns) is None


async def drop(client):
    """Forgets a connection whose node was killed (no close handshake to wait for)."""
    try:
        await asyncio.wait_for(client.ws.close(), 2)
    except Exception:
        pass


@pytest.fixture(scope="module")
def own_node():
    """A node of this module's own: its count of pending sessions is this module's."""
    n = Node().start()
    yield n
    n.stop()


def test_clean_disconnect_runs_the_writes_once(own_node):
    node = own_node
    ns = "t" + uuid.uuid4().hex[:12]

    async def go():
        c = await register_presence(node.url, ns, "u1")
        assert get(node.url, "presence/u1/online", ns) is True
        assert pending_sessions(node.url) == 1
        await c.close()

    asyncio.run(go())
    wait_for("the writes ran", lambda: get(node.url, "runs/u1", ns) == 1)
    wait_for("nothing left pending", lambda: pending_sessions(node.url) == 0)
    assert_ran_once(node.url, ns, "u1")


def test_bookkeeping_namespace_is_not_reachable_by_clients(own_node):
    node = own_node
    r = requests.get(f"{node.url}/.json?ns=_ember_ondisconnect", timeout=5)
    assert r.status_code == 403, r.text
    r = requests.put(f"{node.url}/x.json?ns=_ember_ondisconnect", json=1, timeout=5)
    assert r.status_code == 403, r.text


def test_single_node_runs_pending_writes_at_its_next_start():
    n = Node().start()
    ns = "t" + uuid.uuid4().hex[:12]
    try:
        async def go():
            c = await register_presence(n.url, ns, "u1")
            n.kill9()
            await drop(c)

        asyncio.run(go())
        n.log.close()
        restarted = Node(data_dir=n.data_dir).start()
        try:
            wait_for("the crashed node's writes ran", lambda: get(restarted.url, "runs/u1", ns) == 1)
            wait_for("nothing left pending", lambda: pending_sessions(restarted.url) == 0)
            assert_ran_once(restarted.url, ns, "u1")
        finally:
            restarted.stop()
    finally:
        n.stop()


@pytest.fixture(scope="module")
def lease_cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory, "odc", extra=("--ondisconnect-lease", str(LEASE)))


def test_presence_is_right_after_kill9_of_the_clients_node(lease_cluster):
    c = lease_cluster
    leader = c.leader()
    victim = c.followers()[0]
    survivors = [n["id"] for n in c.nodes if n["id"] != victim]
    ns = "t" + uuid.uuid4().hex[:12]

    async def go():
        client = await register_presence(c.url(victim), ns, "u1")
        for s in survivors:
            wait_for(f"{s} has the client online", lambda: get(c.url(s), "presence/u1/online", ns) is True)
        assert pending_sessions(c.url(leader)) >= 1
        c.kill9(victim)
        await drop(client)

    asyncio.run(go())
    # After the lease the leader runs the dead node's sessions' writes, once, in the log.
    for s in survivors:
        wait_for(f"{s} sees the client offline", lambda: get(c.url(s), "presence/u1/online", ns) is False)
    wait_for("nothing left pending", lambda: pending_sessions(c.url(c.leader(among=survivors))) == 0)
    for s in survivors:
        wait_for(f"{s} applied the run", lambda: get(c.url(s), "runs/u1", ns) == 1)
        assert_ran_once(c.url(s), ns, "u1")
    # The node comes back as a new incarnation: nothing runs again.
    script("start-node", "--dir", c.dir, "--id", victim)
    c.wait_converged()
    for n in c.nodes:
        assert_ran_once(c.url(n["id"]), ns, "u1")
        assert pending_sessions(c.url(n["id"])) == 0


def test_clean_disconnect_from_a_follower_runs_once_and_the_lease_adds_nothing(lease_cluster):
    c = lease_cluster
    follower = c.followers()[0]
    ns = "t" + uuid.uuid4().hex[:12]

    async def go():
        client = await register_presence(c.url(follower), ns, "u2")
        await client.close()

    asyncio.run(go())
    wait_for("nothing left pending", lambda: pending_sessions(c.url(c.leader())) == 0)
    c.wait_converged()
    for n in c.nodes:
        assert_ran_once(c.url(n["id"]), ns, "u2")


def test_presence_is_right_when_the_clients_node_is_cut_off(tmp_path):
    """The client's node is partitioned away (blackholed): past the lease the leader runs its
    sessions' writes; once the partition heals the node learns it was sealed, drops its
    connections, and its clients register again under its new incarnation."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "robustness"))
    from cluster import Cluster as ProxiedCluster  # every peer link through its own proxy

    c = ProxiedCluster(tmp_path / "c", n=3, extra=["--ondisconnect-lease", str(LEASE)])
    try:
        leader = c.leader()
        victim = next(i for i in c.ids if i != leader)
        others = [i for i in c.ids if i != victim]
        ns = "t" + uuid.uuid4().hex[:12]

        async def go():
            client = await register_presence(c.url(victim), ns, "u3")
            wait_for("the leader has the client online", lambda: get(c.url(leader), "presence/u3/online", ns) is True)
            c.partition([[victim], others])
            for s in others:
                wait_for(f"{s} sees the client offline", lambda: get(c.url(s), "presence/u3/online", ns) is False)
            assert_ran_once(c.url(leader), ns, "u3")
            c.heal()
            # The node finds its sessions sealed and drops the connection...
            await asyncio.wait_for(client.ws.wait_closed(), WAIT)
            # ...and its clients register again, under its new incarnation.
            again = await register_presence(c.url(victim), ns, "u4")
            wait_for("the leader has the new client online", lambda: get(c.url(leader), "presence/u4/online", ns) is True)
            await again.close()

        asyncio.run(go())
        wait_for("nothing left pending", lambda: pending_sessions(c.url(c.leader())) == 0)
        c.wait_converged()
        for i in c.ids:
            assert_ran_once(c.url(i), ns, "u3")
            assert_ran_once(c.url(i), ns, "u4")
    finally:
        c.down()
