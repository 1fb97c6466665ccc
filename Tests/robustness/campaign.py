#!/usr/bin/env python3
"""The fault campaign (issue 16): a local 3- or 5-node cluster behind the userspace proxy,
concurrent REST and wire-protocol clients on a small key set, SSE and wire listeners, and a
seeded nemesis (kill -9, SIGSTOP pauses, partitions: one node, the leader, minority/majority and
a bridge, leader transfer, a follower restarted with its data wiped, a follower removed from the
membership and added back with its data wiped, slow disks: an LD_PRELOAD library, slowdisk.c,
delays every sync of one node). Presence clients register onDisconnect writes, which must run
once however their session ends. Every operation goes to a
history file (invoke / ok / fail / info with times); the checkers run on it at the end.

    python3 Tests/robustness/campaign.py --nodes 3 --seconds 120 --seed 7 --out /tmp/run

The seed fixes the nemesis schedule and every client's sequence of operations; thread timing is
the machine's, so a replay repeats the same faults and workload, not the same interleaving.
With --triggers (make robustness) the namespace also has database triggers (issue 36) on the
registers, the group, the transaction key, the counter, the list's children and a location
every write to is refused by the rules, all POSTing to a receiver in this process, and the
nemesis also kills the leader; checkers/triggers.py checks delivery at the end.

Exit status 1 on any anomaly.
"""
import argparse
import asyncio
import calendar
import hashlib
import hmac
import json
import os
import random
import re
import sys
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from checkers.run import check_all, report  # noqa: E402
from cluster import OWNER, Cluster, build_slowdisk  # noqa: E402

ROOT_PATH = "rb"
REGISTERS = ["r0", "r1", "r2"]
GROUP = "m"                 # multi-path updates set m/a and m/b together
COUNTER = "cnt"
TXN = "t0"
LIST = "list"
PRESENCE = "presence"       # presence/<session>: true while connected, false by onDisconnect
PRUNS = "pruns"             # pruns/<session>: onDisconnect increments (runs of its writes)
MAX_PRESENCE_SESSIONS = 100_000  # sessions one presence worker opens at most
ONDISCONNECT_LEASE = 3      # seconds (--ondisconnect-lease): shorter than the longest fault
REQUEST_TIMEOUT = 5.0       # seconds; a request not answered by then has an unknown outcome
MAX_EVENTS_PER_LISTENER = 200_000  # bound on what one listener records
LOCKED = "locked"           # with --triggers: the rules refuse every write here
TRIGGER_SECRET = "campaign-trigger-secret"
# With --triggers: name -> (pattern, batchSize). Each location gets one event per change.
TRIGGERS = {**{k: (f"/{ROOT_PATH}/{k}", 1) for k in REGISTERS},
            "group": (f"/{ROOT_PATH}/{GROUP}", 1), "txn": (f"/{ROOT_PATH}/{TXN}", 1), "cnt": (f"/{ROOT_PATH}/{COUNTER}", 1),
            "list": (f"/{ROOT_PATH}/{LIST}/{{id}}", 8), "locked": (f"/{ROOT_PATH}/{LOCKED}", 1)}
TRIGGER_RULES = {"rules": {".read": True, ".write": True, ROOT_PATH: {LOCKED: {".validate": False}}}}


class History:
    def __init__(self, path):
        self.f = open(path, "w")
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.next = 0

    def now(self):
        return time.monotonic() - self.t0

    def write(self, rec):
        with self.lock:
            rec.setdefault("t", self.now())
            self.f.write(json.dumps(rec) + "\n")

    def invoke(self, **rec):
        with self.lock:
            self.next += 1
            op = self.next
        self.write(dict(op=op, type="invoke", **rec))
        return op

    def done(self, op, status, **rec):
        self.write(dict(op=op, type=status, **rec))

    def close(self):
        self.f.close()


def refused(e):
    """A request that never reached the node cannot have had an effect."""
    s = repr(e)
    return isinstance(e, requests.ConnectionError) and ("NewConnectionError" in s or "Connection refused" in s)


def url_of(key):
    return f"{ROOT_PATH}/{key}"


# --- REST clients -------------------------------------------------------------------------------

