"""Read-your-writes while an apply commits, on every node of a 3-node cluster.

A node answers a write, and feeds its listeners, as soon as its apply's results are computed,
before that transaction commits (the entry is already durable in a majority's log); its reads
wait for the commit (EmberStorage's Visibility). With every sync of every node slowed by
`DELAY_MS` (slowdisk.c), each answer comes well before its commit, so a read that did not wait
would return the value before the write."""
import asyncio
import json
import os
import random
import sys
import threading
import time
import uuid

import pytest
import requests

sys.path.insert(0, os.path.dirname(__file__))

from cluster import ROOT, Cluster, build_slowdisk  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "Tests", "integration"))
from wire import WireClient  # noqa: E402

DELAY_MS = 40
ROUNDS = 6
SLOW_FOLLOWER_MS = 300


def slow_cluster(tmp_path):
    """A 3-node cluster whose every sync takes DELAY_MS longer; (cluster, leader first)."""
    slowdisk = build_slowdisk(str(tmp_path))
    assert slowdisk, "no C compiler for slowdisk.c (clang beside swift, or cc)"
    c = Cluster(tmp_path / "c", 3, slowdisk=slowdisk)
    leader = c.leader()
    for i in c.ids:
        c.slow_disk(i, DELAY_MS)
    return c, [leader] + [i for i in c.ids if i != leader]


def test_a_node_answers_before_its_commit_and_its_reads_wait_for_it(tmp_path):
    c, order = slow_cluster(tmp_path)
    try:
        key = uuid.uuid4().hex
        for node in order:
            with requests.Session() as s:
                base = f"{c.url(node)}/ryw/{key}/{node}"
                for r in range(ROUNDS):
                    put = s.put(f"{base}.json", json={"r": r}, timeout=20)
                    assert put.status_code == 200, put.text
                    got = s.get(f"{base}.json", timeout=20).json()
                    assert got == {"r": r}, (node, r, got)
                    # A stream opened after the answer starts from a state that holds the write.
                    with s.get(f"{base}.json", headers={"Accept": "text/event-stream"}, stream=True, timeout=20) as st:
                        lines = st.iter_lines(decode_unicode=True)
                        assert next(lines) == "event: put"
                        first = json.loads(next(lines)[len("data: "):])
                        assert first == {"path": "/", "data": {"r": r}}, (node, r, first)
        for i in c.ids:
            os.remove(c.slow_file(i))
        st = c.wait_converged()
        assert len({s["stateHash"] for s in st.values()}) == 1, st
    finally:
        c.down()


def test_wire_clients_read_their_writes_on_every_node(tmp_path):
    """The same over the wire protocol: a `p` answered by a node, then a `g` on the same
    connection and a listen (`q`) from a new connection there, each hold the write."""
    c, order = slow_cluster(tmp_path)
    ns = "w" + uuid.uuid4().hex[:10]

    async def rounds(node):
        w = await WireClient.connect(c.url(node), ns)
        try:
            for r in range(ROUNDS):
                _, put = await w.request("p", {"p": f"/ryw/{node}", "d": {"r": r}}, timeout=20)
                assert put["s"] == "ok", put
                _, got = await w.request("g", {"p": f"/ryw/{node}"}, timeout=20)
                assert got == {"s": "ok", "d": {"r": r}}, (node, r, got)
                listener = await WireClient.connect(c.url(node), ns)
                try:
                    before, ok = await listener.request("q", {"p": f"/ryw/{node}", "h": ""}, timeout=20)
                    assert ok["s"] == "ok", ok
                    data = [p["b"]["d"] for p in before if p.get("a") == "d"]
                    assert data == [{"r": r}], (node, r, before)
                finally:
                    await listener.close()
        finally:
            await w.close()

    try:
        for node in order:
            asyncio.run(rounds(node))
    finally:
        c.down()


def test_an_answer_waits_for_a_majority_on_disk(tmp_path):
    """A node answers before its apply's commit, and a Raft turn goes on while its append
    commits, but an entry counts as stored on a node only once that node's sync returned: with
    both followers' syncs slowed by SLOW_FOLLOWER_MS, no write is answered sooner (the leader's
    own copy is not a majority)."""
    slowdisk = build_slowdisk(str(tmp_path))
    assert slowdisk, "no C compiler for slowdisk.c (clang beside swift, or cc)"
    c = Cluster(tmp_path / "c", 3, slowdisk=slowdisk)
    try:
        leader = c.leader()
        followers = [i for i in c.ids if i != leader]
        requests.put(f"{c.url(leader)}/quorum/warm.json", data="0", timeout=20)
        term0 = c.status(leader)["term"]
        for f in followers:
            c.slow_disk(f, SLOW_FOLLOWER_MS)
        # Concurrent writers: a follower's turn then appends new entries and applies committed
        # ones in one transaction, whose results go out before it commits — its ack must not.
        took = []

        def writer(node, w):
            rng = random.Random(w)
            with requests.Session() as s:
                for r in range(3):
                    # Spread over the followers' sync windows, not in step with the commits.
                    time.sleep(rng.uniform(0, SLOW_FOLLOWER_MS / 1000))
                    t0 = time.monotonic()
                    put = s.put(f"{c.url(node)}/quorum/{node}/{w}.json", data=str(r), timeout=60)
                    took.append((node, w, r, put.status_code, time.monotonic() - t0, put.text[:200]))

        threads = [threading.Thread(target=writer, args=(node, w)) for node in [leader, followers[0]] for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(took) == 48 and all(t[3] == 200 for t in took), [t for t in took if t[3] != 200]
        fast = [t for t in took if t[4] < SLOW_FOLLOWER_MS / 1000 * 0.9]
        assert not fast, fast
        # Slow syncs cost latency, not the leader: a node answers its peers after one commit at
        # most (a check-quorum leader steps down when a majority is silent for an election
        # timeout, 500 ms or more). Answering two commits late cost 1-5 elections in these few
        # seconds; one is allowed for a starved machine (seen with two busy loops beside it).
        terms = {i: c.status(i)["term"] for i in c.ids}
        assert max(terms.values()) <= term0 + 1, terms
    finally:
        c.down()
