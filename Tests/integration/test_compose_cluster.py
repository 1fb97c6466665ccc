"""The repository's docker-compose.yml started for real (issue 35): the image built by
scripts/image.sh, a Docker engine installed and started by scripts/docker-engine.sh when the
machine has none, and the 3-node TLS cluster exercised through its published ports as a user
would: `ember status`, firebase-admin, SSE, the official JS SDK, a killed leader, down/up, and a
backup taken from the host.

The image is built from the binaries this suite tests ($EMBERD's directory: the debug build,
with the toolchain libraries it loads), so the suite does not wait for a release build; the
Dockerfile's runtime stage is the one `make image` uses. The compose file is used as it is;
deploy/compose-nofile.yml is added only where the engine's hard open-file limit is below what
the file asks for, exactly as the README says. What the test started (containers, networks,
volumes, the image, the engine) it removes at the end.
"""
import hashlib
import json
import os
import re
import subprocess
import threading
import time

import pytest
import requests

from cluster_helpers import agreed_leader, converged
from conftest import EMBERD, ROOT, Node, wait_for
from jssdk_helpers import run_sdk_script

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
PROJECT = "embercompose"
IMAGE = "ember:compose-test"
NODES = ["n1", "n2", "n3"]
URLS = {"n1": "http://127.0.0.1:9001", "n2": "http://127.0.0.1:9002", "n3": "http://127.0.0.1:9003",
        "l1": "http://127.0.0.1:9004"}  # l1: the optional learner (profile "learners")
# What docker-compose.yml asks each node's open-file limit to be.
COMPOSE_NOFILE = 1048576
# A healthy cluster from `up -d` (three containers starting, an election, health checks every 5 s).
UP_TIMEOUT = 180
SHORT = 10
# A node started by the test on loopback runs in protected mode: `owner` is admin there.
OWNER = {"Authorization": "Bearer owner"}


def sh(args, check=True, timeout=300, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def engine_hard_nofile():
    """The hard open-file limit the Docker engine (and so every container) runs under."""
    pid = sh(["pidof", "dockerd"]).stdout.split()[0]
    with open(f"/proc/{pid}/limits") as f:
        line = next(l for l in f if l.startswith("Max open files"))
    return int(line.split()[4]) if line.split()[4] != "unlimited" else 1 << 62


class Compose:
    def __init__(self, docker):
        self.docker = docker
        self.files = ["-f", os.path.join(ROOT, "docker-compose.yml")]
        if engine_hard_nofile() < COMPOSE_NOFILE:
            self.files += ["-f", os.path.join(ROOT, "deploy", "compose-nofile.yml")]
        self.env = {**os.environ, "EMBER_IMAGE": IMAGE}
        # docker-compose 1.29 talks to the engine's API itself; the client choice is only ours.
        self.env.pop("DOCKER_HOST", None)
        self.token = None

    def __call__(self, *args, check=True, timeout=300):
        return sh(["docker-compose", "-p", PROJECT, *self.files, *args], check=check, timeout=timeout,
                  env=self.env, cwd=ROOT)

    def container(self, service):
        out = self("ps", "-a", "-q", service).stdout.split()
        assert len(out) == 1, f"{service}: {out}"
        return out[0]

    def inspect(self, service):
        return json.loads(sh([self.docker, "inspect", self.container(service)]).stdout)[0]

    def wait_healthy(self, services=NODES, timeout=UP_TIMEOUT):
        deadline = time.time() + timeout
        states = {}
        while time.time() < deadline:
            states = {s: self.inspect(s)["State"].get("Health", {}).get("Status") for s in services}
            if all(v == "healthy" for v in states.values()):
                return
            time.sleep(1)
        logs = self("logs", "--tail", "30", check=False).stdout
        raise AssertionError(f"not healthy within {timeout} s: {states}\n{logs}")

    def auth(self):
        return {"Authorization": f"Bearer {self.token}"}

    def status(self, node):
        return requests.get(URLS[node] + "/.ember/status", headers=self.auth(), timeout=5).json()


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    for node, url in URLS.items():
        port = int(url.rsplit(":", 1)[1])
        with __import__("socket").socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} (published for {node}) is in use"
    docker = sh([os.path.join(ROOT, "scripts", "docker-engine.sh"), "ensure"], timeout=600).stdout.strip()
    c = Compose(docker)
    try:
        started = time.time()
        sh([os.path.join(ROOT, "scripts", "image.sh"), "--binaries", os.path.dirname(EMBERD), "--tag", IMAGE],
           timeout=1200)
        print(f"\ncompose: image built in {time.time() - started:.0f} s")
        c("down", "-v", "--remove-orphans", check=False)
        started = time.time()
        c("up", "-d")
        c.wait_healthy()
        print(f"compose: healthy in {time.time() - started:.0f} s")
        c.token = c("exec", "-T", "n1", "cat", "/certs/admin.token").stdout.strip()
        assert len(c.token) >= 32
        c.dir = tmp_path_factory.mktemp("compose")
        c.token_file = str(c.dir / "admin.token")
        with open(c.token_file, "w") as f:
            f.write(c.token + "\n")
        yield c
    finally:
        # Everything the test made, even when setting up failed half-way.
        c("down", "-v", "--remove-orphans", check=False)
        sh([docker, "rmi", "-f", IMAGE], check=False)
        sh([os.path.join(ROOT, "scripts", "docker-engine.sh"), "stop"], check=False)


