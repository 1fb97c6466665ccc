"""Shared by the disk-fault and corruption tests: test-only C tools built on the spot, a cluster
member stopped, moved, restarted with other flags, and small tmpfs filesystems (root only)."""
import asyncio
import json
import os
import shutil
import subprocess

import pytest

from cluster_helpers import script
from wire import WireClient

HERE = os.path.dirname(os.path.abspath(__file__))


def build_tool(source, out_dir, libs=()):
    """Compiles Tests/integration/SOURCE (C) with the clang beside swift, else cc; returns the binary."""
    target = os.path.join(out_dir, os.path.splitext(source)[0])
    swift = shutil.which("swift")
    compilers = [os.path.join(os.path.dirname(os.path.realpath(swift)), "clang")] if swift else []
    errors = []
    for cc in compilers + ["cc"]:
        try:
            subprocess.run([cc, "-O2", "-o", target, os.path.join(HERE, source), *libs],
                           check=True, capture_output=True, timeout=120)
            return target
        except (OSError, subprocess.SubprocessError) as e:
            errors.append(f"{cc}: {getattr(e, 'stderr', b'') or e}")
    raise AssertionError(f"no C compiler for {source}: {errors}")


def require_root(what):
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (mount -t tmpfs); CI runs as root")


class Tmpfs:
    """A tmpfs of `size` bytes mounted at `path` (unmounted by `close`)."""

    def __init__(self, path, size):
        os.makedirs(path, exist_ok=True)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True, text=True)
        if p.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs at {path}: {p.stderr.strip()}")
        self.path = path
        self.filler = os.path.join(path, "filler")

    def free(self):
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave):
        """Writes a filler file until `leave` bytes are free (or the filesystem is full)."""
        chunk = b"\0" * (1 << 20)
        with open(self.filler, "ab") as f:
            try:
                while self.free() > leave:
                    f.write(chunk[:min(len(chunk), max(4096, self.free() - leave))])
                    f.flush()
            except OSError:
                pass  # ENOSPC: full

    def unfill(self):
        if os.path.exists(self.filler):
            os.remove(self.filler)

    def close(self):
        subprocess.run(["umount", "-l", self.path], capture_output=True)


def layout(c):
    with open(os.path.join(c.dir, "layout.json")) as f:
        return json.load(f)


def save_layout(c, data):
    with open(os.path.join(c.dir, "layout.json"), "w") as f:
        json.dump(data, f, indent=2)


def data_dir(c, node_id):
    return next(n["data"] for n in layout(c)["nodes"] if n["id"] == node_id)


def stop_node(c, node_id):
    script("stop-node", "--dir", c.dir, "--id", node_id)


def start_node(c, node_id, extra=None, data=None, join=None):
    """Starts a stopped member, optionally with its own extra emberd flags, another data
    directory, or --join (a new member to be added with `ember members add`)."""
    if extra is not None or data is not None or join is not None:
        lay = layout(c)
        for n in lay["nodes"]:
            if n["id"] == node_id:
                if extra is not None:
                    n["extraArgs"] = list(extra)
                if data is not None:
                    n["data"] = data
                if join is not None:
                    n["join"] = join
        save_layout(c, lay)
    script("start-node", "--dir", c.dir, "--id", node_id)


def move_to_tmpfs(c, node_id, mount, size):
    """Stops the member, moves its data directory onto a new tmpfs and starts it there."""
    stop_node(c, node_id)
    fs = Tmpfs(mount, size)
    target = os.path.join(mount, "data")
    shutil.copytree(data_dir(c, node_id), target)
    start_node(c, node_id, data=target)
    return fs


def wire(url, ns, action, body):
    """One wire-protocol request on a fresh connection; returns the response body ({"s": ..., "d": ...})."""
    async def go():
        w = await WireClient.connect(url, ns)
        try:
            return (await w.request(action, body))[1]
        finally:
            await w.close()
    return asyncio.run(go())


def alarms(status):
    return {a["alarm"] for a in status.get("alarms", [])}


def metric(url, line_prefix):
    """The value of the first /metrics sample starting with `line_prefix` (None when absent)."""
    import requests
    for line in requests.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return None
