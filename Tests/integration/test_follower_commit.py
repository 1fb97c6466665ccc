"""A follower of a three-node cluster commits a write once its own copy and the leader's are
durable (the leader's "durable through" notice, issue 12) — real processes, real TLS: the peer
links negotiate protocol level 2, followers count the commits they made on the notice, and every
write is readable on every node."""
import json
import time

import requests

from test_partition import pc  # noqa: F401  (fixture: a 3-node cluster behind netproxy)


def test_followers_commit_on_the_leaders_durable_notice(pc):  # noqa: F811
    leader = pc.leader()
    url = pc.url(leader)
    followers = [i for i in pc.ids if i != leader]
    for i in range(100):
        assert requests.put(f"{url}/fc/w{i}.json", data=json.dumps(i), timeout=10).status_code == 200
    # Every link between the nodes of this build speaks level 2.
    for node in pc.ids:
        links = pc.status(node)["links"]
        assert links and all(l["level2"] for l in links.values() if l["connected"]), (node, links)
    inferred = {f: pc.status(f)["commitsInferred"] for f in followers}
    assert sum(inferred.values()) > 0, inferred
    deadline = time.time() + 10
    for node in pc.ids:
        while True:
            got = requests.get(f"{pc.url(node)}/fc.json", timeout=5).json() or {}
            if len(got) == 100 or time.time() > deadline:
                break
            time.sleep(0.05)
        assert got == {f"w{i}": i for i in range(100)}, node