def test_up_gives_three_healthy_members_and_one_leader(compose):
    # The certs job ran once and succeeded; the nodes started after it.
    certs = compose.inspect("certs")["State"]
    assert certs["Status"] == "exited" and certs["ExitCode"] == 0, certs
    r = sh([EMBER, "status", "--node", URLS["n1"], "--token-file", compose.token_file, "--json"])
    out = json.loads(r.stdout)
    assert sorted(n["id"] for n in out["nodes"]) == NODES
    assert [n["role"] for n in out["nodes"]].count("leader") == 1
    assert out["leader"] in NODES
    # Every member names the build it runs (the image's).
    assert {n["build"]["version"] for n in out["nodes"]} == {version_of(EMBERD)}
    # The README's command as it stands: the token read from the certs volume through a pipe.
    table = sh(["bash", "-c", f"{EMBER} status --node {URLS['n2']} --token-file <(docker-compose -p {PROJECT} "
                f"{' '.join(compose.files)} exec -T n1 cat /certs/admin.token)"], env=compose.env, cwd=ROOT).stdout
    assert "VERSION" in table.splitlines()[0] and table.count("leader") == 1, table


def version_of(binary):
    first = sh([binary, "--version"]).stdout.splitlines()[0]
    return first.split()[1]


def curl_in(compose, network, *args, volume=None):
    """curl run in a throwaway container of the image on one of the project's networks."""
    mount = ["-v", f"{volume}:/probe:ro"] if volume else []
    return sh([compose.docker, "run", "--rm", "--network", f"{PROJECT}_{network}", *mount,
               "--entrypoint", "curl", IMAGE, "-sv", "--max-time", "5", *args], check=False, timeout=60)


def test_peers_talk_mutual_tls_on_the_internal_network_only(compose, tmp_path):
    # From the clients network the peer port is closed: n1 resolves there to its clients-network
    # address, where nothing listens on 7000, and the peers-only alias does not resolve at all.
    r = curl_in(compose, "clients", "-k", "https://n1:7000/")
    assert r.returncode == 7, (r.returncode, r.stderr[-600:])  # 7: could not connect
    r = curl_in(compose, "clients", "-k", "https://n1-peer:7000/")
    assert r.returncode == 6, (r.returncode, r.stderr[-600:])  # 6: could not resolve host
    # On the peers network: a certificate of another CA, even one naming a member, is refused.
    sh([EMBER, "certs", "init", "--out", str(tmp_path / "other"), "--nodes", "n1,n2,n3"])
    os.chmod(tmp_path / "other", 0o755)
    for f in os.listdir(tmp_path / "other"):
        os.chmod(tmp_path / "other" / f, 0o644)
    r = curl_in(compose, "peers", "-k", "--no-alpn", "--cert", "/probe/n2.pem", "--key", "/probe/n2.key",
                "https://n1-peer:7000/", volume=str(tmp_path / "other"))
    assert r.returncode != 0
    assert re.search(r"unknown ca|certificate unknown|bad certificate|decrypt error", r.stderr, re.I), r.stderr[-800:]
    # And no certificate at all.
    r = curl_in(compose, "peers", "-k", "--no-alpn", "https://n1-peer:7000/")
    assert r.returncode != 0
    assert re.search(r"certificate required|handshake failure|alert", r.stderr, re.I), r.stderr[-800:]
    # The cluster's own certificate gets through the TLS handshake (the peer protocol then
    # refuses an HTTP request; what matters is that the handshake and verification passed).
    volume = f"{PROJECT}_certs"
    r = curl_in(compose, "peers", "-k", "--no-alpn", "--cert", "/probe/n2.pem", "--key", "/probe/n2.key",
                "https://n1-peer:7000/", volume=volume)
    assert "SSL connection using TLSv1.3" in r.stderr, r.stderr[-800:]
    assert not re.search(r"unknown ca|certificate required|bad certificate", r.stderr, re.I), r.stderr[-800:]


