"""A cluster of emberd processes that are not root, as the image (uid 10001) and the systemd unit
(User=ember) run them. Until 0.4.0 every peer socket asked for SOL_SOCKET option 1 (SO_DEBUG,
meant as TCP_NODELAY), which only a privileged process may set: as any other user no peer link
connected and no leader was ever elected, while the suite (run as root) saw nothing.

Run as root, the nodes drop to `nobody` through a small wrapper (setpriv from util-linux);
run as another user, they are unprivileged already.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import requests

from cluster_helpers import converged
from conftest import EMBERD, RULES, ROOT

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
SCRIPT = os.path.join(ROOT, "deploy", "local-cluster")
NOBODY = 65534

WRAPPER = """#!/bin/sh
# emberd as `nobody`: its data directory and certificates handed over first.
prev=""
for a in "$@"; do
  case "$prev" in --data) data="$a" ;; --peer-tls-key) key="$a" ;; esac
  prev="$a"
done
chown -R %(uid)d:%(uid)d "$data" "$(dirname "$key")"
exec setpriv --reuid=%(uid)d --regid=%(uid)d --clear-groups -- %(emberd)s "$@"
"""


def test_a_cluster_of_unprivileged_processes_elects_and_replicates():
    # Not under pytest's tmp_path: its parents are private to root, and `nobody` must reach the data.
    d = tempfile.mkdtemp(prefix="ember-unpriv-")
    os.chmod(d, 0o755)
    emberd = EMBERD
    if os.geteuid() == 0:
        emberd = os.path.join(d, "emberd-as-nobody")
        with open(emberd, "w") as f:
            f.write(WRAPPER % {"uid": NOBODY, "emberd": EMBERD})
        os.chmod(emberd, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    rules = os.path.join(d, "rules.json")
    with open(rules, "w") as f:
        json.dump(RULES, f)
    cluster = os.path.join(d, "c")
    env = {**os.environ, "EMBER": EMBER}
    try:
        # `up` waits for a leader: without working peer links it fails here.
        r = subprocess.run([sys.executable, SCRIPT, "up", "--nodes", "3", "--dir", cluster, "--emberd", emberd,
                            "--rules", rules], capture_output=True, text=True, env=env, timeout=120)
        logs = "".join(open(os.path.join(cluster, f"n{i}.log"), errors="replace").read()[-1500:]
                       for i in (1, 2, 3) if os.path.exists(os.path.join(cluster, f"n{i}.log")))
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{logs}"
        with open(os.path.join(cluster, "cluster.json")) as f:
            nodes = json.load(f)["nodes"]
        if os.geteuid() == 0:
            for n in nodes:
                assert os.stat(f"/proc/{n['pid']}").st_uid == NOBODY, "the node must run as nobody"
        urls = {n["id"]: n["url"] for n in nodes}

        def status(i):
            return requests.get(urls[i] + "/.ember/status", timeout=3).json()

        follower = next(i for i in urls if status(i)["role"] != "leader")
        assert requests.put(urls[follower] + "/u/x.json", data='{"v": 1}', timeout=10).status_code == 200
        converged(status, sorted(urls), 30)
        for url in urls.values():
            assert requests.get(url + "/u/x.json", timeout=10).json() == {"v": 1}
    finally:
        subprocess.run([sys.executable, SCRIPT, "down", "--dir", cluster], capture_output=True, env=env)
        shutil.rmtree(d, ignore_errors=True)
