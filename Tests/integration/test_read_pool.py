"""Clients' reads on a real emberd's read pool (`--read-threads`, `--max-queued-reads`).

The deterministic cases (a held pool refuses past its bound, writes go on, queued reads are
served) are Tests/EmberServerTests/ReadPoolTests.swift; here the flags reach a real node and an
overloaded node keeps its contract: every large read is answered whole or refused with 503
{"error": ...}, and writes and small reads made meanwhile are answered.
"""
import json
import subprocess
import threading

import requests

from conftest import EMBERD, Node


def test_read_pool_flags_are_checked(tmp_path):
    p = subprocess.run([EMBERD, "--data", str(tmp_path / "d"), "--read-threads", "3", "--max-queued-reads", "7",
                        "--check-config"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["readThreads"] == 3 and summary["maxQueuedReads"] == 7
    for bad in (["--read-threads", "0"], ["--max-queued-reads", "-1"]):
        p = subprocess.run([EMBERD, "--data", str(tmp_path / "d"), *bad, "--check-config"], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode != 0 and bad[0] in p.stderr


def test_an_overloaded_read_pool_answers_every_read_whole_or_503_and_writes_go_on():
    node = Node(extra_args=["--read-threads", "1", "--max-queued-reads", "0"]).start()
    try:
        leaf = "v" * 250
        big = {f"k{i}": leaf for i in range(4000)}
        assert requests.put(f"{node.url}/big.json", json=big, timeout=60).status_code == 200
        results, writes, small = [], [], []

        def large_read():
            r = requests.get(f"{node.url}/big.json", timeout=120)
            results.append((r.status_code, r.json()))

        def write(i):
            writes.append(requests.put(f"{node.url}/w/{i}.json", json=i, timeout=60).status_code)

        readers = [threading.Thread(target=large_read) for _ in range(12)]
        writers = [threading.Thread(target=write, args=(i,)) for i in range(5)]
        for t in readers + writers:
            t.start()
        # A small read made during the storm: answered whole, or refused the same way.
        r = requests.get(f"{node.url}/big/k7.json", timeout=60)
        small.append((r.status_code, r.json()))
        for t in readers + writers:
            t.join()

        assert writes == [200] * 5
        assert requests.get(f"{node.url}/w.json", timeout=60).json() == list(range(5))
        assert len(results) == 12
        for (status, body), whole in [(r, big) for r in results] + [(s, leaf) for s in small]:
            if status == 503:
                assert body["error"].startswith("Too many reads in progress on this node (1 running, 0 waiting)")
            else:
                assert status == 200 and body == whole
        # Once the storm is over the node reads normally (no read thread was lost).
        assert requests.get(f"{node.url}/big/k1.json", timeout=60).json() == leaf
    finally:
        node.stop()
    assert node.proc.returncode == 0
