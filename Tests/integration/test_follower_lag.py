"""A follower that stops catching up shows on the leader (issue 16): `/.ember/status` gives each
follower's lag (leader commit − follower match) and `lagStalledSeconds`, how long that lag has
been nonzero without the follower advancing; `/metrics` exports both per peer."""
import json
import re
import time

import requests

from test_partition import pc  # noqa: F401  (fixture: a 3-node cluster behind netproxy)


def metric(url, name, peer):
    text = requests.get(url + "/metrics", timeout=5).text
    m = re.search(rf'^{name}{{peer="{peer}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def test_stuck_follower_shows_growing_stalled_lag_until_it_catches_up(pc):  # noqa: F811
    leader = pc.leader()
    follower = next(i for i in pc.ids if i != leader)
    url = pc.url(leader)
    for i in range(3):
        assert requests.put(f"{url}/lag/w{i}.json", data=json.dumps(i), timeout=10).status_code == 200
    # The follower acknowledges (and so shows no lag) within a heartbeat or two.
    deadline = time.time() + 10
    while time.time() < deadline:
        p = pc.status(leader)["peers"][follower]
        if p["lag"] == 0:
            break
        time.sleep(0.05)
    assert p["lag"] == 0 and p["lagStalledSeconds"] == 0, p

    # Cut the follower off (silently) and keep committing with the other two.
    for (a, b), link in pc.links.items():
        if follower in (a, b):
            link.set("blackhole")
    for i in range(5):
        assert requests.put(f"{url}/lag/x{i}.json", data=json.dumps(i), timeout=10).status_code == 200
    time.sleep(1.0)
    first = pc.status(leader)["peers"][follower]
    time.sleep(1.0)
    second = pc.status(leader)["peers"][follower]
    assert first["lag"] >= 5 and second["lag"] >= 5, (first, second)
    assert first["lagStalledSeconds"] > 0.5, first
    assert second["lagStalledSeconds"] >= first["lagStalledSeconds"] + 0.5, (first, second)
    assert metric(url, "ember_peer_commit_lag_entries", follower) >= 5
    assert metric(url, "ember_peer_lag_stalled_seconds", follower) > 1.0
    # The healthy follower is not reported stalled.
    other = next(i for i in pc.ids if i not in (leader, follower))
    assert pc.status(leader)["peers"][other]["lagStalledSeconds"] == 0

    pc.heal()
    deadline = time.time() + 20
    while time.time() < deadline:
        p = pc.status(leader)["peers"][follower]
        if p["lag"] == 0 and p["lagStalledSeconds"] == 0:
            break
        time.sleep(0.1)
    assert p["lag"] == 0 and p["lagStalledSeconds"] == 0, p
    assert metric(url, "ember_peer_lag_stalled_seconds", follower) == 0
