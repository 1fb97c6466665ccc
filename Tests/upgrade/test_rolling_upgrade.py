"""Rolling upgrade from the previous tagged release to this build (issue 35), run by
`make upgrade-test` (scripts/upgrade-test.sh builds the previous release; not in the default
suite because that build takes ~10 minutes on 2 cores).

A 3-node cluster of the previous release (deploy/local-cluster, mutual TLS) serves a REST writer
(requests), a wire writer (the official JS SDK, `set` over its WebSocket) and two SDK listeners
(child_added on both written locations). Nodes are upgraded one at a time to this build — stop
(SIGTERM), start on the same data with the new binary, wait until it runs the new version and has
caught up — followers first, the leader last after a leadership transfer. Then one node is
downgraded to the previous release, which OPERATIONS.md ("Versions and upgrades") says is
accepted between releases of the same storage format (across a format change its data directory
is wiped first and it rejoins from a snapshot), and catches up again. Checked at the end:
every acknowledged write (REST and wire) is on every node, the state hashes agree, and each
listener saw every child exactly once (none lost, none repeated); the SDK clients reconnected by
themselves. A trigger defined on the previous release delivers the REST writer's children through
every step (its cursors logged in a form every member of the mixed cluster reads: peer protocol
4 gates the new `advance` entry): every acknowledged child is delivered, duplicates keep their
id, every POST is signed. It stays defined through the downgrade: the wiped member of the previous
release is sent a snapshot whose trigger state is in the layout that release reads.
A bulk writer PATCHes ~86 KB bodies (200 children into one of 8 slots): past the REST front's
fast path, so an upgraded leader logs them as JSON text (`updateText`, peer level 5) once every
member speaks level 5, and in tree form while a member of the previous release is in the cluster;
each slot must hold one whole PATCH on every node, no older than its last acknowledged one.

  EMBERD_PREVIOUS  the previous release's emberd (required)
  EMBERD, EMBER    this build's emberd and CLI (default: the debug build)
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import requests

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from cluster_helpers import agreed_leader, converged  # noqa: E402
from conftest import EMBERD, RULES, ROOT  # noqa: E402
from jssdk_helpers import finish_sdk_script, spawn_sdk_script  # noqa: E402
from test_triggers import SECRET, Receiver  # noqa: E402

PREVIOUS = os.environ.get("EMBERD_PREVIOUS")
EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
SCRIPT = os.path.join(ROOT, "deploy", "local-cluster")
NS = "upgrade"
OWNER = {"Authorization": "Bearer owner"}
# A node back from a restart: ready, on the expected build, caught up with the leader.
CATCH_UP_TIMEOUT = 60
# Writes made between two steps, so each step runs under load.
WRITES_PER_STEP = 150
# A trigger on the REST writer's children, defined on the previous release and delivering through
# every step: its cursor moves are logged in a form each member of the mixed cluster reads
# (OPERATIONS.md: the new `advance` entry waits until every member speaks peer protocol 4).
# The bulk writer: BULK_CHILDREN children of BULK_VALUE_BYTES each into one of BULK_SLOTS slots,
# ~86 KB a PATCH: past the REST front's 64 KiB fast path, so the text scan takes it.
BULK_SLOTS = 8
BULK_CHILDREN = 200
BULK_VALUE_BYTES = 400
TRIGGER = {"up": {"path": "/up/rest/{k}", "on": ["created"], "secret": SECRET, "batchSize": 20,
                  "backoffMs": 20, "maxBackoffMs": 500, "retries": 1000}}

def run(*args, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def version(binary):
    r = subprocess.run([binary, "--version"], capture_output=True, text=True)
    # The previous release predates --version: it has none (and says so).
    return r.stdout.split()[1] if r.returncode == 0 and r.stdout.startswith("emberd ") else None


def storage_format(binary):
    r = subprocess.run([binary, "--version"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("storage format "):
            return int(line.split()[2])
    return None


class Cluster:
    def __init__(self, dir_):
        self.dir = dir_
        rules = os.path.join(dir_ + "-rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        # Certificates from this build's CLI (the previous release's tree built emberd only).
        run(sys.executable, SCRIPT, "up", "--nodes", "3", "--dir", dir_, "--emberd", PREVIOUS, "--rules", rules,
            env={**os.environ, "EMBER": EMBER})
        with open(os.path.join(dir_, "cluster.json")) as f:
            self.urls = {n["id"]: n["url"] for n in json.load(f)["nodes"]}

    def status(self, node):
        return requests.get(self.urls[node] + "/.ember/status", timeout=3).json()

    def leader(self, among=None):
        return agreed_leader(self.status, among or sorted(self.urls), 30)

    def restart(self, node, binary, wipe=False):
        run(sys.executable, SCRIPT, "stop-node", "--dir", self.dir, "--id", node)
        if wipe:
            # An empty data directory: the node rejoins from the leader's snapshot.
            data = os.path.join(self.dir, node, "data")
            shutil.rmtree(data)
            os.makedirs(data)
        run(sys.executable, SCRIPT, "start-node", "--dir", self.dir, "--id", node, "--emberd", binary)
        want = version(binary)
        deadline = time.time() + CATCH_UP_TIMEOUT
        while time.time() < deadline:
            try:
                s = self.status(node)
                build = (s.get("build") or {}).get("version")
                leader = s.get("leader")
                if build == want and leader and requests.get(self.urls[node] + "/readyz", timeout=3).status_code == 200:
                    lead = self.status(leader)
                    if s["appliedIndex"] >= lead["commitIndex"] - WRITES_PER_STEP:
                        return
            except (requests.RequestException, KeyError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"{node} did not come back on {binary} and catch up")

    def down(self):
        subprocess.run([sys.executable, SCRIPT, "down", "--dir", self.dir], capture_output=True)


SDK_CLIENTS = """
const { initializeApp, getDatabase, ref, set, get, onChildAdded, goOffline } = sdk;
const writer = getDatabase(initializeApp({ databaseURL: `${args.writer}?ns=${args.ns}` }, "writer"));
const listeners = args.listeners.map((url, i) =>
  getDatabase(initializeApp({ databaseURL: `${url}?ns=${args.ns}` }, `listener${i}`)));
