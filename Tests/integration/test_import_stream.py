"""`ember import` streams (issue 42): the file is read incrementally and sent as bounded
multi-path PATCHes, each carrying the import's progress record (PATH/__ember_import__), so an
interrupted import resumes exactly where the node has the data. Real emberd, real CLI.
"""
import json
import os
import random
import signal
import subprocess
import time
import uuid

import pytest
import requests

from conftest import EMBERD, Node, wait_for

EMBER = os.environ.get("EMBER", os.path.join(os.path.dirname(EMBERD), "ember"))
MARKER = "__ember_import__"


def ember(*args, check=True, timeout=300):
    p = subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"ember {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def doc(seed, users=300):
    """A Firebase-export-like document: push-ID-ish keys, nesting, arrays, priorities."""
    rng = random.Random(seed)
    out = {}
    for i in range(users):
        u = {"name": f"user{i}", "age": rng.randint(1, 99), "bio": "x" * rng.randint(0, 400),
             "tags": [rng.randint(0, 9) for _ in range(rng.randint(1, 4))],
             "posts": {f"-P{i:04d}{j:03d}": {"t": "p" * rng.randint(1, 60), ".priority": j} for j in range(rng.randint(0, 5))}}
        if not u["posts"]:
            del u["posts"]
        if i % 7 == 0:
            u[".priority"] = f"p{i}"
        out[f"-U{i:05d}{rng.randint(0, 10**6):07d}"] = u
    out[".priority"] = 3  # on an object the import sends as its children
    return out


def exported(node, path):
    r = requests.get(f"{node.url}{path}.json?format=export", timeout=120)
    r.raise_for_status()
    return r.json()


def normalized(d):
    """What the node's export gives for document d (integral numbers, arrays as index objects)."""
    if isinstance(d, list):
        return {str(i): normalized(v) for i, v in enumerate(d)}
    if isinstance(d, dict):
        return {k: normalized(v) for k, v in d.items()}
    return d


@pytest.fixture(scope="module")
def inode():
    n = Node().start()
    yield n
    n.stop()


def test_import_in_bounded_parts_equals_the_file(inode, tmp_path):
    d = doc(1)
    f = tmp_path / "d.json"
    f.write_text(json.dumps(d))
    path = f"/imp/{uuid.uuid4().hex}"
    requests.put(f"{inode.url}{path}.json", json={"old": True}, timeout=30).raise_for_status()
    p = ember("import", str(f), path, "--node", inode.url, "--max-request-bytes", "8192", "--max-part-bytes", "2048")
    assert "children/s" in p.stderr and "ETA" in p.stderr, p.stderr
    requests_sent = int(p.stderr.split(" in ")[-1].split(" request")[0])
    assert requests_sent > 10, p.stderr
    got = exported(inode, path)
    assert got == normalized(d)
    assert MARKER not in got
    # A small file still goes as one request.
    small = tmp_path / "s.json"
    small.write_text('{"a": {"b": 1}}')
    p = ember("import", str(small), path, "--node", inode.url)
    assert "in 1 request(s)" in p.stderr
    assert exported(inode, path) == {"a": {"b": 1}}


