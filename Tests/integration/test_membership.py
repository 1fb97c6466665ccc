"""Runtime membership changes and leadership transfer on real emberd processes (mutual TLS).

3 nodes -> add n4 (starts empty with --join, catches up by snapshot + log, equal state hash) ->
transfer leadership to a named node -> remove the leader (leadership moves first) -> writes keep
working -> restarts keep the new membership (it is persisted, not taken from the flags).
A follower removed while it is down learns it when it comes back (not-a-member notice).
"""
import base64
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from conftest import EMBERD
from cluster_helpers import ELECTION_TIMEOUT, SCRIPT, Cluster, lc, script

OWNER = {"Authorization": "Bearer owner"}


def unsigned_jwt(claims):
    """A JWT-shaped user token (protected mode reads its claims without a signature check)."""
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': 'none', 'typ': 'JWT'})}.{enc(claims)}.sig"


def admin(url, method, path, body=None, headers=OWNER):
    return requests.request(method, url + path, json=body, headers=headers, timeout=30)


def statuses(c, among):
    return {i: c.status(i) for i in among}


def wait_converged(c, among, timeout=30):
    deadline = time.time() + timeout
    st = {}
    while time.time() < deadline:
        try:
            st = statuses(c, among)
            # appliedIndex is the store's, the other fields Raft's view published at the end of
            # the node's loop turn: a node read between the two has applied an entry (or a
            # snapshot) its role and member lists do not show yet. Its published commit index
            # reaching the applied one says that turn is over.
            if len({s["appliedIndex"] for s in st.values()}) == 1 and len({s["stateHash"] for s in st.values()}) == 1 \
                    and all(s["commitIndex"] >= s["appliedIndex"] for s in st.values()):
                return st
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{among} did not converge: {st}")