const seen = listeners.map(() => ({ rest: {}, wire: {} }));
listeners.forEach((db, i) => {
  for (const kind of ["rest", "wire"]) {
    onChildAdded(ref(db, `up/${kind}`), (s) => { seen[i][kind][s.key] = (seen[i][kind][s.key] || 0) + 1; });
  }
});
let stop = false;
stdinLine().then(() => { stop = true; });
const acked = [], failed = [];
for (let i = 0; !stop; i++) {
  const key = `k${String(i).padStart(6, "0")}`;
  // One write at a time: while the node is away the SDK holds it and sends it on reconnect.
  await set(ref(writer, `up/wire/${key}`), i).then(() => acked.push(key), (e) => failed.push([key, String(e)]));
  await new Promise((r) => setTimeout(r, 10));
}
// Everything the cluster holds, then wait until both listeners saw all of it.
const final = (await get(ref(listeners[0], "up"))).val() || {};
const want = { rest: Object.keys(final.rest || {}), wire: Object.keys(final.wire || {}) };
const deadline = Date.now() + 30000;
const complete = () => seen.every((s) => ["rest", "wire"].every((k) => want[k].every((key) => s[k][key])));
while (!complete() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
listeners.forEach(goOffline); goOffline(writer);
result({ acked, failed, seen, want });
"""


def test_rolling_upgrade_then_downgrade_of_one_node(tmp_path):
    assert PREVIOUS, "set EMBERD_PREVIOUS to the previous release's emberd (make upgrade-test builds it)"
    new_version = version(EMBERD)
    assert new_version, "this build must answer --version"
    assert version(PREVIOUS) != new_version, "EMBERD_PREVIOUS must be another release"
    c = Cluster(str(tmp_path / "c"))
    receiver = Receiver()
    acked_rest = {}
    stop = threading.Event()
    rest_errors = []

    def rest_writer():
        i = 0
        while not stop.is_set():
            node = sorted(c.urls)[i % 3]
            key = f"r{i:06d}"
            try:
                r = requests.put(f"{c.urls[node]}/up/rest/{key}.json?ns={NS}", data=str(i), timeout=5)
                if r.status_code == 200:
                    acked_rest[key] = i
                elif r.status_code not in (503, 504):
                    rest_errors.append((node, r.status_code, r.text))
            except requests.RequestException:
                pass  # a node stopping or starting: not acknowledged
            i += 1
            time.sleep(0.01)

    # Slot -> the generation of its newest acknowledged PATCH; a PATCH whose answer did not
    # come (a node stopping) may still have landed, so a slot may hold a newer generation.
    acked_bulk = {}

    def bulk_writer():
        i = 0
        while not stop.is_set():
            node = sorted(c.urls)[i % 3]
            slot = f"s{i % BULK_SLOTS}"
            gen = i
            body = {f"{slot}/c{j:03d}": f"{gen:08d}" + "x" * (BULK_VALUE_BYTES - 8) for j in range(BULK_CHILDREN)}
            try:
                r = requests.patch(f"{c.urls[node]}/up/bulk.json?ns={NS}", data=json.dumps(body), timeout=10)
                if r.status_code == 200:
                    acked_bulk[slot] = gen
                elif r.status_code not in (503, 504):
                    rest_errors.append((node, r.status_code, r.text[:300]))
            except requests.RequestException:
                pass
            i += 1
            time.sleep(0.05)

    t = threading.Thread(target=rest_writer)
    tb = threading.Thread(target=bulk_writer)
    try:
        run_steps(c, receiver, acked_rest, stop, rest_errors, t, tb, acked_bulk)
    finally:
        receiver.close()
        c.down()


def run_steps(c, receiver, acked_rest, stop, rest_errors, t, tb, acked_bulk):
    sdk = None
    new_version = version(EMBERD)

    def writes_go_on():
        start = len(acked_rest)
        deadline = time.time() + CATCH_UP_TIMEOUT
        while len(acked_rest) < start + WRITES_PER_STEP:
            assert time.time() < deadline, "the REST writer made no progress"
            time.sleep(0.05)

    try:
        leader = c.leader()
        doc = {name: {**d, "url": receiver.url} for name, d in TRIGGER.items()}
        r = requests.put(f"{c.urls[leader]}/.settings/triggers.json?ns={NS}", data=json.dumps(doc), headers=OWNER, timeout=10)
        assert r.status_code == 200, r.text
        followers = [n for n in sorted(c.urls) if n != leader]
        # The SDK writer talks to one follower, the listeners to the other follower and the leader.
        sdk = spawn_sdk_script(SDK_CLIENTS, {"ns": NS, "writer": c.urls[followers[0]],
                                             "listeners": [c.urls[followers[1]], c.urls[leader]]})
        t.start()
        tb.start()
        writes_go_on()
        steps = []
        for node in followers:
            c.restart(node, EMBERD)
            steps.append(f"{node} (follower) upgraded")
            writes_go_on()
        run(EMBER, "leader", "transfer", "--node", c.urls[followers[0]], "--to", followers[0], "--token", "owner")
        new_leader = c.leader()
        assert new_leader != leader
        c.restart(leader, EMBERD)
        steps.append(f"{leader} (leader, after a transfer to {new_leader}) upgraded")
        writes_go_on()
        assert {c.status(n)["build"]["version"] for n in c.urls} == {new_version}
        # Downgrade one follower to the previous release: accepted on the same data between
        # releases of one storage format; across a format change the older build refuses the
        # directory, so (OPERATIONS.md) it is wiped and the node rejoins from the leader's
        # snapshot.
        # The member going back is the SDK writer's (no listener on it): a member of the previous
        # release serves clients from its state before it has caught up (OPERATIONS.md: keep
        # clients off it until /readyz passes), so a listener reconnecting to it while it
        # catches up from empty sees its children go and come back. Leadership moves off it first.
        back = followers[0]
        if c.leader() == back:
            other = next(n for n in sorted(c.urls) if n != back)
            run(EMBER, "leader", "transfer", "--node", c.urls[back], "--to", other, "--token", "owner")
            assert c.leader() != back
        wipe = storage_format(PREVIOUS) != storage_format(EMBERD)
        # The trigger stays defined: a wiped member of the previous release is sent a snapshot
        # with trigger state in the layout it reads (peer level 3), and it applies every write
        # after it (the state hashes below) while the trigger goes on delivering.
        c.restart(back, PREVIOUS, wipe=wipe)
        steps.append(f"{back} downgraded to the previous release" + (" (data wiped, rejoined by snapshot)" if wipe else ""))
        writes_go_on()
        print("\n".join(steps))
    finally:
        stop.set()
        for th in (t, tb):
            if th.is_alive():
                th.join(30)
        if sdk is not None:
            sdk_result = finish_sdk_script(sdk, "stop\n", timeout=120)
    assert not rest_errors, rest_errors[:5]
    assert len(acked_bulk) == BULK_SLOTS, f"bulk PATCHes acknowledged only into {sorted(acked_bulk)}"
    st = converged(c.status, sorted(c.urls), 60)
    assert len({s["stateHash"] for s in st}) == 1
    held = {"rest": set(), "wire": set()}
    for node, url in c.urls.items():
        data = requests.get(f"{url}/up.json?ns={NS}", timeout=10).json() or {}
        for kind in held:
            held[kind] |= set((data.get(kind) or {}).keys())
        bulk = data.get("bulk") or {}
        for slot, gen in acked_bulk.items():
            children = bulk.get(slot) or {}
            gens = {v[:8] for v in children.values()}
            assert len(children) == BULK_CHILDREN and len(gens) == 1, \
                f"{node}: bulk slot {slot} is not one whole PATCH ({len(children)} children, generations {sorted(gens)[:5]})"
            assert int(gens.pop()) >= gen, f"{node}: bulk slot {slot} is older than its acknowledged PATCH {gen}"
        lost = [k for k, v in acked_rest.items() if (data.get("rest") or {}).get(k) != v]
        assert not lost, f"{node} lost {len(lost)} acknowledged REST writes, e.g. {lost[:5]}"
        lost = [k for k in sdk_result["acked"] if k not in (data.get("wire") or {})]
        assert not lost, f"{node} lost {len(lost)} acknowledged wire writes, e.g. {lost[:5]}"
    # A wire write through a member that restarts may come back "outcome unknown" (the member
    # lost track of it, it may have committed): the only failure a write may have. Whether it
    # landed shows in the state every node holds.
    unknown = [k for k, e in sdk_result["failed"] if "outcome is unknown" in e]
    assert len(unknown) == len(sdk_result["failed"]), [f for f in sdk_result["failed"] if f[0] not in unknown][:5]
    for i, seen in enumerate(sdk_result["seen"]):
        for kind in ("rest", "wire"):
            want = set(sdk_result["want"][kind])
            missing = want - set(seen[kind])
            repeated = [k for k, n in seen[kind].items() if n != 1]
            # `want` is the SDK's read when its writer stopped; a write of unknown outcome may
            # land after that read: a child seen is extra only when no node holds it now.
            extra = set(seen[kind]) - want - held[kind]
            assert not missing, f"listener {i} lost {len(missing)} {kind} events, e.g. {sorted(missing)[:5]}"
            assert not repeated, f"listener {i} saw {kind} children twice: {repeated[:5]}"
            assert not extra, f"listener {i} saw {kind} children the cluster does not hold: {sorted(extra)[:5]}"
    # The trigger delivered every acknowledged REST child, through every step.
    due = {f"/up/rest/{k}" for k in acked_rest}
    deadline = time.time() + CATCH_UP_TIMEOUT
    while not due <= {e["ref"] for e in receiver.received()}:
        missing = due - {e["ref"] for e in receiver.received()}
        assert time.time() < deadline, f"the trigger did not deliver {len(missing)} acknowledged writes, e.g. {sorted(missing)[:5]}"
        time.sleep(0.2)
    # At least once: a duplicate (after a leader change) carries the same id; every POST
    # was signed with the trigger's secret.
    got = receiver.received()
    ids = {}
    for e in got:
        assert ids.setdefault(e["ref"], e["id"]) == e["id"], f"a duplicate of {e['ref']} with another id"
    assert receiver.bad_signatures == 0
    print(f"acknowledged: {len(acked_rest)} REST, {len(sdk_result['acked'])} wire writes; "
          f"listeners saw {[sum(len(s[k]) for k in s) for s in sdk_result['seen']]} children; "
          f"the trigger delivered {len(due)} events ({len(got)} POSTed with resends)")
