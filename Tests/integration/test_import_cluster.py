"""`ember import` into a 3-node cluster (issue 42): through a follower (writes forwarded to the
leader), interrupted and resumed through another node, and through a leader change mid-import:
the result on every member is the file, with no loss and no duplicate; the CLI rides out the
election through the follower it talks to. Real emberd processes
(mutual TLS between peers), real CLI.
"""
import json
import signal
import subprocess
import uuid

import requests

from cluster_helpers import Cluster
from conftest import wait_for
from test_import_stream import EMBER, MARKER, doc, ember, normalized


def exported(url, path):
    r = requests.get(f"{url}{path}.json?format=export", timeout=120)
    r.raise_for_status()
    return r.json()


def test_an_import_through_followers_resumes_across_nodes_and_a_leader_change(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        a, b = c.followers()
        d = doc(11, users=3000)
        f = tmp_path / "c.json"
        f.write_text(json.dumps(d))
        path = f"/cluster-import/{uuid.uuid4().hex}"
        small = ["--max-request-bytes", "4096", "--max-part-bytes", "1024", "--quiet"]

        # 1. Through follower a; the CLI is killed once it made progress.
        proc = subprocess.Popen([EMBER, "import", str(f), path, "--node", c.url(a), *small],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            first = wait_for("import progress through a follower",
                             lambda: requests.get(f"{c.url(b)}{path}/{MARKER}/parts.json", timeout=10).json())
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

        # 2. Resumed through follower b; the leader is killed while it runs.
        proc = subprocess.Popen([EMBER, "import", str(f), path, "--node", c.url(b), *small, "--resume"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for("progress after the resume",
                 lambda: (requests.get(f"{c.url(b)}{path}/{MARKER}/parts.json", timeout=10).json() or 0) > first + 10)
        assert proc.poll() is None, "the import ended before the leader was killed"
        c.kill9(leader)
        _, err = proc.communicate(timeout=300)
        survivors = [a, b]
        new_leader = c.leader(among=survivors, timeout=30)
        assert new_leader in survivors
        # The CLI rides out the election (it retries 502/503/504 and dropped connections).
        assert proc.returncode == 0, err
        assert "resumed after" in err, err
        assert c.status(new_leader)["appliedIndex"] > 0

        # 3. Every surviving member holds exactly the file; no record is left.
        want = normalized(d)
        for node in survivors:
            wait_for(f"{node} holds the file", lambda: exported(c.url(node), path) == want)
        p = ember("import", str(f), path, "--node", c.url(b), "--resume", check=False)
        assert p.returncode != 0 and "no interrupted import" in p.stderr, p.stderr
    finally:
        c.down()