def test_dry_run_validates_the_whole_file_with_the_offset_of_the_first_error(inode, tmp_path):
    path = f"/dry/{uuid.uuid4().hex}"
    good = tmp_path / "g.json"
    good.write_text(json.dumps(doc(2, users=50)))
    p = ember("import", str(good), path, "--node", inode.url, "--dry-run", "--max-part-bytes", "512")
    assert "is valid" in p.stdout and "nothing sent" in p.stdout
    text = json.dumps(doc(2, users=50))
    bad_at = text.index('"name"', len(text) // 2)
    bad = tmp_path / "b.json"
    bad.write_text(text[:bad_at] + '"na.me"' + text[bad_at + 6:])
    p = ember("import", str(bad), path, "--node", inode.url, "--dry-run", check=False)
    assert p.returncode != 0
    assert f"at byte {bad_at + 7}" in p.stderr and "must not contain" in p.stderr, p.stderr
    truncated = tmp_path / "t.json"
    end = text.index("}", 1000) + 1
    truncated.write_text(text[:end])
    p = ember("import", str(truncated), path, "--node", inode.url, "--dry-run", check=False)
    assert p.returncode != 0 and f"unexpected end at byte {end}" in p.stderr, p.stderr
    assert requests.get(f"{inode.url}{path}.json", timeout=10).json() is None


def test_a_malformed_file_stops_after_the_last_committed_request_and_says_so(inode, tmp_path):
    d = doc(3)
    text = json.dumps(d)
    cut = text.index(', "-U', len(text) * 2 // 3)  # between two users: not inside a string
    bad = tmp_path / "m.json"
    bad.write_text(text[:cut] + "@" + text[cut:])
    path = f"/mal/{uuid.uuid4().hex}"
    p = ember("import", str(bad), path, "--node", inode.url, "--max-request-bytes", "8192", "--max-part-bytes", "2048",
              check=False)
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()[-1]
    assert f"at byte {cut}" in err and "request(s) committed before it" in err, err
    committed = int(err.split("request(s) committed before it (")[1].split(" part")[0])
    record = requests.get(f"{inode.url}{path}/{MARKER}.json", timeout=10).json()
    assert record["parts"] == committed and record["bytes"] <= cut
    # Exactly the users whose parts were committed are there, whole; none after.
    got = exported(inode, path)
    got.pop(MARKER)
    keys = sorted(k for k in d if not k.startswith("."))
    present = sorted(got)
    assert present == keys[:len(present)] and 0 < len(present) < len(keys)
    for k in present[:-1]:
        assert got[k] == normalized(d[k])


def test_an_import_killed_twice_resumes_to_the_file_without_loss_or_duplicates(inode, tmp_path):
    d = doc(4, users=1500)
    f = tmp_path / "k.json"
    f.write_text(json.dumps(d))
    path = f"/res/{uuid.uuid4().hex}"
    args = [EMBER, "import", str(f), path, "--node", inode.url, "--max-request-bytes", "4096", "--max-part-bytes", "1024",
            "--quiet"]
    last = 0
    for round_ in range(2):
        proc = subprocess.Popen(args + (["--resume"] if round_ else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def progressed():
            r = requests.get(f"{inode.url}{path}/{MARKER}/parts.json", timeout=10).json()
            return r is not None and r > last + 20 and r

        try:
            last = wait_for("import progress", progressed)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    p = ember("import", str(f), path, "--node", inode.url, "--max-request-bytes", "4096", "--resume")
    assert "resumed after" in p.stderr, p.stderr
    assert exported(inode, path) == normalized(d)
    # No record left: a second --resume has nothing to continue.
    p = ember("import", str(f), path, "--node", inode.url, "--resume", check=False)
    assert p.returncode != 0 and "no interrupted import" in p.stderr


def test_resume_refuses_another_file(inode, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc(5, users=400)))
    b.write_text(json.dumps(doc(6, users=400)))
    path = f"/other/{uuid.uuid4().hex}"
    proc = subprocess.Popen([EMBER, "import", str(a), path, "--node", inode.url, "--max-request-bytes", "2048",
                             "--max-part-bytes", "512", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for("import progress", lambda: requests.get(f"{inode.url}{path}/{MARKER}/parts.json", timeout=10).json())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    p = ember("import", str(b), path, "--node", inode.url, "--resume", check=False)
    assert p.returncode != 0 and "of another file" in p.stderr, p.stderr


@pytest.mark.parametrize("in_flight", ["1", "16"])
def test_requests_in_flight_commit_in_any_order_and_equal_the_file(inode, tmp_path, in_flight):
    """--in-flight N sends N PATCHes at once (default 4, as every test above); whatever order they
    commit in, the result is the file, and the record is gone."""
    d = doc(7, users=600)
    f = tmp_path / "w.json"
    f.write_text(json.dumps(d))
    path = f"/window/{uuid.uuid4().hex}"
    p = ember("import", str(f), path, "--node", inode.url, "--max-request-bytes", "4096", "--max-part-bytes", "1024",
              "--in-flight", in_flight, "--quiet")
    assert int(p.stderr.split(" in ")[-1].split(" request")[0]) > 50, p.stderr
    assert exported(inode, path) == normalized(d)
    bad = ember("import", str(f), path, "--node", inode.url, "--in-flight", "17", check=False)
    assert bad.returncode != 0 and "--in-flight must be 1...16" in bad.stderr, bad.stderr
