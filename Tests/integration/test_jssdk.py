"""The official Firebase JS SDK against Ember (issue 40).

1. The SDK team's own Realtime Database integration suite, run by `../shared/jssdk/run.sh`
   (`$JSSDK_DIR/run.sh` when set): every test recorded as passing in
   fixtures/jssdk-expected-passes.json must still pass. `JSSDK_RECORD=1` rewrites that file from
   the run (review the diff: a test should only ever be added).
2. Upstream's "disconnect old session on new connection" (skipped upstream as flaky in browsers)
   bundled with its `.skip` removed, run against a node: `ls` must end the old session.
3. Tests of our own that drive the bundled SDK (`OUTDIR/build/sdk.js`) through jssdk/driver.js
   (`jssdk_helpers.Sdk`):
   on a follower of a 3-node cluster (write, listen, transactions, onDisconnect after the follower
   is killed), and with `connectDatabaseEmulator(..., {mockUserToken})` auth.

The harness installs its Debian packages (nodejs, esbuild, mocha, ...) with apt-get when missing.
"""
import json
import os
import subprocess
import time
import uuid
from collections import Counter

import pytest
import requests

from conftest import EMBERD, Node, get, wait_for
from cluster_helpers import module_cluster
from jssdk_helpers import JSSDK_DIR, NODE_ENV, Sdk, SdkError, use_bundle

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "fixtures", "jssdk-expected-passes.json")
LEASE = 3  # seconds (--ondisconnect-lease of the SDK cluster)


class JssdkRun:
    def __init__(self, out, proc, seconds):
        self.out, self.proc, self.seconds = out, proc, seconds
        self.summary = next((l for l in reversed(proc.stdout.splitlines()) if l.startswith("jssdk: ")), None)

    def results(self):
        """Each test file's reporter JSON (`results/<file>.json`) by file name."""
        d = os.path.join(self.out, "results")
        found = {}
        for f in sorted(os.listdir(d)):
            if f.endswith(".test.json"):
                with open(os.path.join(d, f)) as fh:
                    found[f[: -len(".json")]] = json.load(fh)
        return found