def admin_app(compose, monkeypatch, node, name):
    """firebase-admin bound to one node. In emulator mode (an http URL) firebase-admin always
    presents the credential `owner`, which a node in verified mode takes only from trusted
    addresses; through Docker's published ports the host is not loopback to the node, so the
    test presents the cluster's admin token in its place (what a deployment's app server does
    with --admin-token-file or an app token)."""
    import firebase_admin
    from firebase_admin import _utils
    token = compose.token

    class AdminToken(_utils.EmulatorAdminCredentials):
        def __init__(self):
            super().__init__()
            self.token = token

    # For this test only (monkeypatch restores it): the suite's other firebase-admin apps talk to
    # local nodes, where `owner` is the admin.
    monkeypatch.setattr(_utils, "EmulatorAdminCredentials", AdminToken)
    return firebase_admin.initialize_app(options={"databaseURL": f"{URLS[node]}?ns=compose"}, name=name)


def sse_events(url, headers, want, timeout=SHORT):
    """Reads an SSE stream until `want(event, data)` is true; returns the events read."""
    seen = []
    with requests.get(url, headers={**headers, "Accept": "text/event-stream"}, stream=True, timeout=timeout) as r:
        assert r.status_code == 200, r.text
        event = None
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:].strip())
                seen.append((event, data))
                if want(event, data):
                    return seen
    raise AssertionError(f"stream ended first: {seen}")


def test_firebase_admin_through_n1_and_n3_and_sse_on_n2(compose, monkeypatch):
    from firebase_admin import db, delete_app
    a1, a3 = admin_app(compose, monkeypatch, "n1", "compose-n1"), admin_app(compose, monkeypatch, "n3", "compose-n3")
    try:
        stream = URLS["n2"] + "/fa/msg.json?ns=compose"
        got = {}
        ready = threading.Event()

        def listen():
            def want(event, data):
                ready.set()
                return event == "put" and data.get("data") == {"text": "hello from n1"}
            got["events"] = sse_events(stream, compose.auth(), want)

        t = threading.Thread(target=listen)
        t.start()
        # The first event (the current value, null) says the stream is registered on n2.
        assert ready.wait(SHORT)
        db.reference("fa/msg", app=a1).set({"text": "hello from n1"})
        t.join(SHORT)
        assert not t.is_alive() and got["events"][-1][1]["data"] == {"text": "hello from n1"}
        # Read-your-writes through another node: n3 answers once it has applied the write.
        assert db.reference("fa/msg", app=a3).get() == {"text": "hello from n1"}
        db.reference("fa/list", app=a3).push({"n": 3})
        assert list(db.reference("fa/list", app=a1).get().values()) == [{"n": 3}]
    finally:
        delete_app(a1)
        delete_app(a3)


