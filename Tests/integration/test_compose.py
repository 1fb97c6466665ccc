"""docker-compose.yml checked against the real CLIs without Docker (test_compose_cluster.py starts it).

Every service's command must parse: the certs job runs `ember certs init` for real into a
directory standing in for its volume, and each node runs `emberd <its flags> --check-config`
with its volumes mapped to directories, so the TLS files it names must be exactly the ones the
certs job wrote. Ports, volumes, networks and health checks are checked for consistency.
"""
import json
import os
import shlex
import subprocess

import pytest
import yaml

from conftest import EMBERD, ROOT

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
COMPOSE = os.path.join(ROOT, "docker-compose.yml")


@pytest.fixture(scope="module")
def compose():
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


def nodes_of(compose):
    """The voters: services that run emberd and belong to no optional profile."""
    return {name: s for name, s in compose["services"].items()
            if s.get("entrypoint") is None and not s.get("profiles")}


def test_optional_learner_service_joins_and_registers_as_a_learner(compose):
    services = compose["services"]
    l1, job = services["l1"], services["l1-register"]
    assert l1["profiles"] == ["learners"] and job["profiles"] == ["learners"]
    args = l1["command"]
    assert "--join" in args and flag(args, "--node-id") == "l1"
    assert "l1" in flag(services["certs"]["command"], "--nodes").split(",")
    assert flag(args, "--peer-tls-cert") == "/certs/l1.pem"
    # It knows the voters' peers (to hear from the leader) and does not claim to be one.
    assert flag(args, "--peers") == flag(services["n1"]["command"], "--peers")
    assert flag(args, "--peer-address").split(":")[0] in l1["networks"]["peers"]["aliases"]
    data = [v for v, t, _ in mounts(l1) if t == flag(args, "--data")]
    assert data == ["l1-data"] and "l1-data" in compose["volumes"]
    (mapping,) = l1["ports"]
    assert mapping == "9004:9000"
    script = job["command"][0]
    body = json.loads(script[script.index("-d '") + 4:script.rindex("}'") + 1])
    assert body == {"id": "l1", "address": flag(args, "--peer-address"), "clientURL": "http://127.0.0.1:9004",
                    "learner": True}


def mounts(service):
    """[(volume, target, readonly)] of a service's named-volume mounts."""
    out = []
    for v in service.get("volumes", []):
        parts = v.split(":")
        out.append((parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(",")))
    return out


def flag(args, name):
    return args[args.index(name) + 1]


def map_paths(args, service, volume_dirs):
    """Rewrites container paths under a mount target to the directory standing in for it."""
    out = []
    for a in args:
        for vol, target, _ in mounts(service):
            if a == target or a.startswith(target + "/"):
                a = volume_dirs[vol] + a[len(target):]
                break
        out.append(a)
    return out


def test_services_volumes_and_networks_are_consistent(compose):
    services = compose["services"]
    nodes = nodes_of(compose)
    assert sorted(nodes) == ["n1", "n2", "n3"]
    declared = set(compose["volumes"])
    data_volumes = []
    for name, s in nodes.items():
        vols = mounts(s)
        assert {v for v, _, _ in vols} <= declared
        data = [v for v, t, ro in vols if t == flag(s["command"], "--data")]
        assert len(data) == 1, f"{name} must keep --data on its own volume"
        data_volumes.append(data[0])
        assert ("certs", "/certs", True) in vols, f"{name} reads the certs volume read-only"
        assert s["depends_on"]["certs"]["condition"] == "service_completed_successfully"
        assert "peers" in s["networks"]
    assert len(set(data_volumes)) == len(nodes), "each node needs its own data volume"
    assert compose["networks"]["peers"]["internal"] is True
    assert ("certs", "/certs", False) in mounts(services["certs"])


def test_nodes_may_open_as_many_files_as_connections(compose):
    """Each client connection holds a descriptor; the nodes' hard limit must cover emberd's
    default --max-connections (100,000) plus SSE streams, peers and LMDB."""
    for name, s in nodes_of(compose).items():
        nofile = s["ulimits"]["nofile"]
        assert nofile["soft"] == nofile["hard"] >= 200_000, name


def test_the_nofile_override_covers_every_emberd_service_the_learner_included(compose):
    """deploy/compose-nofile.yml is for engines whose hard limit is below the file's: a service it
    leaves out (the learner once) fails to start there with `error setting rlimit type 7`."""
    with open(os.path.join(ROOT, "deploy", "compose-nofile.yml")) as f:
        override = yaml.safe_load(f)["services"]
    emberd = {name for name, s in compose["services"].items() if s.get("entrypoint") is None and "ulimits" in s}
    assert "l1" in emberd and emberd == set(override), (emberd, set(override))
    for name, s in override.items():
        nofile = s["ulimits"]["nofile"]
        assert nofile["soft"] == nofile["hard"] < 20_000, name  # under the lowest engine limit seen


