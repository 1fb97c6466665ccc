"""A data directory written by an earlier format opens in this emberd (issue 17).

`fixtures/format-7450d4b.tar.gz` is a data directory written by emberd at main 7450d4b (the storage
format before small objects were stored inline and index rows were compacted: one tree record
per leaf, a version row per object written at its own path, index rows with full values), with
the rules it ran with and what that emberd answered (`expected.json`: exports of two namespaces,
ETags — Ember's ETag is the location's version, so equal ETags mean versions carried over — and
index, priority and shallow-paging queries). It was made by a script that wrote 300 children
`{score, name}` under `/items` (`.indexOn score`) in one PATCH, users with a priority, a leaf, a
deep path, a deleted path, a write inside one of the objects, and a second namespace.
This emberd rewrites such small objects as inline records when the directory opens (`Reinline`).
"""
import json
import os
import tarfile

import requests

from conftest import Node

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "format-7450d4b.tar.gz")


def open_fixture(tmp_path):
    with tarfile.open(FIXTURE) as t:
        t.extractall(tmp_path, filter="data")
    with open(tmp_path / "rules.json") as f:
        rules = json.load(f)
    with open(tmp_path / "expected.json") as f:
        expected = json.load(f)
    return Node(data_dir=str(tmp_path / "data"), rules=rules), expected


def answers(node, expected):
    """What the node answers to every request the old emberd answered, as the old one recorded it."""
    got = {"export_default": requests.get(node.url + "/.json?format=export", timeout=10).json(),
           "export_other": requests.get(node.url + "/.json?ns=other&format=export", timeout=10).json(),
           "etags": {p: requests.get(node.url + p + ".json", headers={"X-Firebase-ETag": "true"}, timeout=10).headers.get("ETag")
                     for p in expected["etags"]},
           "queries": {q: requests.get(node.url + q, timeout=10).json() for q in expected["queries"]}}
    return got


def test_a_directory_of_the_format_before_reads_the_same_and_takes_writes(tmp_path):
    node, expected = open_fixture(tmp_path)
    node.start()
    try:
        got = answers(node, expected)
        assert got["export_default"] == expected["export_default"]
        assert got["export_other"] == expected["export_other"]
        assert got["etags"] == expected["etags"]
        assert got["queries"] == expected["queries"]
        # Migrated on open: the small objects the old format kept per leaf (two leaf records and
        # a version row each for the 300 items) are one record each now, answering the same;
        # /items/c0003 (a leaf written later) and /deep/a/b (written below) stay per leaf.
        tables = requests.get(node.url + "/.ember/status", timeout=10).json()["storage"]["tables"]
        assert tables["tree"]["entries"] == 308
        assert tables["versions"]["entries"] == 12

        # Writes inside objects stored the old way, a whole new object (stored the new way), a
        # delete, and an index query that must see all of them.
        u = node.url
        assert requests.patch(u + "/items/c0004.json", json={"score": 2000}, timeout=10).status_code == 200
        assert requests.put(u + "/items/c9999.json", json={"score": 3000, "name": "new"}, timeout=10).status_code == 200
        assert requests.delete(u + "/items/c0003.json", timeout=10).status_code == 200
        top = requests.get(u + '/items.json?orderBy="score"&limitToLast=3', timeout=10).json()
        assert top == {"c9999": {"score": 3000, "name": "new"}, "c0004": {"score": 2000, "name": "n4"},
                       "c0274": {"score": 100, "name": "n274"}}  # ties at 100: last by key
        # The old object's untouched sibling keeps its version; the changed one moved.
        e = lambda p: requests.get(u + p + ".json", headers={"X-Firebase-ETag": "true"}, timeout=10).headers["ETag"]
        assert e("/items/c0005") == "v1"
        assert e("/items/c0004") not in ("v1", expected["etags"]["/items/c0004"])
        assert requests.get(u + "/items/c0004/name.json", timeout=10).json() == "n4"
        # A leaf of an object written whole has that write's version, carried over: a
        # conditional write against it succeeds once, and a second with the same ETag is stale.
        alice = expected["etags"]["/users/alice"]
        assert e("/users/alice/age") == alice
        r = requests.put(u + "/users/alice/age.json", json=32, headers={"if-match": alice}, timeout=10)
        assert r.status_code == 200
        r = requests.put(u + "/users/alice/age.json", json=33, headers={"if-match": alice}, timeout=10)
        assert r.status_code == 412
    finally:
        node.stop()

    # Everything survives a restart of the new binary on the migrated directory.
    node.start()
    try:
        data = requests.get(node.url + "/.json", timeout=10).json()
        assert data["items"]["c9999"] == {"score": 3000, "name": "new"}
        assert "c0003" not in data["items"] and data["items"]["c0004"]["score"] == 2000
        assert data["users"]["alice"]["age"] == 32
        assert len(data["items"]) == 300
    finally:
        node.stop()
    assert node.proc.returncode == 0