def test_the_official_js_sdk_sees_a_write_made_at_another_node(compose):
    # Public rules on one location: the SDK connects without credentials, as an app would.
    rules = {"rules": {".read": "auth != null", ".write": "auth != null",
                       "sdk": {".read": True, ".write": True}}}
    r = requests.put(URLS["n1"] + "/.settings/rules.json?ns=compose", headers=compose.auth(),
                     data=json.dumps(rules), timeout=SHORT)
    assert r.status_code == 200, r.text
    out = run_sdk_script("""
        const { initializeApp, getDatabase, ref, onValue, set, goOffline } = sdk;
        const app = initializeApp({ databaseURL: `${args.n3}?ns=compose` }, "compose-js");
        const db = getDatabase(app);
        const seen = [];
        await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error("no event: " + JSON.stringify(seen))), 15000);
          onValue(ref(db, "sdk/greeting"), (s) => {
            seen.push(s.val());
            if (seen.length === 1) {
              // Registered on n3 (the first event): now write at n1 over REST.
              fetch(`${args.n1}/sdk/greeting.json?ns=compose`, { method: "PUT", body: '"from n1"' })
                .catch(reject);
            }
            if (s.val() === "from n1") { clearTimeout(timer); resolve(); }
          }, reject);
        });
        goOffline(db);
        result(seen);
    """, {"n1": URLS["n1"], "n3": URLS["n3"]})
    assert out[-1] == "from n1" and out[0] in (None, "from n1"), out


def test_killing_the_leader_under_a_writer_loses_no_acknowledged_write(compose):
    leader = agreed_leader(compose.status, NODES, SHORT)
    acked = {}
    stop = threading.Event()
    errors = []

    def writer():
        i = 0
        while not stop.is_set():
            node = NODES[i % 3]
            key = f"w{i:06d}"
            try:
                r = requests.put(f"{URLS[node]}/kill/{key}.json?ns=compose", headers=compose.auth(),
                                 data=str(i), timeout=5)
                if r.status_code == 200:
                    acked[key] = i
                elif r.status_code not in (503, 504):
                    errors.append((node, r.status_code, r.text))
            except requests.RequestException:
                pass  # the killed node, or an answer lost with it: not acknowledged
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for("writes before the kill", lambda: len(acked) >= 50)
        sh([compose.docker, "kill", compose.container(leader)])
        before = len(acked)
        survivors = [n for n in NODES if n != leader]
        new_leader = agreed_leader(compose.status, survivors, 30)
        assert new_leader != leader
        wait_for("writes after the new leader took over", lambda: len(acked) >= before + 50)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors[:5]
    compose("start", leader)
    compose.wait_healthy()
    st = converged(compose.status, NODES, 60)
    assert len({s["stateHash"] for s in st}) == 1
    for node in NODES:
        data = requests.get(f"{URLS[node]}/kill.json?ns=compose", headers=compose.auth(), timeout=SHORT).json() or {}
        lost = [k for k, v in acked.items() if data.get(k) != v]
        assert not lost, f"{node} lost {len(lost)} acknowledged writes, e.g. {lost[:5]}"


def test_backup_from_the_host_restores_into_a_fresh_node(compose, tmp_path):
    r = requests.put(URLS["n2"] + "/backup/marker.json?ns=compose", headers=compose.auth(), data='"kept"', timeout=SHORT)
    assert r.status_code == 200
    out = tmp_path / "cluster.backup"
    sh([EMBER, "backup", "--node", URLS["n3"], "--token-file", compose.token_file, "--out", str(out)])
    expected = requests.get(URLS["n3"] + "/.json?ns=compose&format=export", headers=compose.auth(), timeout=SHORT).json()
    data = tmp_path / "restored"
    sh([EMBER, "restore", "--in", str(out), "--data", str(data)])
    n = Node(data_dir=str(data)).start()
    try:
        # The backup carries the namespace's rules too (they refuse anonymous reads): read as admin.
        got = requests.get(n.url + "/.json?ns=compose&format=export", headers=OWNER, timeout=SHORT).json()
        assert got == expected
        assert got["backup"]["marker"] == "kept"
    finally:
        n.stop()