class RestClient(threading.Thread):
    def __init__(self, name, seed, cluster, history, stop, refusals=False):
        super().__init__(daemon=True)
        self.name, self.rng, self.c, self.h, self.stop = name, random.Random(seed), cluster, history, stop
        self.n = 0
        self.s = requests.Session()
        self.refusals = refusals  # --triggers: some writes go where the rules refuse them

    def token(self):
        self.n += 1
        return f"{self.name}-{self.n}"

    def call(self, op, fn, ok_codes, fail_codes=(400, 404, 412)):
        """Runs one request; records ok / fail / info. Returns the response when ok."""
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - any failure of the request is an outcome to record
            self.h.done(op, "fail" if refused(e) else "info", error=type(e).__name__)
            return None
        if r.status_code in ok_codes:
            return r
        self.h.done(op, "fail" if r.status_code in fail_codes else "info", code=r.status_code)
        return None

    def run(self):
        while not self.stop.is_set():
            node = self.rng.choice(self.c.ids)
            base = self.c.url(node)
            roll = self.rng.random()
            try:
                self.one(node, base, roll)
            except Exception as e:  # noqa: BLE001
                print(f"{self.name}: client error {e!r}", file=sys.stderr)

    def one(self, node, base, roll):
        h, t = self.h, REQUEST_TIMEOUT
        if self.refusals and self.rng.random() < 0.05:
            v = self.token()
            op = h.invoke(client=self.name, f="refused", key=url_of(LOCKED), value=v, node=node, via="rest")
            if self.call(op, lambda: self.s.put(f"{base}/{url_of(LOCKED)}.json?print=silent", data=json.dumps(v), timeout=t),
                         (), fail_codes=(401, 403)):
                h.done(op, "ok")  # not reached: no answer is a success
            return
        if roll < 0.25:
            key, v = self.rng.choice(REGISTERS), self.token()
            op = h.invoke(client=self.name, f="write", key=url_of(key), value=v, node=node, via="rest")
            if self.call(op, lambda: self.s.put(f"{base}/{url_of(key)}.json?print=silent", data=json.dumps(v), timeout=t), (200, 204)):
                h.done(op, "ok")
        elif roll < 0.35:
            v = self.token()
            body = {"a": v, "b": v}
            op = h.invoke(client=self.name, f="update", key=url_of(GROUP), value=body, node=node, via="rest")
            if self.call(op, lambda: self.s.patch(f"{base}/{url_of(GROUP)}.json?print=silent", data=json.dumps(body), timeout=t), (200, 204)):
                h.done(op, "ok")
        elif roll < 0.60:
            key = self.rng.choice(REGISTERS + [f"{GROUP}/a", f"{GROUP}/b"])
            lin = self.rng.random() < 0.6
            op = h.invoke(client=self.name, f="read", key=url_of(key), node=node, via="rest",
                          consistency="linearizable" if lin else "default")
            q = "?consistency=linearizable" if lin else ""
            r = self.call(op, lambda: self.s.get(f"{base}/{url_of(key)}.json{q}", timeout=t), (200,), fail_codes=range(400, 600))
            if r is not None:
                h.done(op, "ok", result=r.json())
        elif roll < 0.72:
            # A transaction: read with the ETag, then a conditional write on it.
            try:
                g = self.s.get(f"{base}/{url_of(TXN)}.json", headers={"X-Firebase-ETag": "true"}, timeout=t)
            except requests.RequestException:
                return
            if g.status_code != 200:
                return
            old, etag, new = g.json(), g.headers.get("ETag"), self.token()
            op = h.invoke(client=self.name, f="cas", key=url_of(TXN), value={"old": old, "new": new}, node=node, via="rest")
            if self.call(op, lambda: self.s.put(f"{base}/{url_of(TXN)}.json?print=silent", data=json.dumps(new),
                                                headers={"if-match": etag}, timeout=t), (200, 204)):
                h.done(op, "ok")
        elif roll < 0.86:
            amount = self.rng.randint(1, 1000)
            op = h.invoke(client=self.name, f="incr", key=url_of(COUNTER), value=amount, node=node, via="rest")
            body = {".sv": {"increment": amount}}
            if self.call(op, lambda: self.s.put(f"{base}/{url_of(COUNTER)}.json?print=silent", data=json.dumps(body), timeout=t), (200, 204)):
                h.done(op, "ok")
        else:
            v = self.token()
            op = h.invoke(client=self.name, f="push", key=url_of(LIST), value=v, node=node, via="rest")
            r = self.call(op, lambda: self.s.post(f"{base}/{url_of(LIST)}.json", data=json.dumps(v), timeout=t), (200,))
            if r is not None:
                h.done(op, "ok", result=r.json()["name"])


