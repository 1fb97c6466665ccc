"""Writes that share batches in a 3-node cluster (cluster_helpers.py): a mixed batch where only the denied
write and the failed compare-and-set fail, kill -9 of the leader under pipelined wire load,
pipelined writes at a follower applied once and in order, a stamped write resent to another node."""
import json
import os
import sys
import threading
import uuid

import requests

from cluster_helpers import Cluster, cluster, script  # noqa: F401, F811  (`cluster`: the module's fixture)


def test_mixed_batch_one_denied_one_cas_failing_the_rest_applied(cluster):
    """Writes entering at once (through a follower and the leader, so they share forwards, peer
    flushes, log entries and apply transactions): a rules denial and a failed compare-and-set
    affect only their own write."""
    ns = "mix" + uuid.uuid4().hex[:8]
    owner = {"Authorization": "Bearer owner"}
    leader = cluster.leader()
    follower = cluster.followers()[0]
    rules = {"rules": {".read": True, "$k": {".write": "newData.isNumber() && newData.val() > 10"}}}
    assert requests.put(cluster.url(leader) + f"/.settings/rules.json?ns={ns}", data=json.dumps(rules), headers=owner).status_code == 200
    assert requests.put(cluster.url(follower) + f"/cas.json?ns={ns}", data="100").status_code == 200
    etag = requests.get(cluster.url(follower) + f"/cas.json?ns={ns}", headers={"X-Firebase-ETag": "true"}).headers["ETag"]
    start = threading.Barrier(34)
    results = {}

    def put(name, url, body, headers=None):
        start.wait()
        results[name] = requests.put(f"{url}/{name}.json?ns={ns}", data=body, headers=headers or {}, timeout=15)

    jobs = [("ok%d" % i, cluster.url(follower if i % 2 else leader), str(20 + i), None) for i in range(30)]
    jobs.append(("denied", cluster.url(follower), "1", None))
    jobs.append(("cas", cluster.url(follower), "200", {"if-match": "not-" + etag}))
    jobs.append(("cas2", cluster.url(leader), "300", None))
    threads = [threading.Thread(target=put, args=job) for job in jobs]
    for t in threads:
        t.start()
    start.wait()
    for t in threads:
        t.join()
    assert results["denied"].status_code == 401, results["denied"].text
    assert "error" in results["denied"].json()
    assert results["cas"].status_code == 412, results["cas"].text
    for name, _, body, _ in jobs:
        if name.startswith("ok") or name == "cas2":
            assert results[name].status_code == 200 and results[name].json() == int(body), (name, results[name].text)
    cluster.wait_converged()
    expected = {f"ok{i}": 20 + i for i in range(30)} | {"cas": 100, "cas2": 300}
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/.json?ns={ns}").json() == expected, n["id"]


async def pipelined_wire_load(c, ns, worker, acked, stop, window=64):
    """Pipelined wire-protocol puts (`window` in flight) on one connection at a time; a put is
    acknowledged only by its `ok` response. A dead node's connection moves to the next node."""
    import asyncio
    import websockets
    seq, attempt = 0, worker
    while not stop.is_set():
        nodes = c.nodes
        url = nodes[attempt % len(nodes)]["url"].replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
        attempt += 1
        try:
            ws = await asyncio.wait_for(websockets.connect(url, max_size=1 << 24), 2)
            await asyncio.wait_for(ws.recv(), 2)  # hello
        except Exception:
            await asyncio.sleep(0.05)
            continue
        inflight, slots = {}, asyncio.Semaphore(window)

        async def reader():
            while True:
                frame = await ws.recv()
                if frame.isdigit() and len(frame) <= 6:
                    frame = "".join([await ws.recv() for _ in range(int(frame))])
                d = json.loads(frame).get("d", {})
                if "r" in d and d["r"] in inflight:
                    key, value = inflight.pop(d["r"])
                    slots.release()
                    if d.get("b", {}).get("s") == "ok":
                        acked[key] = value

        reading = asyncio.create_task(reader())
        try:
            r = 0
            while not stop.is_set() and not reading.done():
                try:
                    await asyncio.wait_for(slots.acquire(), 0.5)
                except asyncio.TimeoutError:
                    continue
                r += 1
                seq += 1
                key = f"p{worker}_{seq}"
                inflight[r] = (key, seq)
                # One multi-path update: the put, and this worker's latest sequence number (the
                # order check: a replica's `lastw` may never fall behind an acknowledged write).
                update = {f"pk/{key}": seq, f"lastw/w{worker}": seq}
                await ws.send(json.dumps({"t": "d", "d": {"r": r, "a": "m", "b": {"p": "/", "d": update}}}))
        except Exception:
            pass  # the node died mid-stream: what was not answered ok is not acknowledged
        finally:
            # Answers still on their way count once they arrive.
            try:
                await asyncio.wait_for(asyncio.shield(reading), 1.0 if stop.is_set() else 0.01)
            except BaseException:
                pass
            reading.cancel()
            try:
                await ws.close()
            except Exception:
                pass


