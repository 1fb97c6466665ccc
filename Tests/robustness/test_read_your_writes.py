"""Read-your-writes while an apply commits, on every node of a 3-node cluster.

A node answers a write, and feeds its listeners, as soon as its apply's results are computed,
before that transaction commits (the entry is already durable in a majority's log); its reads
wait for the commit (EmberStorage's Visibility). With every sync of every node slowed by
`DELAY_MS` (slowdisk.c), each answer comes well before its commit, so a read that did not wait
would return the value before the write."""
import json
import os
import sys
import uuid

import pytest
import requests

sys.path.insert(0, os.path.dirname(__file__))

from cluster import Cluster, build_slowdisk  # noqa: E402

DELAY_MS = 40
ROUNDS = 6


def test_a_node_answers_before_its_commit_and_its_reads_wait_for_it(tmp_path):
    slowdisk = build_slowdisk(str(tmp_path))
    assert slowdisk, "no C compiler for slowdisk.c (clang beside swift, or cc)"
    c = Cluster(tmp_path / "c", 3, slowdisk=slowdisk)
    try:
        leader = c.leader()
        order = [leader] + [i for i in c.ids if i != leader]
        for i in c.ids:
            c.slow_disk(i, DELAY_MS)
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