# --- SSE listeners ------------------------------------------------------------------------------

def apply_at(value, path, data, merge):
    """The listened value after a put (or a patch, `merge`) of `data` at `path` below it."""
    parts = [p for p in path.strip("/").split("/") if p]
    if not parts:
        if merge:
            base = dict(value) if isinstance(value, dict) else {}
            for k, v in data.items():
                base = apply_at(base, k, v, False)
            return base or None
        return data
    base = dict(value) if isinstance(value, dict) else {}
    child = apply_at(base.get(parts[0]), "/".join(parts[1:]), data, merge)
    if child is None:
        base.pop(parts[0], None)
    else:
        base[parts[0]] = child
    return base or None


class SseListener(threading.Thread):
    def __init__(self, name, seed, cluster, history, stop, key, stop_writes=None):
        super().__init__(daemon=True)
        self.name, self.rng, self.c, self.h, self.stop, self.key = name, random.Random(seed), cluster, history, stop, key
        self.conn = 0
        self.events = 0

    def run(self):
        while not self.stop.is_set():
            node = self.rng.choice(self.c.ids)
            self.conn += 1
            try:
                self.listen(node)
            except Exception:  # noqa: BLE001 - a dropped stream: reconnect (a new segment)
                pass
            time.sleep(0.2)

    def listen(self, node):
        r = requests.get(f"{self.c.url(node)}/{url_of(self.key)}.json", headers={"Accept": "text/event-stream"},
                         stream=True, timeout=(2, 8))
        if r.status_code != 200:
            return
        self.h.write(dict(type="listen", listener=self.name, conn=self.conn, key=url_of(self.key), node=node, via="sse"))
        value, event = None, None
        for line in r.iter_lines(decode_unicode=True):
            if self.stop.is_set() or self.events >= MAX_EVENTS_PER_LISTENER:
                break
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("put", "patch"):
                d = json.loads(line[5:])
                value = apply_at(value, d["path"], d["data"], event == "patch")
                self.events += 1
                self.h.write(dict(type="event", listener=self.name, conn=self.conn, key=url_of(self.key), value=value))
            elif line.startswith("data:") and event in ("cancel", "auth_revoked"):
                break
        r.close()


# --- wire protocol clients ----------------------------------------------------------------------

