"""kill -9 during a concurrent write load loses no acknowledged write and leaves a consistent tree."""
import os
import random
import threading
import time

import requests

from conftest import Node

ROUNDS = int(os.environ.get("EMBER_KILL_ROUNDS", "40" if os.environ.get("EMBER_SOAK") else "3"))


def load(node, stop, acked, lock, worker):
    s = requests.Session()
    i = 0
    while not stop.is_set():
        i += 1
        try:
            if i % 5 == 0:
                # A multi-path update must land whole or not at all.
                r = s.patch(f"{node.url}/pairs.json?print=silent",
                            data=f'{{"w{worker}/a": {i}, "w{worker}/b": {i}}}', timeout=5)
                key = ("pair", worker)
            else:
                r = s.put(f"{node.url}/k/w{worker}_{i}.json?print=silent", data=str(i), timeout=5)
                key = ("k", f"w{worker}_{i}")
        except requests.RequestException:
            continue  # the node died mid-request: not acknowledged
        if r.status_code == 204:
            with lock:
                if key[0] == "pair":
                    acked[key] = max(acked.get(key, 0), i)
                else:
                    acked[key] = i


def kill9_under_load(node, load_fn, acked, lock, round_no, workers):
    """One round: `workers` threads run `load_fn` until the node is killed with SIGKILL at an
    arbitrary moment of the load, then the node is restarted on its data."""
    stop = threading.Event()
    threads = [threading.Thread(target=load_fn, args=(node, stop, acked, lock, f"{round_no}_{w}")) for w in range(workers)]
    for t in threads:
        t.start()
    time.sleep(random.uniform(0.5, 1.5))
    node.kill9()
    stop.set()
    for t in threads:
        t.join()
    node.start()


def test_kill9_loses_no_acknowledged_write(tmp_path):
    data_dir = str(tmp_path / "data")
    node = Node(data_dir=data_dir).start()
    acked, lock = {}, threading.Lock()
    try:
        for round_no in range(ROUNDS):
            kill9_under_load(node, load, acked, lock, round_no, workers=8)
            tree = requests.get(f"{node.url}/.json").json() or {}
            keys = tree.get("k", {})
            pairs = tree.get("pairs", {})
            with lock:
                missing = [k for (kind, k), v in acked.items() if kind == "k" and keys.get(k) != v]
                assert not missing, f"round {round_no}: {len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
                for (kind, w), v in acked.items():
                    if kind == "pair":
                        got = pairs.get("w" + w)
                        assert got is not None and got["a"] == got["b"] and got["a"] >= v, (w, got, v)
            for w, p in pairs.items():
                assert p["a"] == p["b"], f"torn multi-path update {w}: {p}"
        assert sum(1 for kind, _ in acked if kind == "k") > 100, "the load acknowledged too few writes to mean anything"
    finally:
        node.stop()


def wire_load(node, stop, acked, lock, worker, depth=50):
    """One wire-protocol connection keeping `depth` `p` writes in flight, as SDKs pipeline them;
    a write counts as acknowledged when its `ok` arrives."""
    import asyncio
    import json

    import websockets

    async def run():
        url = node.url.replace("http://", "ws://") + "/.ws?v=5"
        try:
            async with websockets.connect(url) as ws:
                await ws.recv()  # hello
                pending, r = {}, 0

                async def send_one():
                    nonlocal r
                    r += 1
                    pending[r] = f"w{worker}_{r}"
                    await ws.send(json.dumps({"t": "d", "d": {"r": r, "a": "p", "b": {"p": f"pk/{pending[r]}", "d": r}}}))

                for _ in range(depth):
                    await send_one()
                while not stop.is_set():
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    d = msg.get("d", {})
                    if msg.get("t") == "d" and "r" in d:
                        key = pending.pop(d["r"])
                        if d["b"]["s"] == "ok":
                            with lock:
                                acked[key] = d["r"]
                        await send_one()
        except Exception:
            pass  # the node died: what was not answered was not acknowledged

    asyncio.run(run())


def test_kill9_loses_no_acknowledged_pipelined_wire_write(tmp_path):
    """The same guarantee for pipelined wire writes: many writes of a connection in flight, each
    answered only after its commit is durable, so none answered `ok` is missing after kill -9."""
    data_dir = str(tmp_path / "data")
    node = Node(data_dir=data_dir, extra_args=["--max-requests-per-second", "0"]).start()
    acked, lock = {}, threading.Lock()
    try:
        for round_no in range(ROUNDS):
            kill9_under_load(node, wire_load, acked, lock, round_no, workers=4)
            keys = (requests.get(f"{node.url}/.json").json() or {}).get("pk", {})
            with lock:
                missing = [k for k, v in acked.items() if keys.get(k) != v]
                assert not missing, f"round {round_no}: {len(missing)} acknowledged pipelined writes lost, e.g. {missing[:5]}"
        print(f"pipelined wire writes acknowledged over {ROUNDS} kill -9 rounds: {len(acked)}")
        assert len(acked) > 100, "the load acknowledged too few writes to mean anything"
    finally:
        node.stop()