@pytest.fixture(scope="session")
def jssdk(tmp_path_factory):
    """One run of the harness (bundles the SDK, runs its suite against a node of $EMBERD)."""
    run_sh = os.path.join(JSSDK_DIR, "run.sh")
    assert os.path.isfile(run_sh), f"the JS SDK harness is missing: {run_sh} (set JSSDK_DIR)"
    out = str(tmp_path_factory.mktemp("jssdk") / "run")
    started = time.monotonic()
    proc = subprocess.run([run_sh, EMBERD, out], capture_output=True, text=True, timeout=1800)
    run = JssdkRun(out, proc, time.monotonic() - started)
    with open(os.path.join(out + ".log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"run.sh exited {proc.returncode} (harness broke):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    assert os.path.isfile(os.path.join(out, "build", "sdk.js")), "run.sh did not bundle sdk.js"
    # The SDK scripts of this session use that bundle instead of making another.
    use_bundle(os.path.join(out, "build", "sdk.js"))
    return run


def test_upstream_suite_keeps_every_test_that_passed(jssdk, capsys):
    results = jssdk.results()
    # Titles as a multiset: a few upstream tests share a full title (each must pass).
    passes = {f: Counter(d["passes"]) for f, d in results.items()}
    with capsys.disabled():
        print(f"\n{jssdk.summary} ({jssdk.seconds:.0f} s)")
    if os.environ.get("JSSDK_RECORD") == "1":
        with open(EXPECTED, "w") as f:
            json.dump({"about": "Tests of the JS SDK's own suite (../shared/jssdk/run.sh) that pass against Ember; "
                                "test_jssdk.py fails if one of them stops passing. JSSDK_RECORD=1 rewrites this file.",
                       "files": {f: sorted(p.elements()) for f, p in sorted(passes.items())}}, f, indent=1)
            f.write("\n")
    with open(EXPECTED) as f:
        expected = json.load(f)["files"]
    lost = []
    for name, titles in expected.items():
        d = results.get(name)
        if d is None:
            lost.append(f"{name}: no results (the mocha process died; see {jssdk.out}/results/{name}.log)")
            continue
        why = {x["title"]: x["message"].split("\n")[0][:200] for x in d["failures"]}
        missing = Counter(titles) - passes[name]
        lost += [f"{name}: {t}: {why.get(t, 'not run (pending or missing)')}" for t in sorted(missing.elements())]
    assert not lost, f"{len(lost)} upstream test(s) that passed now fail ({jssdk.summary}):\n" + "\n".join(lost[:40])
    assert sum(len(t) for t in expected.values()) > 0


def esbuild_test_with_unskipped(jssdk, test_rel, title, outfile):
    """Bundles an upstream test file with `it.skip('<title>'` made `it('<title>'`: the source is
    read here and handed to esbuild on stdin, resolved from the test's own folder (nothing under
    shared/ is written). The flags are those of the harness's build.sh."""
    src = os.path.join(JSSDK_DIR, "src")
    p = os.path.join(src, "packages")
    path = os.path.join(p, test_rel)
    with open(path) as f:
        text = f.read()
    skipped = f"it.skip('{title}'"
    assert text.count(skipped) == 1, f"{test_rel} no longer skips {title!r} (run it from the suite instead)"
    text = f"import '{p}/database/src/index.node.ts';\n" + text.replace(skipped, f"it('{title}'")
    harness = os.path.join(JSSDK_DIR, "harness")
    aliases = {"@firebase/app": "app/src/index.ts", "@firebase/app-compat": "app-compat/src/index.ts",
               "@firebase/util": "util/index.node.ts", "@firebase/logger": "logger/index.ts",
               "@firebase/component": "component/index.ts", "@firebase/database": "database/src/index.node.ts",
               "@firebase/database-compat": "database-compat/src/index.node.ts"}
    cmd = ["esbuild", "--bundle", "--platform=node", "--format=cjs", "--target=node20", "--loader=ts",
           f"--sourcefile={os.path.basename(path)}", f"--tsconfig={harness}/tsconfig.json",
           "--external:faye-websocket", "--external:chai", "--external:chai-as-promised", "--external:lodash",
           "--log-level=warning", f"--alias:idb={harness}/idb-stub.js", f"--outfile={outfile}"]
    cmd += [f"--alias:{k}={p}/{v}" for k, v in aliases.items()]
    subprocess.run(cmd, input=text, text=True, cwd=os.path.dirname(path), check=True, timeout=300)


def test_upstream_disconnect_old_session_on_new_connection(jssdk, node):
    """Upstream's connection test: a second Connection naming the first one's session id (`ls`)
    makes the server close the first (its onDisconnect callback ends the test)."""
    bundle = os.path.join(jssdk.out, "connection-ls.test.js")
    esbuild_test_with_unskipped(jssdk, "database/test/connection.test.ts", "disconnect old session on new connection", bundle)
    env = {**NODE_ENV, "RTDB_EMULATOR_PORT": str(node.port), "RTDB_EMULATOR_NAMESPACE": "t" + uuid.uuid4().hex[:12]}
    proc = subprocess.run(["mocha", "--timeout", "5000", "--exit", "--reporter", "json", bundle],
                          capture_output=True, text=True, env=env, timeout=120)
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    titles = {t["title"]: t for t in report["tests"]}
    assert "disconnect old session on new connection" in {t["title"] for t in report["passes"]}, \
        json.dumps(titles.get("disconnect old session on new connection"), indent=1)[:2000]
    assert report["stats"]["failures"] == 0, [f["title"] + ": " + f["err"].get("message", "") for f in report["failures"]]


@pytest.fixture
def sdk(jssdk, tmp_path):
    s = Sdk(str(tmp_path / "driver.log"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def sdk_cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory, "jssdk-cluster", extra=("--ondisconnect-lease", str(LEASE)))


def test_sdk_on_a_follower_writes_listens_and_transacts(sdk_cluster, sdk):
    c = sdk_cluster
    ns = "t" + uuid.uuid4().hex[:12]
    leader = c.leader()
    f1, f2 = c.followers()
    sdk.call("open", app="f1", url=f"{c.url(f1)}?ns={ns}")
    sdk.call("open", app="f2", url=f"{c.url(f2)}?ns={ns}")
    # Listen on one follower: the first event is the empty location.
    sdk.call("listen", app="f1", path="msgs", sub="msgs")
    assert sdk.event("msgs", lambda v: True) is None
    # A write through the follower is acknowledged once committed: the leader has it.
    sdk.call("set", app="f1", path="msgs/a", value={"text": "hi", "n": 1})
    assert get(c.url(leader), "msgs/a", ns) == {"text": "hi", "n": 1}
    # A write made elsewhere (REST on the leader, the SDK on the other follower) reaches the listener.
    assert requests.put(f"{c.url(leader)}/msgs/b.json?ns={ns}", json="rest", timeout=5).status_code == 200
    sdk.call("update", app="f2", path="msgs", value={"c": True})
    seen = sdk.event("msgs", lambda v: v is not None and {"a", "b", "c"} <= set(v))
    assert seen == {"a": {"text": "hi", "n": 1}, "b": "rest", "c": True}
    # Transactions from both followers at once: each increment lands exactly once.
    ids = [sdk.send("transaction", app=a, path="counter", count=10) for a in ("f1", "f2")]
    assert [sdk.result(i) for i in ids] == [10, 10]
    assert get(c.url(leader), "counter", ns) == 20
    assert sdk.call("get", app="f2", path="counter") == 20
    c.wait_converged()


def test_sdk_ondisconnect_runs_after_its_follower_is_killed(sdk_cluster, sdk):
    """Last in this module: it kills a node of the module's cluster."""
    c = sdk_cluster
    ns = "t" + uuid.uuid4().hex[:12]
    leader = c.leader()
    victim = c.followers()[0]
    sdk.call("open", app="v", url=f"{c.url(victim)}?ns={ns}")
    sdk.call("onDisconnectSet", app="v", path="presence/alice", value="offline")
    sdk.call("set", app="v", path="presence/alice", value="online")
    assert get(c.url(leader), "presence/alice", ns) == "online"
    c.kill9(victim)
    # The SDK cannot reach its node again; the leader runs the session's writes after the lease.
    wait_for("the onDisconnect write, read through the leader",
             lambda: get(c.url(leader), "presence/alice", ns) == "offline")
    other = next(n["id"] for n in c.nodes if n["id"] not in (leader, victim))
    wait_for("the onDisconnect write, read through the other follower",
             lambda: get(c.url(other), "presence/alice", ns) == "offline")


AUTH_RULES = {"rules": {"users": {"$uid": {".read": "auth != null", ".write": "auth != null && auth.uid === $uid"}}}}


@pytest.fixture(scope="module")
def auth_node():
    n = Node(rules=AUTH_RULES).start()
    yield n
    n.stop()


def test_sdk_mock_user_token_from_1970_is_accepted(auth_node, sdk):
    """`connectDatabaseEmulator(db, host, port, {mockUserToken: {sub}})`: an unsigned token with
    `iat` 0 (so `exp` in 1970). The write as alice completes; bob's path is refused by the rules
    (so the token's claims are what the rules saw); a client without a token may not read."""
    n = auth_node
    ns = "t" + uuid.uuid4().hex[:12]
    emulator = {"host": "127.0.0.1", "port": n.port}
    sdk.call("open", app="alice", ns=ns, emulator={**emulator, "mockUserToken": {"sub": "alice"}})
    sdk.call("set", app="alice", path="users/alice/name", value="Alice", timeout=20)
    assert sdk.call("get", app="alice", path="users/alice") == {"name": "Alice"}
    with pytest.raises(SdkError, match="PERMISSION_DENIED"):
        sdk.call("set", app="alice", path="users/bob/name", value="not alice", timeout=20)
    sdk.call("open", app="anon", ns=ns, emulator=emulator)
    with pytest.raises(SdkError, match="(?i)permission"):
        sdk.call("get", app="anon", path="users/alice", timeout=20)
    r = requests.get(f"{n.url}/users.json?ns={ns}", headers={"Authorization": "Bearer owner"}, timeout=5)
    assert r.json() == {"alice": {"name": "Alice"}}
