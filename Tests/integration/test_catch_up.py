"""A cluster member that starts behind serves nothing older than what the cluster had committed
when it started (docs/CLUSTER.md "What a member serves while it catches up"): a follower
restarted on a wiped data dir, or on its old data after writes made while it was down, holds a
wire listen and a REST GET until it caught up, then answers them with the whole state; past the
limits it refuses (REST 503 + Retry-After) or closes the connection (wire).

The other two members are paused (SIGSTOP) while the follower starts, so it cannot catch up
before the clients reach it: a build without the gate answers them from its stale tree every
time, not by chance. The tests wait on events (the node's held-request count, a message or an
answer arriving), never on a sleep.
"""
import asyncio
import json
import os
import shutil
import signal
import threading
import time
import uuid

import pytest
import requests
import websockets

from cluster_helpers import Cluster, script
from wire import WireClient

CHILDREN = 60


def put_children(url, ns, start, stop):
    s = requests.Session()
    for i in range(start, stop):
        r = s.put(f"{url}/items/k{i:03d}.json?ns={ns}&print=silent", data=json.dumps({"n": i, "pad": "x" * 200}), timeout=10)
        assert r.status_code == 204, r.text


def held(c, node_id):
    """The node's held client reads (0 from a build without the gate)."""
    try:
        return c.status(node_id, timeout=2).get("catchUpHeld", 0)
    except requests.RequestException:
        return 0


class Paused:
    """SIGSTOPs the given nodes; `resume()` (or leaving the block) SIGCONTs them, once."""

    def __init__(self, c, ids):
        self.pids = [c.pid(i) for i in ids]
        self.resumed = False

    def __enter__(self):
        for p in self.pids:
            os.kill(p, signal.SIGSTOP)
        return self

    def resume(self):
        if not self.resumed:
            self.resumed = True
            for p in self.pids:
                os.kill(p, signal.SIGCONT)

    def __exit__(self, *exc):
        self.resume()