class WireWorker(threading.Thread):
    """One asyncio loop: a listener on a key and a writer (sets and merges), each reconnecting to a
    random node after any failure."""

    def __init__(self, name, seed, cluster, history, stop, key, stop_writes):
        super().__init__(daemon=True)
        self.name, self.rng, self.c, self.h, self.stop, self.key = name, random.Random(seed), cluster, history, stop, key
        self.stop_writes = stop_writes
        self.conn = 0
        self.n = 0

    def run(self):
        asyncio.run(self.main())

    async def main(self):
        await asyncio.gather(self.listener(), self.writer())

    async def connect(self, node):
        from wire import WireClient
        return await asyncio.wait_for(WireClient.connect(self.c.url(node), "default"), 5)

    async def listener(self):
        while not self.stop.is_set():
            node = self.rng.choice(self.c.ids)
            self.conn += 1
            client = None
            try:
                client = await self.connect(node)
                path = "/" + url_of(self.key)
                _, resp = await client.request("q", {"p": path, "h": ""}, timeout=5)
                if resp.get("s") != "ok":
                    continue
                self.h.write(dict(type="listen", listener=self.name, conn=self.conn, key=url_of(self.key), node=node, via="wire"))
                value = None
                # Pushes before the "ok" were kept by the client.
                pending = list(client.pushes)
                while not self.stop.is_set():
                    d = pending.pop(0) if pending else await client.next_push(timeout=8)
                    if d.get("a") not in ("d", "m"):
                        continue
                    b = d["b"]
                    rel = b["p"].strip("/")[len(url_of(self.key)):]
                    value = apply_at(value, rel, b["d"], d["a"] == "m")
                    self.h.write(dict(type="event", listener=self.name, conn=self.conn, key=url_of(self.key), value=value))
            except Exception:  # noqa: BLE001
                pass
            finally:
                if client is not None:
                    try:
                        await asyncio.wait_for(client.close(), 2)
                    except Exception:  # noqa: BLE001
                        pass
            await asyncio.sleep(0.2)

    async def writer(self):
        client, node = None, None
        while not self.stop_writes.is_set():
            if client is None:
                node = self.rng.choice(self.c.ids)
                try:
                    client = await self.connect(node)
                except Exception:  # noqa: BLE001
                    client = None
                    await asyncio.sleep(0.3)
                    continue
            self.n += 1
            v = f"{self.name}-{self.n}"
            if self.rng.random() < 0.7:
                key = self.rng.choice(REGISTERS)
                op = self.h.invoke(client=self.name, f="write", key=url_of(key), value=v, node=node, via="wire")
                action, body = "p", {"p": "/" + url_of(key), "d": v}
            else:
                op = self.h.invoke(client=self.name, f="update", key=url_of(GROUP), value={"a": v, "b": v}, node=node, via="wire")
                action, body = "m", {"p": "/" + url_of(GROUP), "d": {"a": v, "b": v}}
            try:
                _, resp = await client.request(action, body, timeout=REQUEST_TIMEOUT)
                # "unavailable" is the wire's 503: the node may not know the write's fate.
                st = resp.get("s")
                outcome = "ok" if st == "ok" else "info" if st == "unavailable" else "fail"
                self.h.done(op, outcome, wire_status=st, message=resp.get("d"))
            except Exception as e:  # noqa: BLE001 - sent, answer lost: unknown
                if os.environ.get("CAMPAIGN_DEBUG"):
                    import traceback
                    traceback.print_exc()
                self.h.done(op, "info", error=type(e).__name__)
                try:
                    await asyncio.wait_for(client.close(), 2)
                except Exception:  # noqa: BLE001
                    pass
                client = None
            await asyncio.sleep(0.01)


class PresenceWorker(threading.Thread):
    """Presence as the SDK docs write it, over the wire: each session registers
    `onDisconnect().set(false)` on presence/<sid> and an onDisconnect increment of pruns/<sid>,
    sets presence/<sid> to true, keeps the connection a while (a fault may end it), then closes.
    The onDisconnect writes must run once however the session ends (checkers/presence.py)."""

    def __init__(self, name, seed, cluster, history, stop):
        super().__init__(daemon=True)
        self.name, self.rng, self.c, self.h, self.stop = name, random.Random(seed), cluster, history, stop

    def run(self):
        asyncio.run(self.main())

    async def main(self):
        from websockets.protocol import State
        from wire import WireClient
        k = 0
        while not self.stop.is_set() and k < MAX_PRESENCE_SESSIONS:
            k += 1
            sid = f"{self.name}-{k}"
            node = self.rng.choice(self.c.ids)
            hold = self.rng.uniform(0.2, 2.0)
            op = self.h.invoke(client=self.name, f="presence", key=sid, node=node, via="wire")
            statuses, client = [], None
            try:
                client = await asyncio.wait_for(WireClient.connect(self.c.url(node), "default"), 5)
                for action, body in [("o", {"p": f"/{url_of(PRESENCE)}/{sid}", "d": False}),
                                     ("o", {"p": f"/{url_of(PRUNS)}/{sid}", "d": {".sv": {"increment": 1}}}),
                                     ("p", {"p": f"/{url_of(PRESENCE)}/{sid}", "d": True})]:
                    _, resp = await client.request(action, body, timeout=REQUEST_TIMEOUT)
                    statuses.append(resp.get("s"))
                    if statuses[-1] != "ok":
                        break
            except Exception as e:  # noqa: BLE001 - the answer was lost: unknown
                statuses.append(type(e).__name__)
            registered = statuses[1:2] == ["ok"]
            online = statuses == ["ok", "ok", "ok"]
            self.h.done(op, "ok" if online else "info", registered=registered, online=online, statuses=statuses)
            if client is not None:
                await asyncio.sleep(hold)
                if client.ws.state is State.OPEN:
                    self.h.write(dict(type="presence-end", sid=sid))
                try:
                    await asyncio.wait_for(client.close(), 3)
                except Exception:  # noqa: BLE001
                    pass
            else:
                await asyncio.sleep(0.3)


