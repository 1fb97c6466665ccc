"""Mixed formats: a follower running an emberd from before inline objects and compact index rows
(e.g. main 7450d4b, built with `swift build -c release --product emberd`) is wiped and catches up by
snapshot from a cluster of this version, then applies writes inside inline objects. Run from the
repository root with the integration venv after `make build`:
    .venv/bin/python scripts/mixed-format-follower.py path/to/previous/emberd
Prints whether the nodes converged (same applied index and state hash), the indexed query and
values and ETags on every node."""
import os, sys, time, json, shutil, subprocess, tempfile, requests
sys.path.insert(0, "Tests/integration")
import cluster_helpers as tc
old = sys.argv[1]
d = tempfile.mkdtemp(prefix="s4mixed-")
c = tc.Cluster(os.path.join(d, "c"), extra=["--snapshot-entries", "20"])
try:
    leader = c.leader()
    s = requests.Session()
    rules = {"rules": {".read": True, ".write": True, "items": {".indexOn": ["score"]}}}
    r = s.put(f"{c.url(leader)}/.settings/rules.json", data=json.dumps(rules), headers={"Authorization": "Bearer owner"}, timeout=10)
    print("rules set:", r.status_code, r.text[:100])
    body = {f"c{i:05d}": {"score": i % 97, "name": "n", ".priority": i} for i in range(3000)}
    assert s.patch(f"{c.url(leader)}/items.json?print=silent", data=json.dumps(body), timeout=30).status_code == 204
    for i in range(60):
        assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=json.dumps({"a": i, "b": "x"}), timeout=10).status_code == 204
    leader = c.leader(timeout=60)
    victim = next(n["id"] for n in c.nodes if n["id"] != leader)
    c.kill9(victim)
    shutil.rmtree(os.path.join(c.dir, victim, "data"))
    for i in range(60, 90):
        assert s.put(f"{c.url(leader)}/w/{i}.json?print=silent", data=json.dumps({"a": i, "b": "x"}), timeout=10).status_code == 204
    subprocess.run([sys.executable, tc.SCRIPT, "start-node", "--dir", c.dir, "--id", victim], check=True, env={**os.environ, "EMBERD": old})
    st = c.wait_converged(timeout=90)
    print("converged after snapshot: hashes", {x["stateHash"] for x in st}, "applied", {x["appliedIndex"] for x in st})
    with open(os.path.join(c.dir, f"{victim}.log"), errors="replace") as f:
        installed = "installed snapshot from leader" in f.read()
    print("old follower installed a snapshot:", installed)
    assert installed
    # Writes inside inline objects (explode on the leader; per-leaf writes on the old follower).
    for i in range(0, 90, 7):
        assert s.put(f"{c.url(leader)}/w/{i}/a.json?print=silent", data="-1", timeout=10).status_code == 204
    assert s.patch(f"{c.url(leader)}/items/c00005.json?print=silent", data='{"score": 1000}', timeout=10).status_code == 204
    st = c.wait_converged(timeout=60)
    print("converged after writes inside inline objects:", len({x["stateHash"] for x in st}) == 1)
    q = '/items.json?orderBy="score"&limitToLast=3'
    answers = [requests.get(c.url(n["id"]) + q, timeout=10).json() for n in c.nodes]
    print("indexed query equal on all nodes:", all(a == answers[0] for a in answers), list(answers[0].keys()))
    assert all(a == answers[0] for a in answers) and "c00005" in answers[0] and len(answers[0]) == 3
    ws = [requests.get(c.url(n["id"]) + "/w/7.json", timeout=10).json() for n in c.nodes]
    print("/w/7 on every node:", ws)
    assert ws == [{"a": -1, "b": "x"}] * 3
    etags = [requests.get(c.url(n["id"]) + "/w/8/b.json", headers={"X-Firebase-ETag": "true"}, timeout=10).headers.get("ETag") for n in c.nodes]
    print("ETags of /w/8/b:", etags)
    assert len(set(etags)) == 1 and etags[0]
    print("OK")
finally:
    c.down()
    shutil.rmtree(d, ignore_errors=True)