def test_emberd_raises_its_open_file_soft_limit_to_the_hard_limit(tmp_path):
    """A node started with a low soft limit (the usual 1024) runs with its hard limit."""
    import resource
    from conftest import Node
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 256:
        pytest.skip("hard open-file limit too low to tell a raise from the default")

    def low_soft_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    n = Node(data_dir=str(tmp_path / "d"))
    n.log = open(n.data_dir + ".log", "ab")
    n.proc = subprocess.Popen([EMBERD, "--data", n.data_dir, "--port", str(n.port), "--rules", n.rules_path],
                              stdout=n.log, stderr=n.log, preexec_fn=low_soft_limit)
    try:
        import requests, time
        deadline = time.time() + 30
        while time.time() < deadline:
            assert n.proc.poll() is None, f"emberd exited; log {n.data_dir}.log"
            try:
                if requests.get(n.url + "/.json?shallow=true", timeout=1).status_code in (200, 401):
                    break
            except requests.RequestException:
                pass
            time.sleep(0.05)
        limits = open(f"/proc/{n.proc.pid}/limits").read()
        line = next(l for l in limits.splitlines() if l.startswith("Max open files"))
        soft, hard_seen = line.split()[3:5]
        assert int(soft) == hard and int(hard_seen) == hard, line
        with open(n.data_dir + ".log") as f:
            assert "open-file limit" in f.read()
    finally:
        n.stop()


def test_ports_and_health_checks_match_the_node_flags(compose):
    published = []
    urls = {}
    for name, s in nodes_of(compose).items():
        port = flag(s["command"], "--port")
        assert flag(s["command"], "--host") == "0.0.0.0"
        (mapping,) = s["ports"]
        host_port, container_port = mapping.split(":")
        assert container_port == port
        published.append(host_port)
        test = s["healthcheck"]["test"]
        url = test[-1]
        assert url in (f"http://127.0.0.1:{port}/readyz", f"http://127.0.0.1:{port}/healthz")
        urls[name] = dict(i.split("=", 1) for i in flag(s["command"], "--client-urls").split(","))
        # Peers reach each other by an alias only the internal peers network resolves, and each
        # binds its peer port to that address alone (not reachable from the clients network).
        peers = dict(i.split("=", 1) for i in flag(s["command"], "--peers").split(","))
        assert sorted(peers) == sorted(nodes_of(compose))
        assert peers[name].split(":")[0] in s["networks"]["peers"]["aliases"]
        assert flag(s["command"], "--peer-address") == peers[name]
        assert flag(s["command"], "--node-id") == name
    assert len(set(published)) == len(published)
    # Every node advertises the same client URLs, and each is its published port.
    assert all(u == urls["n1"] for u in urls.values())
    for name, s in nodes_of(compose).items():
        assert urls["n1"][name] == f"http://127.0.0.1:{s['ports'][0].split(':')[0]}"


def test_commands_parse_and_nodes_read_what_the_certs_job_writes(compose, tmp_path):
    services = compose["services"]
    volume_dirs = {v: str(tmp_path / v) for v in compose["volumes"]}
    for d in volume_dirs.values():
        os.makedirs(d)
    certs = services["certs"]
    assert certs["entrypoint"] == ["ember"]
    cmd = map_paths(certs["command"], certs, volume_dirs)
    subprocess.run([EMBER, *cmd], check=True, capture_output=True, text=True)
    written = set(os.listdir(volume_dirs["certs"]))
    # Re-running the job (every `compose up`) keeps the CA and changes nothing.
    before = {f: open(os.path.join(volume_dirs["certs"], f), "rb").read() for f in written}
    subprocess.run([EMBER, *cmd], check=True, capture_output=True, text=True)
    assert {f: open(os.path.join(volume_dirs["certs"], f), "rb").read() for f in written} == before
    for name, s in nodes_of(compose).items():
        args = map_paths(s["command"], s, volume_dirs)
        for f in ("--peer-tls-cert", "--peer-tls-key", "--peer-tls-ca", "--admin-token-file"):
            assert os.path.basename(flag(s["command"], f)) in written, f"{name} {f} is not written by the certs job"
        p = subprocess.run([EMBERD, *args, "--check-config"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"{name}: {shlex.join(args)}\n{p.stderr}"
        summary = json.loads(p.stdout)
        assert summary["ok"] is True and summary["nodeId"] == name
        assert summary["port"] == int(flag(s["command"], "--port"))
        assert summary["peerTls"]["cert"].endswith(f"/{name}.pem") and "tls" not in summary
        # --check-config opens no data.
        assert os.listdir(volume_dirs[f"{name}-data"]) == []


def check_config(*args):
    return subprocess.run([EMBERD, *args, "--check-config"], capture_output=True, text=True, timeout=60)


def test_check_config_rejects_what_a_start_would(tmp_path):
    p = check_config("--data", str(tmp_path / "d"), "--node-id", "n1", "--peers", "n1=127.0.0.1:7000",
                     "--peer-tls-cert", str(tmp_path / "missing.pem"), "--peer-tls-key", str(tmp_path / "k"),
                     "--peer-tls-ca", str(tmp_path / "ca"))
    assert p.returncode != 0
    assert "cannot read TLS file" in p.stderr
    p = check_config("--client-urls", "n1=ftp://x")
    assert p.returncode != 0 and "--client-urls" in p.stderr
    # The config file's clientUrls key is checked the same way (valid files: below).
    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"clientUrls": {"n1": "ftp://x"}}))
    p = check_config("--data", str(tmp_path / "d"), "--cluster-config", str(cfg))
    assert p.returncode != 0 and "invalid clientUrls entry n1" in p.stderr