def wait_ondisconnect_drained(c, timeout=90):
    """Until no node has onDisconnect writes pending (every ended session's writes ran)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if all(c.status(i)["onDisconnect"]["pendingSessions"] == 0 for i in c.ids):
                return True
        except (requests.RequestException, ValueError, KeyError):
            pass
        time.sleep(0.5)
    return False


# --- triggers (--triggers) ---------------------------------------------------------------------

class TriggerReceiver:
    """The triggers' HTTP endpoint: checks each POST's signature and records every CloudEvent it
    carries (a batch is an array) in arrival order, then answers 200."""

    def __init__(self, history):
        h = history

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:
                    # The sender died mid-request (its node killed): nothing was delivered, and
                    # it gets no answer; the event is retried from the replicated cursor.
                    h.write(dict(type="trigger-truncated", trigger=self.headers.get("X-Ember-Trigger")))
                    self.close_connection = True
                    return
                want = "sha256=" + hmac.new(TRIGGER_SECRET.encode(), body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(want, self.headers.get("X-Ember-Signature", "")):
                    h.write(dict(type="trigger-bad-signature", trigger=self.headers.get("X-Ember-Trigger")))
                else:
                    doc = json.loads(body)
                    for e in doc if isinstance(doc, list) else [doc]:
                        h.write(dict(type="trigger-event", trigger=e["trigger"], id=e["id"], sequence=e["sequence"], ref=e["ref"],
                                     kind=e["type"].rsplit(".", 1)[1], tokens=sorted(tokens_in(e["data"]["delta"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def tokens_in(value):
    from checkers.triggers import tokens_of
    return tokens_of(value)


def define_triggers(c, receiver, timeout=60):
    doc = {name: {"path": path, "on": ["written"] if "{" not in path else ["created"], "url": receiver.url,
                  "secret": TRIGGER_SECRET, "batchSize": batch, "retries": 1000, "backoffMs": 20, "maxBackoffMs": 500,
                  "retainEntries": 10_000_000}
           for name, (path, batch) in TRIGGERS.items()}
    deadline = time.time() + timeout
    while time.time() < deadline:
        for i in c.ids:
            try:
                r = requests.put(f"{c.url(i)}/.settings/triggers.json", data=json.dumps(doc), headers=OWNER, timeout=10)
                if r.status_code == 200:
                    return
            except requests.RequestException:
                pass
        time.sleep(0.5)
    raise RuntimeError("could not define the triggers")


def wait_triggers_drained(c, timeout=120):
    """Until the leader reports no trigger entries pending; the last states read."""
    deadline, states = time.time() + timeout, None
    while time.time() < deadline:
        lead = current_leader(c)
        try:
            if lead:
                r = requests.get(f"{c.url(lead)}/.ember/triggers", headers=OWNER, timeout=5)
                states = {n: t["state"] for n, t in r.json()["triggers"].items()}
                if len(states) == len(TRIGGERS) and all(s["pending"] == 0 for s in states.values()):
                    return True, states
        except (requests.RequestException, ValueError, KeyError):
            pass
        time.sleep(0.5)
    return False, states


# --- nemesis ------------------------------------------------------------------------------------

FAULTS = ["kill", "pause", "partition-one", "partition-leader", "partition-majority", "bridge", "transfer", "wipe",
          "member", "slow-disk"]


def current_leader(c):
    for i in c.ids:
        try:
            lid = c.status(i, timeout=1)["leader"]
            if lid:
                return lid
        except Exception:  # noqa: BLE001
            pass
    return None


def nemesis(c, h, rng, stop, faults):
    ids = c.ids
    deck = []
    while not stop.is_set():
        # Every kind once per round, in a seeded order: short runs still cover them all.
        if not deck:
            deck = faults[:]
            rng.shuffle(deck)
        kind = deck.pop()
        duration = rng.uniform(1.0, 5.0)
        victim = rng.choice(ids)
        rec = dict(type="nemesis", action=kind)
        if kind == "kill":
            c.kill9(victim)
            rec["nodes"] = [victim]
        elif kind == "kill-leader":
            victim = current_leader(c) or victim
            c.kill9(victim)
            rec["nodes"] = [victim]
        elif kind == "pause":
            c.pause(victim)
            rec["nodes"] = [victim]
        elif kind == "partition-one":
            c.partition([[victim], [i for i in ids if i != victim]], mode=rng.choice(["blackhole", "drop"]))
            rec["nodes"] = [victim]
        elif kind == "partition-leader":
            lead = current_leader(c) or victim
            c.partition([[lead], [i for i in ids if i != lead]], mode=rng.choice(["blackhole", "drop"]))
            rec["nodes"] = [lead]
        elif kind == "partition-majority":
            shuffled = ids[:]
            rng.shuffle(shuffled)
            minority = shuffled[:(len(ids) - 1) // 2]
            c.partition([minority, shuffled[len(minority):]])
            rec["nodes"] = minority
        elif kind == "bridge":
            shuffled = ids[:]
            rng.shuffle(shuffled)
            mid = len(ids) // 2
            bridge = shuffled[mid]
            c.partition([shuffled[:mid + 1], shuffled[mid:]])
            rec["nodes"] = [bridge]
        elif kind == "transfer":
            lead = current_leader(c)
            others = [i for i in ids if i != lead]
            target = rng.choice(others)
            rec["nodes"] = [target]
            rec["code"] = c.transfer(target)
        elif kind == "wipe":
            lead = current_leader(c)
            followers = [i for i in ids if i != lead]
            victim = rng.choice(followers)
            rec["nodes"] = [victim]
            c.kill9(victim)
            time.sleep(duration / 2)
            c.wipe(victim)
        elif kind == "slow-disk":
            # Every sync of one node (the leader half the time) takes this much longer.
            lead = current_leader(c)
            if lead and rng.random() < 0.5:
                victim = lead
            ms = rng.choice([20, 100, 500, 1500])
            rec["nodes"] = [victim]
            rec["ms"] = ms
            c.slow_disk(victim, ms)
        elif kind == "member":
            # Removed from the membership, wiped, started with --join; added back at the heal.
            lead = current_leader(c)
            victim = rng.choice([i for i in ids if i != lead])
            rec["nodes"] = [victim]
            rec["code"] = c.rejoin(victim)
        h.write(rec)
        stop.wait(duration)
        c.heal_all()
        heal = dict(type="nemesis-heal", action=kind)
        if kind == "member":
            heal["readded"] = c.readded.get(rec["nodes"][0])
        h.write(heal)
        stop.wait(rng.uniform(1.0, 3.0))


# --- the run ------------------------------------------------------------------------------------

def final_state(c, h):
    """Each node's values and state hash (after healing and converging)."""
    for i in c.ids:
        try:
            data = requests.get(f"{c.url(i)}/{ROOT_PATH}.json", timeout=30).json() or {}
            st = c.status(i, timeout=10)
        except Exception as e:  # noqa: BLE001
            h.write(dict(type="final", node=i, hash=f"unreachable: {e!r}", values={}))
            continue
        values = {url_of(k): data.get(k) for k in REGISTERS + [COUNTER, TXN, LIST, GROUP, PRESENCE, PRUNS]}
        for child in ("a", "b"):
            values[url_of(f"{GROUP}/{child}")] = (data.get(GROUP) or {}).get(child)
        h.write(dict(type="final", node=i, hash=st["stateHash"], appliedIndex=st["appliedIndex"], values=values))