def test_the_learners_profile_adds_a_learner_that_serves_reads_and_listeners(compose):
    # `--profile learners` (docker-compose 1.29 reads profiles too) starts l1 empty with --join and
    # the one-shot l1-register job, which adds it through n1 as a learner.
    leader = agreed_leader(compose.status, NODES, SHORT)
    compose("--profile", "learners", "up", "-d")
    try:
        compose.wait_healthy(["l1"])
        register_job_succeeded(compose)
        l1 = wait_for("l1 a caught-up learner", lambda: (lambda s: s if s["role"] == "learner"
                      and s["appliedIndex"] >= compose.status(leader)["commitIndex"] else None)(compose.status("l1")))
        assert l1["voters"] == NODES and l1["learners"] == ["l1"], l1
        # The voters are unchanged: the learner is in no quorum.
        assert compose.status(leader)["voters"] == NODES
        # A listener on l1 hears a write made at n1; a write through l1 is read back there at once.
        got = {}
        ready = threading.Event()

        def listen():
            def want(event, data):
                ready.set()
                return event == "put" and data.get("data") == "from n1"
            got["events"] = sse_events(URLS["l1"] + "/learner/msg.json?ns=compose", compose.auth(), want, timeout=30)

        t = threading.Thread(target=listen)
        t.start()
        assert ready.wait(SHORT)
        r = requests.put(URLS["n1"] + "/learner/msg.json?ns=compose", headers=compose.auth(), data='"from n1"', timeout=SHORT)
        assert r.status_code == 200, r.text
        t.join(30)
        assert not t.is_alive() and got["events"][-1][1]["data"] == "from n1"
        r = requests.put(URLS["l1"] + "/learner/w.json?ns=compose", headers=compose.auth(), data='"via l1"', timeout=SHORT)
        assert r.status_code == 200, r.text
        got = requests.get(URLS["l1"] + "/learner.json?ns=compose", headers=compose.auth(), timeout=SHORT).json()
        assert got == {"msg": "from n1", "w": "via l1"}, got
        out = json.loads(sh([EMBER, "status", "--node", URLS["n1"], "--token-file", compose.token_file, "--json"]).stdout)
        assert {n["id"]: n["role"] for n in out["nodes"]}.get("l1") == "learner", out
        # A second `up` leaves it a learner (the job's 409 counts as success).
        compose("--profile", "learners", "up", "-d")
        register_job_succeeded(compose)
        assert compose.status("l1")["role"] == "learner"
    finally:
        # The later tests run the three voters only: l1 leaves the cluster and its containers go
        # (`down` without the profile would leave them running).
        requests.delete(URLS["n1"] + "/.ember/members/l1", headers=compose.auth(), timeout=SHORT)
        compose("--profile", "learners", "rm", "-s", "-f", "l1", "l1-register", check=False)


def register_job_succeeded(compose):
    """Waits for the one-shot l1-register job to exit; asserts it succeeded (200, or 409 when l1
    was a learner already)."""
    deadline = time.time() + UP_TIMEOUT
    job = compose.inspect("l1-register")["State"]
    while job["Status"] != "exited" and time.time() < deadline:
        time.sleep(0.5)
        job = compose.inspect("l1-register")["State"]
    assert job["Status"] == "exited" and job["ExitCode"] == 0, (job, compose("logs", "l1-register", check=False).stdout)


def ca_fingerprint(compose):
    pem = compose("exec", "-T", "n1", "cat", "/certs/ca.pem").stdout
    return hashlib.sha256(pem.encode()).hexdigest()


def test_down_then_up_keeps_the_data_and_down_v_removes_it(compose):
    r = requests.put(URLS["n1"] + "/persist/x.json?ns=compose", headers=compose.auth(), data='{"v": 1}', timeout=SHORT)
    assert r.status_code == 200
    ca = ca_fingerprint(compose)
    compose("down")
    compose("up", "-d")
    compose.wait_healthy()
    # The certs job ran again and kept the certificates (--if-missing); the data is still there.
    assert ca_fingerprint(compose) == ca
    agreed_leader(compose.status, NODES, 30)
    got = requests.get(URLS["n3"] + "/persist/x.json?ns=compose", headers=compose.auth(), timeout=SHORT).json()
    assert got == {"v": 1}
    compose("down", "-v")
    left = sh([compose.docker, "volume", "ls", "-q", "--filter", f"name={PROJECT}_"]).stdout.split()
    assert left == [], left