def test_tls_flags_come_in_pairs(tmp_path):
    """--tls-* is client HTTPS/WSS, --peer-tls-* the peer channel (etcd's naming); half a pair
    is refused with the missing half named."""
    certs = str(tmp_path / "certs")
    out = subprocess.run([EMBER, "certs", "init", "--out", certs, "--nodes", "n1"], check=True, capture_output=True,
                         text=True).stdout
    # The CLI says which flags take which file.
    assert f"--peer-tls-cert {certs}/n1.pem" in out and f"--tls-cert {certs}/n1.pem" in out
    cert, key, ca = f"{certs}/n1.pem", f"{certs}/n1.key", f"{certs}/ca.pem"
    p = check_config("--tls-cert", cert)
    assert p.returncode != 0 and "--tls-cert needs --tls-key" in p.stderr
    p = check_config("--tls-key", key)
    assert p.returncode != 0 and "--tls-key needs --tls-cert" in p.stderr
    p = check_config("--tls-ca", ca)
    assert p.returncode != 0 and "--tls-ca" in p.stderr and "needs --tls-cert and --tls-key" in p.stderr
    cluster = ["--node-id", "n1", "--peers", "n1=127.0.0.1:7000"]
    p = check_config(*cluster, "--peer-tls-cert", cert, "--peer-tls-ca", ca)
    assert p.returncode != 0 and "missing --peer-tls-key" in p.stderr
    # The peer certificate under the client flags: the error says where the peer flags went.
    p = check_config(*cluster, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca)
    assert p.returncode != 0 and "--peer-tls-*" in p.stderr
    # Both together: a cluster member serving HTTPS to clients.
    p = check_config(*cluster, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", ca,
                     "--tls-cert", cert, "--tls-key", key)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["peerTls"] == {"cert": cert, "key": key, "ca": ca}
    assert summary["tls"] == {"cert": cert, "key": key}


def test_deploy_config_files_parse(tmp_path):
    """deploy/config/nN.json (the systemd layout) with the files they name, via --cluster-config."""
    certs = tmp_path / "certs"
    subprocess.run([EMBER, "certs", "init", "--out", str(certs), "--nodes", "n1,n2,n3"], check=True, capture_output=True)
    for name in ("n1", "n2", "n3"):
        with open(os.path.join(ROOT, "deploy", "config", f"{name}.json")) as f:
            cfg = json.load(f)
        assert set(cfg) == {"nodeId", "peerAddress", "peers", "peerTlsCert", "peerTlsKey", "peerTlsCa"}
        for k in ("peerTlsCert", "peerTlsKey", "peerTlsCa"):
            cfg[k] = str(certs / os.path.basename(cfg[k]))
        # The client-facing pair from the file too.
        cfg["tlsCert"], cfg["tlsKey"] = str(certs / f"{name}.pem"), str(certs / f"{name}.key")
        # And the members' client URLs (the handshake's node list), which --client-urls overrides.
        cfg["clientUrls"] = {n: f"https://{n}.example:9000" for n in ("n1", "n2", "n3")}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg))
        p = check_config("--cluster-config", str(path), "--data", str(tmp_path / name))
        assert p.returncode == 0, p.stderr
        summary = json.loads(p.stdout)
        assert summary["nodeId"] == name and summary["peerTls"]["cert"] == cfg["peerTlsCert"]
        assert summary["tls"] == {"cert": cfg["tlsCert"], "key": cfg["tlsKey"]}
        assert summary["clientUrls"] == cfg["clientUrls"]
        p = check_config("--cluster-config", str(path), "--data", str(tmp_path / name), "--client-urls", "n1=http://c:1")
        assert p.returncode == 0 and json.loads(p.stdout)["clientUrls"] == {"n1": "http://c:1"}