INSTALL_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\+0000 .*installed snapshot from leader")


def record_installs(c, h):
    """Snapshot installs from each node's log (second resolution), for the listener checker."""
    for i in c.ids:
        try:
            with open(os.path.join(c.dir, f"{i}.log"), errors="replace") as f:
                for line in f:
                    m = INSTALL_LINE.match(line)
                    if m:
                        wall = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
                        lo = wall - h.wall0
                        h.write(dict(type="install", node=i, t_lo=lo - 0.1, t_hi=lo + 1.1, t=lo))
        except OSError:
            pass


def run(args):
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    hist_path = os.path.join(args.out, "history.jsonl")
    h = History(hist_path)
    meta = dict(type="meta", seed=args.seed, nodes=args.nodes, seconds=args.seconds,
                groups=[url_of(GROUP)], counters=[url_of(COUNTER)], txn_keys=[url_of(TXN)], lists=[url_of(LIST)],
                presence=[url_of(PRESENCE), url_of(PRUNS)])
    if args.triggers:
        meta["triggers"] = {name: path.replace("{id}", "*") for name, (path, _) in TRIGGERS.items()}
        meta["refused_keys"] = [url_of(LOCKED)]
    h.write(meta)
    faults = [f for f in FAULTS if f in args.faults.split(",")] if args.faults else FAULTS
    if args.triggers and not args.faults:
        faults = faults + ["kill-leader"]
    slowdisk = build_slowdisk(args.out) if "slow-disk" in faults else None
    if "slow-disk" in faults and not slowdisk:
        print("campaign: no C compiler for slowdisk.c; running without slow disks", file=sys.stderr)
        faults = [f for f in faults if f != "slow-disk"]
    c = Cluster(os.path.join(args.out, "cluster"), n=args.nodes,
                extra=["--snapshot-entries", str(args.snapshot_entries), "--ondisconnect-lease", str(ONDISCONNECT_LEASE)],
                slowdisk=slowdisk, rules=TRIGGER_RULES if args.triggers else None)
    receiver = TriggerReceiver(h) if args.triggers else None
    # Writers stop first; listeners stay connected until the final state is recorded.
    stop, nem_stop, listen_stop = threading.Event(), threading.Event(), threading.Event()
    try:
        c.leader(timeout=60)
        if receiver:
            define_triggers(c, receiver)
        workers = [RestClient(f"c{i}", rng.getrandbits(64), c, h, stop, refusals=bool(receiver)) for i in range(args.clients)]
        workers += [SseListener(f"sse-{k}", rng.getrandbits(64), c, h, listen_stop, k) for k in REGISTERS + [GROUP]]
        workers += [WireWorker(f"w{i}", rng.getrandbits(64), c, h, listen_stop, k, stop) for i, k in enumerate([REGISTERS[0], GROUP])]
        workers += [PresenceWorker(f"p{i}", rng.getrandbits(64), c, h, stop) for i in range(2)]
        for w in workers:
            w.start()
        nem = threading.Thread(target=nemesis, args=(c, h, random.Random(rng.getrandbits(64)), nem_stop, faults), daemon=True)
        nem.start()
        time.sleep(args.seconds)
        nem_stop.set()
        nem.join(30)
        c.heal_all()
        h.write(dict(type="nemesis", action="end"))
        c.leader(timeout=60)
        # Writers stop; listeners stay connected while the cluster converges.
        time.sleep(2)
        stop.set()
        for w in workers:
            if isinstance(w, (RestClient, PresenceWorker)):
                w.join(REQUEST_TIMEOUT + 15)
        time.sleep(REQUEST_TIMEOUT + 1)  # the wire writers' last requests
        # Every session has ended: the onDisconnect writes of all of them run (some by a lease).
        h.write(dict(type="ondisconnect-drained", ok=wait_ondisconnect_drained(c)))
        converged = c.wait_converged(timeout=120)
        if receiver:
            ok, states = wait_triggers_drained(c)
            h.write(dict(type="triggers-drained", ok=ok, states=states))
        time.sleep(3)  # listeners receive the last events
        final_state(c, h)
        listen_stop.set()
        for w in workers:
            w.join(10)
    finally:
        stop.set()
        listen_stop.set()
        nem_stop.set()
        c.down()
        if receiver:
            receiver.close()
        record_installs(c, h)
        h.close()
    results, summary = check_all(load_history(hist_path), budget=args.budget)
    summary["seed"] = args.seed
    summary["nodes"] = args.nodes
    summary["converged"] = bool(converged) and len({s.get("stateHash") for s in converged.values()}) == 1
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    failed = report(results, summary)
    return 1 if failed else 0


def load_history(path):
    from checkers.history import load
    return load(path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--faults", default="", help=f"comma-separated subset of {','.join(FAULTS)} (default: all)")
    p.add_argument("--snapshot-entries", type=int, default=200)
    p.add_argument("--budget", type=int, default=2_000_000, help="linearizability search steps per key")
    p.add_argument("--triggers", action="store_true",
                   help="triggers on the workload's keys delivered to a receiver here, leader kills, checkers/triggers.py")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
