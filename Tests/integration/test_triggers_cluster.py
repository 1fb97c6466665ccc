"""Trigger delivery across a leader's kill -9 and a whole-cluster restart (issue 36): delivery
resumes from the replicated cursor; every committed event arrives, in log order, duplicates only
with the same id."""
import json
import time

import pytest
import requests

from cluster_helpers import Cluster, script
from conftest import wait_for
from test_triggers import OWNER, SECRET, Receiver


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_new_leader_resumes_delivery_after_kill9(tmp_path, receiver):
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        url = c.url(leader)
        ns = "kt"
        doc = {"seq": {"path": "/seq/{n}", "on": ["created"], "url": receiver.url, "secret": SECRET,
                       "backoffMs": 20, "maxBackoffMs": 200, "retries": 1000}}
        assert requests.put(f"{url}/.settings/triggers.json?ns={ns}", data=json.dumps(doc), headers=OWNER, timeout=10).status_code == 200
        receiver.delay = 0.1  # slow: most events are still undelivered when the leader dies
        for i in range(20):
            assert requests.put(f"{url}/seq/{i:03}.json?ns={ns}", json=i, timeout=10).status_code == 200
        wait_for("a first delivery", lambda: receiver.received())
        c.kill9(leader)
        assert len(receiver.received()) < 20, "the leader died with events still undelivered"

        survivors = [n["id"] for n in c.nodes if n["id"] != leader]
        new = c.leader(among=survivors, timeout=30)
        new_url = c.url(new)
        for i in range(20, 30):
            assert requests.put(f"{new_url}/seq/{i:03}.json?ns={ns}", json=i, timeout=10).status_code == 200
        receiver.delay = 0
        wait_for("every event", lambda: len(set(e["ref"] for e in receiver.received())) >= 30)
        got = receiver.received()
        firsts = list(dict.fromkeys(e["ref"] for e in got))
        assert firsts == [f"/seq/{i:03}" for i in range(30)], "every committed event, in log order"
        ids = {}
        for e in got:
            assert ids.setdefault(e["ref"], e["id"]) == e["id"], "a duplicate carries the same id"
        # The new leader's status shows the trigger drained.
        wait_for("outbox drained", lambda: requests.get(f"{new_url}/.ember/status", timeout=5).json()["triggers"][ns]["seq"]["pending"] == 0)

        # The whole cluster stopped with events undelivered, then started: the same.
        receiver.status = 503
        for i in range(30, 40):
            assert requests.put(f"{new_url}/seq/{i:03}.json?ns={ns}", json=i, timeout=10).status_code == 200
        c.down()
        for n in c.nodes:
            script("start-node", "--dir", c.dir, "--id", n["id"])
        receiver.status = 200
        wait_for("every event after the restart", lambda: len(set(e["ref"] for e in receiver.received())) >= 40)
        got = receiver.received()
        assert list(dict.fromkeys(e["ref"] for e in got)) == [f"/seq/{i:03}" for i in range(40)]
        for e in got:
            assert ids.setdefault(e["ref"], e["id"]) == e["id"], "a duplicate carries the same id"
    finally:
        c.down()
