"""Listeners (SSE and wire). Records: `listen` starts a connection (segment) of a listener on one
key, `event` is the key's whole value after a change as that listener saw it (the first event of
a segment is the initial state). Values are unique per key, so each maps to the write that made it.

- ordered: within a segment, no value arrives after one whose write completed before it began;
  and the orders all segments saw for a key agree (no cycle);
- unique: no value twice in a segment — also not right after a snapshot install on the
  listener's node (a node restoring a snapshot once re-sent listened values that did not change;
  fixed 2026-11-25, and a one-hour run with 206 installs then showed none, so a repeat is a
  duplicate like any other);
- atomic: a listener on a multi-path update's group never sees part of an update;
- reliable: no write falls between two consecutive events of a segment (in real time, or as
  another segment saw it) — except across a snapshot install on the listener's node (`install`
  records): a node that catches up by snapshot applies the new state at once, so its listeners
  get the state, not every value in between (Firebase promises convergence, not every
  intermediate value); those are counted in `excused`, not reported as anomalies;
- resumable: each listener's last value equals the node's final value for the key.
"""
import json
import math
from collections import Counter, defaultdict

from .history import Anomaly
from .linearizable import WritesBetween, writes_by_value


def _c(v):
    return json.dumps(v, sort_keys=True)


def segments(records):
    """{(listener, conn): {"key", "node", "via", "events": [(t, canon value)]}}."""
    segs = {}
    for r in records:
        if r.get("type") == "listen":
            segs[(r["listener"], r["conn"])] = {"key": r["key"], "node": r.get("node"), "via": r.get("via"), "events": []}
        elif r.get("type") == "event":
            segs[(r["listener"], r["conn"])]["events"].append((r["t"], _c(r["value"])))
    return segs


def _installs(records):
    out = defaultdict(list)
    for r in records:
        if r.get("type") == "install":
            out[r["node"]].append((r["t_lo"], r["t_hi"]))
    return out


def check(records, ops, finals, groups=(), excused=None):
    """`finals`: {key: {node: value}}; `groups`: keys listened to as multi-path-update groups.
    `excused`, a list, receives the gaps explained by a snapshot install."""
    anomalies = []
    excused = [] if excused is None else excused
    installs = _installs(records)

    def across_install(node, t_prev, t_cur):
        return any(lo <= t_cur and hi >= t_prev for lo, hi in installs.get(node, ()))
    writes = writes_by_value(ops)
    segs = segments(records)
    edges = defaultdict(set)
    by_key = defaultdict(list)
    acked = defaultdict(list)
    for (k, _), w in writes.items():
        if w.status == "ok":
            acked[k].append(w)
    between = {k: WritesBetween(ws) for k, ws in acked.items()}
    for sid, seg in sorted(segs.items()):
        key, evs = seg["key"], seg["events"]
        by_key[key].append((sid, seg))
        name = f"listener {sid[0]} conn {sid[1]} on {key} ({seg['via']} via {seg['node']})"
        vals = [v for _, v in evs]
        # unique
        dup = {v for v, n in Counter(vals).items() if n > 1}
        if dup:
            anomalies.append(Anomaly("listeners", "duplicate event", f"{name}: {sorted(dup)[:3]}"))
        # atomic
        if key in groups:
            for v in vals:
                obj = json.loads(v) or {}
                if len(set(map(_c, obj.values()))) > 1:
                    anomalies.append(Anomaly("listeners", "partial multi-path update", f"{name}: saw {v}"))
                    break
        # ordered (real time) and reliable (real time)
        max_invoke, max_from = -math.inf, None
        for i, v in enumerate(vals):
            w = writes.get((key, v))
            if v != _c(None) and w is None:
                anomalies.append(Anomaly("listeners", "phantom event", f"{name}: {v} was never written"))
                continue
            if w is not None:
                if w.status == "fail":
                    anomalies.append(Anomaly("listeners", "event of a failed write", f"{name}: {v} (op {w.id})"))
                if w.complete < max_invoke:
                    anomalies.append(Anomaly("listeners", "out of order",
                                             f"{name}: {v} (op {w.id}, done {w.complete:.3f}) after {max_from} (began {max_invoke:.3f})"))
                if w.invoke > max_invoke:
                    max_invoke, max_from = w.invoke, f"op {w.id}"
            if i > 0:
                edges[key].add((vals[i - 1], v))
                prev = writes.get((key, vals[i - 1]))
                prev_done = prev.complete if prev is not None else -math.inf
                cur_start = w.invoke if w is not None else math.inf
                # An acknowledged write that began after the previous value's write completed
                # and completed before this value's began fell between them. (Neither of the two
                # writes themselves can match: each began before it completed.)
                x = between[key].first(prev_done, cur_start) if key in between else None
                if x is not None:
                    if across_install(seg["node"], evs[i - 1][0], evs[i][0]):
                        excused.append((name, x.id))
                    else:
                        anomalies.append(Anomaly("listeners", "missed event",
                                                 f"{name}: op {x.id} was written between {vals[i - 1]} and {v}"))
        # resumable: the last value of the listener's last segment
    last = {}
    for sid, seg in sorted(segs.items(), key=lambda s: (s[0][0], s[0][1])):
        if seg["events"]:
            last[sid[0]] = (seg, seg["events"][-1][1])
    for lid, (seg, v) in sorted(last.items()):
        node_final = finals.get(seg["key"], {}).get(seg["node"], "missing")
        if node_final != "missing" and _c(node_final) != v:
            anomalies.append(Anomaly("listeners", "did not converge",
                                     f"listener {lid} on {seg['key']} via {seg['node']}: last saw {v}, node holds {_c(node_final)}"))
    # cross-segment: orders agree (acyclic), and no segment skips what another saw in between
    for key, pairs in edges.items():
        cyc = _cycle(pairs)
        if cyc:
            anomalies.append(Anomaly("listeners", "out of order", f"{key}: listeners disagree on the order of {cyc[:4]}"))
        nxt = defaultdict(set)
        for a, b in pairs:
            nxt[a].add(b)
        for sid, seg in by_key[key]:
            vals = [v for _, v in seg["events"]]
            pos = {v: i for i, v in enumerate(vals)}
            for i in range(1, len(vals)):
                # another segment went a -> x with x seen by nobody here, and x -> ... -> b
                for x in nxt[vals[i - 1]]:
                    if x != vals[i] and x not in pos and _reaches(nxt, x, vals[i], limit=64):
                        if across_install(seg["node"], seg["events"][i - 1][0], seg["events"][i][0]):
                            excused.append((sid, x))
                            break
                        anomalies.append(Anomaly("listeners", "missed event",
                                                 f"listener {sid[0]} conn {sid[1]} on {key}: skipped {x} between {vals[i - 1]} and {vals[i]}"))
                        break
    return anomalies


def _reaches(nxt, a, b, limit):
    frontier, seen = [a], {a}
    while frontier and limit > 0:
        limit -= 1
        cur = frontier.pop()
        for y in nxt[cur]:
            if y == b:
                return True
            if y not in seen:
                seen.add(y)
                frontier.append(y)
    return False


def _cycle(pairs):
    graph = defaultdict(set)
    for a, b in pairs:
        if a != b:
            graph[a].add(b)
    color = {}
    for start in list(graph):
        if start in color:
            continue
        stack = [(start, iter(graph[start]))]
        color[start] = 1
        path = [start]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                path.pop()
            elif color.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in color:
                color[nxt] = 1
                stack.append((nxt, iter(graph[nxt])))
                path.append(nxt)
    return None
