"""A wrong clock (issue 40): server timestamps never go backwards across leader changes, even
when the new leader's wall clock is an hour behind, and the floor survives restarts.

The leader stamps each log entry with max(its wall clock, the highest timestamp in its log)
(`RaftHost.restamp`); the highest is derived from the log at start and raised by every entry a
node persists or installs, so a follower that becomes leader starts from what its predecessors
stamped. One node of three runs with its wall clock an hour behind (wallclock_offset.c, an
LD_PRELOAD library: Debian's faketime hangs emberd, its clock_gettime recursing into jemalloc's
start) and is made leader by a transfer.
Leases, onDisconnect timeouts and Raft timers use monotonic clocks (ContinuousClock, NIODeadline),
so the wrong wall clock does not disturb them; the cluster elects and commits throughout here.
"""
import asyncio
import os
import shutil
import stat
import subprocess
import time

import requests

from conftest import EMBERD
from cluster_helpers import Cluster, script
from wire import WireClient

HERE = os.path.dirname(os.path.abspath(__file__))
OWNER = {"Authorization": "Bearer owner"}
HOUR_MS = 3_600_000


def build_offset_library(out_dir):
    """Compiles wallclock_offset.c with the C compiler beside swift (clang), else cc."""
    target = os.path.join(out_dir, "wallclock_offset.so")
    swift = shutil.which("swift")
    compilers = [os.path.join(os.path.dirname(os.path.realpath(swift)), "clang")] if swift else []
    errors = []
    for cc in compilers + ["cc"]:
        try:
            subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", target, os.path.join(HERE, "wallclock_offset.c")],
                           check=True, capture_output=True, timeout=120)
            return target
        except (OSError, subprocess.SubprocessError) as e:
            errors.append(f"{cc}: {e}")
    raise AssertionError(f"no C compiler for wallclock_offset.c: {errors}")


def behind_wrapper(path, library):
    """An emberd whose wall clock is an hour behind (monotonic clocks left alone)."""
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexport EMBER_WALLCLOCK_OFFSET_MS=-{HOUR_MS}\nexport LD_PRELOAD={library}\nexec {EMBERD} \"$@\"\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def now_ms():
    return int(time.time() * 1000)


def stamp(url, path):
    """Writes a server timestamp at `path` through `url`; returns what the cluster stored."""
    r = requests.put(f"{url}/{path}.json", json={".sv": "timestamp"}, timeout=15)
    assert r.status_code == 200, r.text
    v = requests.get(f"{url}/{path}.json", timeout=15).json()
    assert isinstance(v, int), v
    return v


def hello_ts(url):
    async def go():
        c = await WireClient.connect(url, "clock")
        await c.close()
        return c.hello["d"]["d"]["ts"]
    return asyncio.run(go())


def transfer(c, to, among=None):
    r = requests.post(c.url(c.leader(among=among)) + "/.ember/leader/transfer", json={"to": to}, headers=OWNER, timeout=30)
    assert r.status_code == 200, r.text
    assert c.leader(among=among) == to


def test_server_timestamps_never_go_backwards_under_a_leader_an_hour_behind(tmp_path):
    library = build_offset_library(str(tmp_path))
    c = Cluster(tmp_path / "c")
    try:
        leader = c.leader()
        slow = c.followers()[0]
        other = next(n["id"] for n in c.nodes if n["id"] not in (leader, slow))
        script("stop-node", "--dir", c.dir, "--id", slow)
        script("start-node", "--dir", c.dir, "--id", slow, "--emberd", behind_wrapper(str(tmp_path / "emberd-behind"), library))
        c.wait_converged()
        # The clock really is wrong there: its hello's server time is an hour behind.
        lag = now_ms() - hello_ts(c.url(slow))
        assert HOUR_MS - 60_000 < lag < HOUR_MS + 60_000, lag

        seq = [stamp(c.url(leader), "ts/before")]
        transfer(c, slow)
        # Through the slow leader itself, and forwarded to it by the followers.
        for i, via in enumerate([slow, leader, other, slow]):
            seq.append(stamp(c.url(via), f"ts/slow{i}"))
        assert seq == sorted(seq), seq
        # The slow leader's own clock says an hour ago: it stamps at the floor.
        assert all(s == seq[0] for s in seq[1:]), seq
        assert seq[-1] <= now_ms(), "a timestamp ahead of real time"
        # Without the floor these would be an hour behind the first one.
        assert seq[-1] - seq[0] < HOUR_MS / 2, seq

        # The floor survives restarts: every node stops; the slow one comes back with one other
        # (it stamps from its log alone: the election's no-op entries carry no timestamp).
        for n in (slow, leader, other):
            script("stop-node", "--dir", c.dir, "--id", n)
        script("start-node", "--dir", c.dir, "--id", slow)
        script("start-node", "--dir", c.dir, "--id", other)
        pair = [slow, other]
        if c.leader(among=pair) != slow:
            transfer(c, slow, among=pair)
        after = stamp(c.url(slow), "ts/after-restart")
        assert after >= seq[-1], (after, seq)
        assert now_ms() - hello_ts(c.url(slow)) > HOUR_MS - 60_000, "the restarted node's clock is still behind"
    finally:
        c.down()