def wait_for(predicate, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def add_node(c, node_id):
    out = subprocess.run([sys.executable, SCRIPT, "add-node", "--dir", c.dir, "--id", node_id],
                         check=True, capture_output=True, text=True, env={**os.environ, "EMBERD": EMBERD})
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_range(url, lo, hi, prefix="m"):
    s = requests.Session()
    for i in range(lo, hi):
        r = s.put(f"{url}/{prefix}/{i}.json?print=silent", data=str(i), timeout=15)
        assert r.status_code == 204, r.text


def test_admin_endpoints_refuse_bad_requests(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        url = c.url(c.followers()[0])
        body = {"id": "n9", "address": "127.0.0.1:1"}
        assert admin(url, "POST", "/.ember/members", body, headers={}).status_code == 401
        user = {"Authorization": "Bearer " + unsigned_jwt({"sub": "alice"})}
        r = admin(url, "POST", "/.ember/members", body, headers=user)
        assert r.status_code == 403 and "admin" in r.json()["error"]
        assert admin(url, "POST", "/.ember/members", {"id": "n9"}).status_code == 400
        assert admin(url, "POST", "/.ember/members", {"id": "a/b", "address": "127.0.0.1:1"}).status_code == 400
        assert admin(url, "POST", "/.ember/members", {**body, "clientURL": "ftp://x"}).status_code == 400
        r = requests.post(url + "/.ember/members", data="x" * 5000, headers=OWNER, timeout=10)
        assert r.status_code == 413
        assert admin(url, "POST", "/.ember/members", {"id": "n2", "address": "127.0.0.1:1"}).status_code == 409
        r = admin(url, "DELETE", "/.ember/members/n9")
        assert r.status_code == 404 and "not a member" in r.json()["error"]
        assert admin(url, "POST", "/.ember/leader/transfer", {"to": "n9"}).status_code == 404
        assert admin(url, "GET", "/.ember/members").status_code == 405
        # The member directory's namespace is not client data.
        assert requests.get(f"{url}/members.json?ns=_ember_cluster", timeout=5).status_code == 403
        assert requests.put(f"{url}/x.json?ns=_ember_cluster", data="1", timeout=5).status_code == 403
        # Nothing above changed the cluster.
        assert all(s["voters"] == ["n1", "n2", "n3"] for s in statuses(c, ["n1", "n2", "n3"]).values())
    finally:
        c.down()


def test_add_transfer_remove_and_restart(tmp_path):
    c = Cluster(tmp_path / "c", extra=["--snapshot-entries", "20"])
    try:
        leader = c.leader()
        write_range(c.url(leader), 0, 60)
        assert c.status(leader)["snapshotIndex"] > 0  # n4 cannot catch up from the log alone

        # --- add n4 through a follower (forwarded to the leader) ---
        n4 = add_node(c, "n4")
        st4 = requests.get(n4["url"] + "/.ember/status", timeout=5).json()
        assert st4["member"] is False and st4["voters"] == []
        three = ["n1", "n2", "n3"]
        leader = c.leader(among=three)
        follower = next(i for i in three if i != leader)
        r = admin(c.url(follower), "POST", "/.ember/members",
                  {"id": "n4", "address": n4["peerAddress"], "clientURL": n4["url"]})
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == ["n1", "n2", "n3", "n4"]
        r = admin(c.url(leader), "POST", "/.ember/members", {"id": "n4", "address": n4["peerAddress"]})
        assert r.status_code == 409
        write_range(c.url(follower), 60, 80)
        all4 = ["n1", "n2", "n3", "n4"]
        st = wait_converged(c, all4)
        assert all(s["voters"] == all4 and s["member"] for s in st.values())
        assert st["n4"]["members"]["n4"] == {"peer": n4["peerAddress"], "url": n4["url"]}
        assert requests.get(n4["url"] + "/m.json", timeout=5).json() == list(range(80))
        with open(os.path.join(c.dir, "n4.log"), errors="replace") as f:
            assert "installed snapshot from leader" in f.read()

        # --- leadership transfer to a named node (asked of a node that is not the leader) ---
        asked = next(i for i in all4 if i not in (c.leader(among=all4), "n4"))
        r = admin(c.url(asked), "POST", "/.ember/leader/transfer", {"to": "n4"})
        assert r.status_code == 200, r.text
        assert r.json()["leader"] == "n4"
        assert c.leader(among=all4) == "n4"
        write_range(n4["url"], 80, 90)

        # --- remove the leader: it hands leadership over, then the new leader removes it ---
        # Asked of n1, which the leader picks as its successor when the members are level (most
        # up-to-date, then lowest id): the request comes back to the node that forwarded it.
        wait_converged(c, all4)
        r = admin(c.url("n1"), "DELETE", "/.ember/members/n4")
        assert r.status_code == 200, r.text
        rest = ["n1", "n2", "n3"]
        assert r.json()["voters"] == rest
        new = c.leader(among=rest)
        assert new != "n4"
        wait_for(lambda: c.status("n4")["member"] is False, "n4 to learn it was removed")
        r = requests.put(f"{n4['url']}/m/x.json", data="1", timeout=10)
        assert r.status_code == 503 and "removed" in r.json()["error"]
        write_range(c.url(rest[0]), 90, 100)
        st = wait_converged(c, rest)
        assert all(s["voters"] == rest for s in st.values())
        assert requests.get(c.url("n3") + "/m.json", timeout=5).json() == list(range(100))
        assert admin(c.url(new), "DELETE", "/.ember/members/n4").status_code == 404

        # --- remove a follower, then restart members: the membership comes from their data ---
        victim = next(i for i in rest if i != c.leader(among=rest))
        r = admin(c.url(c.leader(among=rest)), "DELETE", f"/.ember/members/{victim}")
        assert r.status_code == 200, r.text
        two = [i for i in rest if i != victim]
        write_range(c.url(two[0]), 100, 110)
        for i in two:
            os.kill(c.pid(i), signal.SIGTERM)
            deadline = time.time() + 15
            while lc.alive(c.pid(i)) and time.time() < deadline:
                time.sleep(0.05)
            script("start-node", "--dir", c.dir, "--id", i)
        c.leader(among=two, timeout=20)
        st = wait_converged(c, two)
        # The flags still list n1..n4; the persisted directory wins.
        assert all(s["voters"] == two for s in st.values()), st
        write_range(c.url(two[1]), 110, 120)
        wait_converged(c, two)
        assert requests.get(c.url(two[0]) + "/m.json", timeout=5).json() == list(range(120))
    finally:
        c.down()


def handshake_nodes(url):
    """The client URLs a node's WebSocket hello names (its "en" field)."""
    import asyncio
    from wire import WireClient

    async def hello():
        client = await WireClient.connect(url, "hs")
        await client.close()
        return client.hello["d"]["d"]
    d = asyncio.run(asyncio.wait_for(hello(), 20))
    assert {"ts", "v", "h", "s"} <= set(d)
    return d.get("en")


def stop(c, node_id):
    os.kill(c.pid(node_id), signal.SIGTERM)
    deadline = time.time() + 15
    while lc.alive(c.pid(node_id)) and time.time() < deadline:
        time.sleep(0.05)
    assert not lc.alive(c.pid(node_id))


def test_follower_removed_while_down_learns_it_when_back(tmp_path):
    """Stopped, removed, restarted on its stale data (its log still says it is a voter): the
    members refuse its peer connections with a not-a-member notice carrying their committed
    configuration, so it stops campaigning, reports role "removed", refuses writes, and the
    cluster's terms and leader do not move."""
    c = Cluster(tmp_path / "c")
    try:
        three = ["n1", "n2", "n3"]
        leader = c.leader()
        victim = next(i for i in three if i != leader)
        rest = [i for i in three if i != victim]
        write_range(c.url(leader), 0, 10)
        before = wait_converged(c, three)
        # The wire handshake names every member's client URL (Ember's "en", for client failover).
        assert handshake_nodes(c.url(leader)) == sorted(c.url(i) for i in three)
        stop(c, victim)
        r = admin(c.url(leader), "DELETE", f"/.ember/members/{victim}")
        assert r.status_code == 200, r.text
        assert r.json()["voters"] == rest
        write_range(c.url(leader), 10, 20)
        st = wait_converged(c, rest)
        # Removed: no longer named to clients, by the leader or the other member.
        for i in rest:
            assert handshake_nodes(c.url(i)) == sorted(c.url(j) for j in rest)
        terms = {i: st[i]["term"] for i in rest}
        log_path = os.path.join(c.dir, f"{victim}.log")
        log_start = os.path.getsize(log_path)

        script("start-node", "--dir", c.dir, "--id", victim)
        wait_for(lambda: c.status(victim)["role"] == "removed", f"{victim} to learn it was removed", timeout=30)
        back = c.status(victim)
        assert back["member"] is False and back["leader"] is None
        assert back["voters"] == three  # its own log never saw the removal
        assert back["term"] <= max(terms.values())
        r = requests.put(f"{c.url(victim)}/m/x.json", data="1", timeout=10)
        assert r.status_code == 503 and "removed" in r.json()["error"], r.text
        with open(log_path, errors="replace") as f:
            f.seek(log_start)
            assert "removed from the cluster while it was away" in f.read()
        with open(os.path.join(c.dir, f"{leader}.log"), errors="replace") as f:
            assert "told it so" in f.read()

        # Several election timeouts later nothing moved: no campaign reached the cluster.
        time.sleep(5 * ELECTION_TIMEOUT)
        assert c.leader(among=rest) == leader
        assert {i: c.status(i)["term"] for i in rest} == terms
        later = c.status(victim)
        assert later["role"] == "removed" and later["term"] == back["term"]
        write_range(c.url(rest[1]), 20, 25)
        wait_converged(c, rest)
        assert requests.get(c.url(rest[0]) + "/m.json", timeout=5).json() == list(range(25))
        # Its data is as it was when it stopped (same state hash), and it serves none of it: a
        # removed member never catches up, so its reads are refused at once.
        assert c.status(victim)["stateHash"] == before[victim]["stateHash"]
        r = requests.get(c.url(victim) + "/m.json", timeout=5)
        assert r.status_code == 503 and "removed from the cluster" in r.json()["error"], r.text
    finally:
        c.down()
