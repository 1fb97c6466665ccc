"""The official Firebase JS SDK as a client in our own tests: `../shared/jssdk` (see its README)
bundles it from source into `sdk.js`. One way to run it: `spawn_sdk_script` runs a snippet of Node
against the bundle (`run_sdk_script` to its end); `Sdk` is such a snippet, jssdk/driver.js, that
takes one command per line, for tests that talk to the SDK step by step.

The bundle is made once per test session (esbuild, ~30 s), or taken from the SDK suite's run
(`use_bundle`). The Debian packages the bundle and Node need are installed with apt-get when
missing, as the SDK harness's own run.sh does.
"""
import json
import os
import queue
import subprocess
import tempfile
import threading
import time

from conftest import ROOT, WAIT

JSSDK_DIR = os.environ.get("JSSDK_DIR") or os.path.normpath(os.path.join(ROOT, "..", "shared", "jssdk"))
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jssdk", "driver.js")
# Node as the harness runs it: the Debian node modules (faye-websocket, mocha's), IPv4 first.
NODE_ENV = {**os.environ, "NODE_PATH": "/usr/share/nodejs",
            "NODE_OPTIONS": (os.environ.get("NODE_OPTIONS", "") + " --dns-result-order=ipv4first").strip()}
# What harness/build.sh and the bundle need at run time (faye-websocket is the SDK's WebSocket).
DEBS = ["nodejs", "esbuild", "node-faye-websocket"]
# A snippet's whole run, connection and events included.
SCRIPT_TIMEOUT = 120

_bundle = {}


def use_bundle(path):
    """Takes `path` (a bundle run.sh made this session) as the session's sdk.js."""
    assert os.path.isfile(path), path
    _bundle["path"] = path


def sdk_bundle():
    """Path of sdk.js (the modular API and `firebase` compat), built on first use."""
    if "path" in _bundle:
        return _bundle["path"]
    assert os.path.isdir(JSSDK_DIR), f"the JS SDK harness is not at {JSSDK_DIR} (set JSSDK_DIR)"
    missing = [p for p in DEBS if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                                 text=True).stdout.find("install ok installed") < 0]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing], env=env,
                          capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True)
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing], env=env,
                           capture_output=True, check=True)
    out = tempfile.mkdtemp(prefix="ember-jssdk-")
    r = subprocess.run([os.path.join(JSSDK_DIR, "harness", "build.sh"), os.path.join(JSSDK_DIR, "src"), out],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"bundling the JS SDK failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    _bundle["path"] = os.path.join(out, "sdk.js")
    return _bundle["path"]


PRELUDE = """
const sdk = require(%(sdk)s);
const args = JSON.parse(process.argv[2]);
let resultValue;
function result(v) { resultValue = v; }
const stdinLines = [];
let stdinWaiter = null;
let stdinClosed = false;
const stdinInput = require("readline").createInterface({ input: process.stdin });
stdinInput.on("line", (l) => {
  if (stdinWaiter) { const w = stdinWaiter; stdinWaiter = null; w(l); } else stdinLines.push(l);
});
stdinInput.on("close", () => {
  stdinClosed = true;
  if (stdinWaiter) { const w = stdinWaiter; stdinWaiter = null; w(null); }
});
// The next line written to stdin; null once stdin is closed and every line was read.
function stdinLine() {
  if (stdinLines.length) return Promise.resolve(stdinLines.shift());
  return stdinClosed ? Promise.resolve(null) : new Promise((r) => { stdinWaiter = r; });
}
(async () => {
%(body)s
// Exit once the line is flushed: to a pipe, Node writes asynchronously and an immediate
// process.exit() cuts a result past 64 KiB.
})().then(() => { process.stdout.write("RESULT " + JSON.stringify(resultValue) + "\\n", () => process.exit(0)); },
          (e) => { process.stderr.write(String(e && e.stack || e) + "\\n", () => process.exit(1)); });
"""


def spawn_sdk_script(body, args, stderr=subprocess.PIPE):
    """Starts `body` (the inside of an async function with `sdk`, `args`, `result(v)` and
    `stdinLine()` — a promise of the next line written to its stdin, null at its end — in scope)
    under Node; `finish_sdk_script` collects what it passed to `result`."""
    sdk = sdk_bundle()
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as f:
        f.write(PRELUDE % {"sdk": json.dumps(sdk), "body": body})
        path = f.name
    proc = subprocess.Popen(["node", path, json.dumps(args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=NODE_ENV)
    proc.script_path = path
    return proc


def finish_sdk_script(proc, stdin_text="", timeout=SCRIPT_TIMEOUT):
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout)
    finally:
        os.unlink(proc.script_path)
    assert proc.returncode == 0, f"SDK script failed ({proc.returncode}):\n{out[-3000:]}\n{err[-3000:]}"
    line = next(l for l in reversed(out.splitlines()) if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def run_sdk_script(body, args, timeout=SCRIPT_TIMEOUT):
    """Runs `body` to its end; returns what it passed to `result`. Fails with its output."""
    return finish_sdk_script(spawn_sdk_script(body, args), timeout=timeout)


class Sdk:
    """jssdk/driver.js run as a script: `call` sends one command and waits for its answer; listen
    events are queued per subscription. Node's stderr goes to `log_path`."""

    def __init__(self, log_path):
        self.log = open(log_path, "ab")
        with open(DRIVER) as f:
            self.proc = spawn_sdk_script(f.read(), {}, stderr=self.log)
        self.next_id = 0
        self.answers = {}
        self.events = {}
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("RESULT "):  # the script's end (stdin closed)
                continue
            m = json.loads(line)
            with self.cond:
                if "id" in m:
                    self.answers[m["id"]] = m
                else:
                    self.events.setdefault(m["sub"], queue.Queue()).put(m)
                self.cond.notify_all()

    def send(self, op, **args):
        with self.cond:
            self.next_id += 1
            i = self.next_id
        self.proc.stdin.write(json.dumps({"id": i, "op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return i

    def result(self, i, timeout=WAIT):
        with self.cond:
            assert self.cond.wait_for(lambda: i in self.answers or self.proc.poll() is not None, timeout), \
                f"the SDK did not answer command {i} within {timeout} s"
            assert i in self.answers, f"the driver exited with {self.proc.returncode}"
            m = self.answers.pop(i)
        if not m["ok"]:
            raise SdkError(m["error"])
        return m["value"]

    def call(self, op, timeout=WAIT, **args):
        return self.result(self.send(op, **args), timeout)

    def event(self, sub, until, timeout=WAIT):
        """The first event of `sub` for which `until(value)` holds."""
        with self.cond:
            q = self.events.setdefault(sub, queue.Queue())
        deadline = time.time() + timeout
        seen = []
        while True:
            try:
                m = q.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                raise AssertionError(f"no event of {sub} as wanted within {timeout} s; saw {seen}")
            assert m["event"] == "value", m
            seen.append(m["value"])
            if until(m["value"]):
                return m["value"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()
        os.unlink(self.proc.script_path)


class SdkError(Exception):
    pass