def restart_behind(c, ns, wipe):
    """Writes CHILDREN/2 children, stops a follower (wiping its data dir when `wipe`), writes the
    other half while it is down, and returns (victim, the other ids, what the cluster holds)."""
    leader = c.leader()
    put_children(c.url(leader), ns, 0, CHILDREN // 2)
    c.wait_converged(timeout=30)
    victim = next(n["id"] for n in c.nodes if n["id"] != leader)
    c.kill9(victim)
    if wipe:
        shutil.rmtree(os.path.join(c.dir, victim, "data"))
    put_children(c.url(leader), ns, CHILDREN // 2, CHILDREN)
    expected = requests.get(f"{c.url(leader)}/items.json?ns={ns}", timeout=10).json()
    assert len(expected) == CHILDREN
    others = [n["id"] for n in c.nodes if n["id"] != victim]
    return victim, others, expected


def first_answers_after_restart(c, ns, wipe):
    """Restarts a follower behind with the others paused, sends it a wire listen and a REST GET
    at once, resumes the others once both are held (or as soon as either is answered: a node
    without the gate answers at once), and returns (the listen's first data, the GET's body)."""
    victim, others, expected = restart_behind(c, ns, wipe)
    got = {}

    def rest_get():
        r = requests.get(f"{c.url(victim)}/items.json?ns={ns}", timeout=60)
        got["rest"] = (r.status_code, r.json())

    async def go(paused):
        client = await WireClient.connect(c.url(victim), ns)
        await client.ws.send(json.dumps({"t": "d", "d": {"r": 1, "a": "q", "b": {"p": "/items", "h": ""}}}))
        getter = threading.Thread(target=rest_get)
        getter.start()
        first = None
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                msg = await asyncio.wait_for(client._recv(), 0.05)
            except asyncio.TimeoutError:
                msg = None
            d = (msg or {}).get("d", {})
            if msg and msg.get("t") == "d" and d.get("a") == "d" and d.get("b", {}).get("p") in ("items", "/items"):
                first = d["b"].get("d")
                break
            if not paused.resumed and ("rest" in got or held(c, victim) >= 2):
                paused.resume()  # both requests are held (or one was answered): let it catch up
        getter.join(timeout=60)
        await client.close()
        return first

    with Paused(c, others) as paused:
        script("start-node", "--dir", c.dir, "--id", victim)
        first = asyncio.run(go(paused))
    return expected, first, got.get("rest")


@pytest.mark.parametrize("wipe", [True, False], ids=["wiped", "old-data"])
def test_restarted_follower_answers_with_the_whole_state(tmp_path, wipe):
    """Wiped (it rejoins by the leader's log) and kept-with-more-writes-while-down alike: the
    first data of a listen sent to it at once, and a GET sent at once, are the whole state the
    cluster acknowledged, never its empty or older tree."""
    c = Cluster(tmp_path / "c")
    try:
        ns = "cu" + uuid.uuid4().hex[:8]
        expected, first, rest = first_answers_after_restart(c, ns, wipe)
        assert first == expected, f"the listen's first data had {len(first or {})} of {len(expected)} children"
        assert rest == (200, expected), f"the GET answered {rest and rest[0]} with {len((rest or (0, {}))[1] or {})} children"
    finally:
        c.down()


def test_catching_up_limits_refuse_with_503_or_close_the_connection(tmp_path):
    """--catch-up-wait 1 --catch-up-max-held 1: with the others paused a restarted follower holds
    one GET and refuses a second at once (503, Retry-After, "this node is catching up: ...");
    the held GET is refused after its second; a listen is held and its connection closed with no
    data sent. /readyz says why it is not ready. Once the others resume it serves the whole state
    and reports caughtUp."""
    c = Cluster(tmp_path / "c", extra=("--catch-up-wait", "1", "--catch-up-max-held", "1"))
    try:
        ns = "cl" + uuid.uuid4().hex[:8]
        victim, others, expected = restart_behind(c, ns, wipe=True)
        url = c.url(victim)
        with Paused(c, others):
            script("start-node", "--dir", c.dir, "--id", victim)
            assert c.status(victim)["caughtUp"] is False
            ready = requests.get(f"{url}/readyz", timeout=5)
            assert ready.status_code == 503 and "catching up" in ready.json()["reason"], ready.text
            first = {}
            t = threading.Thread(target=lambda: first.setdefault("r", requests.get(f"{url}/items.json?ns={ns}", timeout=30)))
            started = time.time()
            t.start()
            deadline = time.time() + 10
            while held(c, victim) < 1 and "r" not in first:
                assert time.time() < deadline, "the first GET was neither held nor answered"
                time.sleep(0.02)
            second = requests.get(f"{url}/items.json?ns={ns}", timeout=10)
            assert second.status_code == 503, second.text
            assert second.json()["error"].startswith("this node is catching up: "), second.text
            assert "already wait" in second.json()["error"]
            assert second.headers.get("Retry-After") == "1"
            t.join(timeout=30)
            r = first["r"]
            assert r.status_code == 503 and "within 1000 ms" in r.json()["error"], r.text
            assert r.headers.get("Retry-After") == "1"
            assert time.time() - started >= 0.9, "refused before its wait was up"

            async def listen():
                client = await WireClient.connect(url, ns)
                await client.ws.send(json.dumps({"t": "d", "d": {"r": 1, "a": "q", "b": {"p": "/items", "h": ""}}}))
                got = []
                with pytest.raises(websockets.ConnectionClosed):
                    while True:
                        got.append(await asyncio.wait_for(client._recv(), 20))
                return got
            got = asyncio.run(listen())
            assert got == [], f"a held listen was answered: {got}"
        deadline = time.time() + 30
        while not c.status(victim).get("caughtUp"):
            assert time.time() < deadline, "not caught up 30 s after the others resumed"
            time.sleep(0.05)
        assert requests.get(f"{url}/items.json?ns={ns}", timeout=10).json() == expected
        assert requests.get(f"{url}/readyz", timeout=5).status_code == 200
        assert c.status(victim)["catchUpHeld"] == 0
    finally:
        c.down()


OWNER = {"Authorization": "Bearer owner"}


def test_priority_set_and_pull_feed_wait_until_caught_up(tmp_path):
    """Two reads outside GET/listen/get: a priority-only set reads the node before it writes
    (and writes nothing when it finds none), and the pull feed answers from this node's feed
    definitions and cursors. On a follower restarted wiped, with the others paused, both are held
    (the held count says so) and, once it caught up, the priority lands on the node the cluster
    holds and the feed streams from the first event. Without the gate the priority was dropped
    (the wiped node has no such node: nothing written, `null` answered) and the feed was 404."""
    c = Cluster(tmp_path / "c")
    try:
        ns = "cp" + uuid.uuid4().hex[:8]
        leader = c.leader()
        r = requests.put(f"{c.url(leader)}/.settings/triggers.json?ns={ns}", headers=OWNER, timeout=10,
                         data=json.dumps({"items": {"path": "/items/{id}", "on": ["written"], "feed": True}}))
        assert r.status_code == 200, r.text
        victim, others, expected = restart_behind(c, ns, wipe=True)
        url = c.url(victim)
        got = {}

        def set_priority():
            got["priority"] = requests.put(f"{url}/items/k001/.priority.json?ns={ns}", data="7", timeout=60)

        def read_feed():
            events = []
            with requests.get(f"{url}/.ember/feed?ns={ns}&path=/items/{{id}}", headers=OWNER, stream=True,
                              timeout=(5, 60)) as resp:
                got["feed-status"] = resp.status_code
                if resp.status_code != 200:
                    return
                for line in resp.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        events.extend(json.loads(line[6:]))
                        if len(events) >= 2:
                            break
            got["feed"] = events

        with Paused(c, others) as paused:
            script("start-node", "--dir", c.dir, "--id", victim)
            threads = [threading.Thread(target=set_priority), threading.Thread(target=read_feed)]
            for t in threads:
                t.start()
            deadline = time.time() + 30
            while held(c, victim) < 2 and len(got) == 0:
                assert time.time() < deadline, "neither held nor answered"
                time.sleep(0.02)
            assert got == {}, f"answered before the node caught up: {got}"
            paused.resume()
            for t in threads:
                t.join(timeout=60)
        p = got["priority"]
        assert p.status_code == 200 and p.json() == 7, p.text
        node = requests.get(f"{c.url(c.leader())}/items/k001.json?ns={ns}&format=export", timeout=10).json()
        assert node[".priority"] == 7 and node["n"] == 1, node
        assert got["feed-status"] == 200
        assert [e["ref"] for e in got["feed"][:2]] == ["/items/k000", "/items/k001"], got["feed"][:2]
    finally:
        c.down()
