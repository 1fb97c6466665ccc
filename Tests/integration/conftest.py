"""Fixtures that run real emberd processes for the integration suite.

The binary comes from $EMBERD (default: .build/debug/emberd at the package root). Each node gets a
fresh data directory and a free port; it is ready when GET /.json answers 200.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import local_cluster  # noqa: E402  (scripts/local_cluster.py: deploy/local-cluster as a module)

_local_cluster = local_cluster.load()
EMBERD = os.environ.get("EMBERD", os.path.join(ROOT, ".build", "debug", "emberd"))

RULES = {
    "rules": {
        ".read": True,
        ".write": True,
        "dinosaurs": {".indexOn": ["height", "weight", "length", "dimensions/height"]},
        "scores": {".indexOn": ".value"},
        "$any": {"dinosaurs": {".indexOn": ["height", "weight", "length"]},
                 "scores": {".indexOn": ".value"}},
    }
}


# Port picking is local-cluster's (every probe held open until all are picked, so ports are distinct).
free_port = _local_cluster.free_port
free_ports = _local_cluster.free_ports


# An upper bound for a condition to come true (`wait_for`), never a figure asserted.
WAIT = 60


def wait_for(what, cond, timeout=WAIT):
    """Polls `cond` until it returns something true (returned); a request error counts as not yet."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = cond()
            if last:
                return last
        except requests.RequestException as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s (last: {last})")


def spawn_emberd(args, port_file, log):
    """emberd started with `--port 0 --port-file PORT_FILE` and the other `args`: it binds a port
    itself and reports it, so no other process can take the port between picking and binding.
    Returns (process, port) once the port is reported; the caller waits for readiness."""
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen([EMBERD, *args, "--port", "0", "--port-file", port_file], stdout=log, stderr=log)

    def reported():
        assert proc.poll() is None, f"emberd exited with {proc.returncode}"
        try:
            with open(port_file) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return int(text) if text.endswith("\n") else None
    return proc, wait_for("emberd reports its port", reported)

def get(url, path, ns):
    return requests.get(f"{url}/{path}.json?ns={ns}", timeout=5).json()


class Node:
    """One emberd process with its own data directory."""

    def __init__(self, data_dir=None, rules=RULES, extra_args=(), env=None):
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="ember-it-")
        # Variables added to the node's environment (e.g. MALLOC_CONF).
        self.env = dict(env or {})
        # Bound by emberd itself on the first start (--port 0, reported in --port-file), so no
        # other process can take it between picking and binding; restarts keep it.
        self._port = None
        self.rules_path = os.path.join(self.data_dir + "-rules.json")
        with open(self.rules_path, "w") as f:
            json.dump(rules, f)
        self.extra_args = list(extra_args)
        self.proc = None
        self.log = None

    @property
    def port(self):
        # Asked before the first start (a test that passes the port on): picked the old way.
        if self._port is None:
            self._port = free_port()
        return self._port

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=30, alive_only=False):
        """Starts emberd and waits until it serves reads; with `alive_only`, until /healthz
        answers (a cluster member that never catches up, e.g. alone, serves no read)."""
        self.log = open(self.data_dir + ".log", "ab")
        port_file = self.data_dir + ".port"
        if os.path.exists(port_file):
            os.remove(port_file)
        self.proc = subprocess.Popen(
            [EMBERD, "--data", self.data_dir, "--port", str(self._port or 0), "--port-file", port_file,
             "--rules", self.rules_path, "--keep-alive", "1"] + self.extra_args,
            stdout=self.log, stderr=self.log, env={**os.environ, **self.env} if self.env else None)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"emberd exited with {self.proc.returncode}; log {self.data_dir}.log")
            if self._port is None:
                try:
                    with open(port_file) as f:
                        text = f.read()
                    if text.endswith("\n"):
                        self._port = int(text)
                except FileNotFoundError:
                    pass
                if self._port is None:
                    time.sleep(0.02)
                    continue
            try:
                # 401: up, but the rules refuse anonymous reads of the root. Shallow: a restarted
                # node may hold more data than a debug build serialises within the poll's timeout.
                if alive_only:
                    if requests.get(self.url + "/healthz", timeout=1).status_code == 200:
                        return self
                elif requests.get(self.url + "/.json?shallow=true", timeout=1).status_code in (200, 401):
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError("emberd did not become ready")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()


@pytest.fixture(scope="session")
def node():
    n = Node().start()
    yield n
    n.stop()
    assert n.proc.returncode == 0, "emberd did not shut down cleanly on SIGTERM"


@pytest.fixture
def ns():
    """A fresh namespace per test keeps tests independent on one node."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def db(node, ns):
    """firebase-admin's db module bound to the node, exactly as an emulator user configures it."""
    import firebase_admin
    from firebase_admin import db as fdb
    app = firebase_admin.initialize_app(options={"databaseURL": f"{node.url}?ns={ns}"}, name=ns)
    yield lambda path="/": fdb.reference(path, app=app)
    firebase_admin.delete_app(app)