def test_kill9_leader_under_pipelined_wire_load_loses_no_acknowledged_write(tmp_path):
    import asyncio
    c = Cluster(tmp_path / "c")
    ns = "pl" + uuid.uuid4().hex[:8]
    acked = {}
    try:
        old = c.leader()

        async def run():
            stop = asyncio.Event()
            workers = [asyncio.create_task(pipelined_wire_load(c, ns, w, acked, stop)) for w in range(3)]
            await asyncio.sleep(1.5)
            before = len(acked)
            await asyncio.to_thread(c.kill9, old)
            survivors = [n["id"] for n in c.nodes if n["id"] != old]
            new = await asyncio.to_thread(c.leader, survivors, 10)
            assert new != old
            await asyncio.sleep(1.5)  # pipelined writes continue under the new leader
            stop.set()
            await asyncio.gather(*workers)
            return before

        before = asyncio.run(run())
        assert before > 20 and len(acked) > before, f"{before} acknowledged before the kill, {len(acked)} in all"
        script("start-node", "--dir", c.dir, "--id", old)
        c.wait_converged(timeout=30)
        for n in c.nodes:
            data = requests.get(f"{n['url']}/pk.json?ns={ns}", timeout=10).json() or {}
            lost = [k for k, v in acked.items() if data.get(k) != v]
            assert not lost, f"{n['id']} lost {len(lost)} acknowledged pipelined writes, e.g. {lost[:5]}"
            # A worker's writes apply in the order it sent them: its last sequence number is at
            # least that of every write of its that was acknowledged.
            last = requests.get(f"{n['url']}/lastw.json?ns={ns}", timeout=10).json() or {}
            for w in range(3):
                top = max((v for k, v in acked.items() if k.startswith(f"p{w}_")), default=0)
                assert last.get(f"w{w}", 0) >= top, f"{n['id']}: worker {w} last {last.get(f'w{w}')} < acknowledged {top}"
        print(f"{len(acked)} acknowledged pipelined writes ({before} before the kill)")
    finally:
        c.down()


def test_pipelined_wire_writes_at_a_follower_apply_once_and_in_order(cluster):
    """2,000 `p` requests sent on a follower's WebSocket without waiting: the follower forwards
    them to the leader in batches; every answer is `ok`, in request order; a listener on the
    leader sees the counter only rise; every replica ends with every write exactly as sent."""
    import asyncio
    import websockets
    ns = "ord" + uuid.uuid4().hex[:8]
    follower, leader = cluster.followers()[0], cluster.leader()
    total = 2000
    seen = []
    sse = requests.get(cluster.url(leader) + f"/last.json?ns={ns}", headers={"Accept": "text/event-stream"}, stream=True, timeout=60)

    def listen():
        for line in sse.iter_lines(decode_unicode=True):
            if line and line.startswith("data: "):
                d = json.loads(line[6:])
                if d and isinstance(d.get("data"), int):
                    seen.append(d["data"])
                    if d["data"] == total - 1:
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()

    async def run():
        url = cluster.url(follower).replace("http://", "ws://") + f"/.ws?v=5&ns={ns}"
        async with websockets.connect(url, max_size=1 << 24) as ws:
            await ws.recv()  # hello
            for i in range(total):
                update = {f"items/i{i:05d}": i, "last": i}
                await ws.send(json.dumps({"t": "d", "d": {"r": i + 1, "a": "m", "b": {"p": "/", "d": update}}}))
            answers = []
            while len(answers) < total:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if frame.isdigit() and len(frame) <= 6:
                    frame = "".join([await ws.recv() for _ in range(int(frame))])
                d = json.loads(frame).get("d", {})
                if "r" in d:
                    answers.append((d["r"], d.get("b", {}).get("s")))
            return answers

    answers = asyncio.run(run())
    assert [r for r, _ in answers] == list(range(1, total + 1)), "answers out of request order"
    assert all(s == "ok" for _, s in answers), [a for a in answers if a[1] != "ok"][:5]
    listener.join(30)
    sse.close()
    assert seen and seen[-1] == total - 1, seen[-5:]
    assert all(a <= b for a, b in zip(seen, seen[1:])), "the counter went backwards: writes applied out of order"
    cluster.wait_converged()
    expected = {f"i{i:05d}": i for i in range(total)}
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/items.json?ns={ns}", timeout=10).json() == expected, n["id"]
        assert requests.get(n["url"] + f"/last.json?ns={ns}", timeout=10).json() == total - 1, n["id"]


def test_a_stamped_write_sent_again_to_another_node_applies_once(cluster):
    """A client that lost the answer of a write made through a follower sends it again to the
    leader (and to the other follower) with the same stamp: the log applies it once, every
    replica agrees, and every copy is answered ok."""
    import asyncio
    sys.path.insert(0, os.path.dirname(__file__))
    from wire import WireClient
    ns = "once" + uuid.uuid4().hex[:8]
    inc = {".sv": {"increment": 1}}
    f1, f2 = cluster.followers()[:2]
    leader = cluster.leader()

    async def send(node_id, n):
        c = await WireClient.connect(cluster.url(node_id), ns)
        _, resp = await c.request("m", {"p": "/", "d": {"c": inc, "last": n}, "w": {"id": "dev-1", "n": n}})
        await c.close()
        return resp["s"]

    async def go():
        answers = []
        for n in range(1, 6):
            for node_id in (f1, leader, f2):
                answers.append(await send(node_id, n))
        return answers

    answers = asyncio.run(go())
    assert answers == ["ok"] * 15, answers
    cluster.wait_converged()
    for n in cluster.nodes:
        assert requests.get(n["url"] + f"/.json?ns={ns}", timeout=10).json() == {"c": 5, "last": 5}, n["id"]
