"""The official Firebase JS SDK as a client in our own tests: `../shared/jssdk` (see its README)
bundles it from source into `sdk.js`; `run_sdk_script` runs a snippet of Node against it.

The bundle is made once per test session (esbuild, ~30 s). The Debian packages the bundle and
Node need are installed with apt-get when missing, as the SDK harness's own run.sh does.
"""
import json
import os
import subprocess
import tempfile

from conftest import ROOT

JSSDK_DIR = os.environ.get("JSSDK_DIR", os.path.normpath(os.path.join(ROOT, "..", "shared", "jssdk")))
# What harness/build.sh and the bundle need at run time (faye-websocket is the SDK's WebSocket).
DEBS = ["nodejs", "esbuild", "node-faye-websocket"]
# A snippet's whole run, connection and events included.
SCRIPT_TIMEOUT = 120

_bundle = {}


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
require("readline").createInterface({ input: process.stdin }).on("line", (l) => {
  if (stdinWaiter) { const w = stdinWaiter; stdinWaiter = null; w(l); } else stdinLines.push(l);
});
function stdinLine() {
  return stdinLines.length ? Promise.resolve(stdinLines.shift()) : new Promise((r) => { stdinWaiter = r; });
}
(async () => {
%(body)s
})().then(() => { process.stdout.write("RESULT " + JSON.stringify(resultValue) + "\\n"); process.exit(0); },
          (e) => { process.stderr.write(String(e && e.stack || e) + "\\n"); process.exit(1); });
"""


def spawn_sdk_script(body, args):
    """Starts `body` (the inside of an async function with `sdk`, `args`, `result(v)` and
    `stdinLine()` — a promise of the next line written to its stdin — in scope) under Node;
    `finish_sdk_script` collects what it passed to `result`."""
    sdk = sdk_bundle()
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as f:
        f.write(PRELUDE % {"sdk": json.dumps(sdk), "body": body})
        path = f.name
    env = {**os.environ, "NODE_PATH": "/usr/share/nodejs",
           "NODE_OPTIONS": os.environ.get("NODE_OPTIONS", "") + " --dns-result-order=ipv4first"}
    proc = subprocess.Popen(["node", path, json.dumps(args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
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
