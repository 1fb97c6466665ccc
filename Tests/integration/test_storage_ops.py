"""Storage footprint and compaction from the outside: `/.ember/status` `storage`, `ember stats`
and `ember compact` against a real emberd process and its LMDB files."""
import json
import os

import requests

from conftest import Node
from test_ops import ember

ADMIN = {"Authorization": "Bearer owner"}


def load(node, children):
    body = {f"c{i:06d}": {"score": i, "name": "n"} for i in range(children)}
    r = requests.put(f"{node.url}/items.json?print=silent", data=json.dumps(body), headers=ADMIN, timeout=120)
    assert r.status_code == 204, r.text


def test_status_and_stats_report_bytes_per_table():
    n = Node().start()
    try:
        load(n, 2_000)
        storage = requests.get(n.url + "/.ember/status", timeout=10).json()["storage"]
        # One record per child: small objects are stored inline (`InlineObject`).
        assert storage["tables"]["tree"]["entries"] == 2_000
        assert storage["tables"]["log"]["entries"] == 0  # a single node keeps no applied entries
        assert storage["fileBytes"] >= storage["liveBytes"] > 0
        out = ember("stats", "--node", n.url).stdout
        assert "tree" in out and "2000" in out and "free pages" in out
        js = json.loads(ember("stats", "--node", n.url, "--json").stdout)
        assert js["tables"]["tree"]["entries"] == 2_000
    finally:
        n.stop()


def test_compact_gives_disk_back_and_refuses_a_running_node():
    n = Node().start()
    try:
        load(n, 30_000)
        r = requests.patch(f"{n.url}/items.json?print=silent", headers=ADMIN, timeout=120,
                           data=json.dumps({f"c{i:06d}": None for i in range(9_000)}))
        assert r.status_code == 204, r.text
        for start in (9_000, 18_000):
            requests.patch(f"{n.url}/items.json?print=silent", headers=ADMIN, timeout=120,
                           data=json.dumps({f"c{i:06d}": None for i in range(start, start + 9_000)})).raise_for_status()
        live = requests.get(n.url + "/.ember/status", timeout=10).json()["storage"]["liveBytes"]
        # While the node runs: one clear line, nothing changed.
        p = ember("compact", "--data", n.data_dir, check=False)
        assert p.returncode != 0 and "in use by a running node" in p.stderr and len(p.stderr.strip().splitlines()) == 1
        before_hash = requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"]
    finally:
        n.stop()
    size_before = os.path.getsize(os.path.join(n.data_dir, "data.mdb"))
    res = json.loads(ember("compact", "--data", n.data_dir, "--json").stdout)
    size_after = os.path.getsize(os.path.join(n.data_dir, "data.mdb"))
    assert res["bytesBefore"] == size_before and res["bytesAfter"] == size_after
    assert size_after <= 1.2 * live, (size_after, live, size_before)
    assert size_after < size_before
    n.start()
    try:
        assert requests.get(n.url + "/.ember/status", timeout=10).json()["stateHash"] == before_hash
        assert len(requests.get(f"{n.url}/items.json?shallow=true", timeout=10).json()) == 3_000
    finally:
        n.stop()
