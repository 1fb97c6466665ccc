"""Durable onDisconnect, as presence code uses it. Each wire session `sid` registers
`onDisconnect().set(false)` at `presence/<sid>` and an onDisconnect increment of `pruns/<sid>`,
then sets `presence/<sid>` to true, and later closes (or loses its connection to a fault).

Operations: f="presence", key=sid, extra `registered` (the increment's registration was
acknowledged) and `online` (the `true` was acknowledged); `presence-end` records carry the time
a session closed cleanly. Checked at the end, once every session ended and no onDisconnect write
is pending on any node:

- every session whose increment registration was acknowledged ran its writes exactly once
  (`pruns/<sid>` = 1: 0 is a lost run — e.g. its node died and nobody ran them — 2 a double run);
- no session ran them more than once, registered or not (an unknown registration may or may not
  have taken effect);
- a session that set `true` and closed cleanly while no fault was active reads `false` (with a
  fault, a write queued before its node was cut off may legitimately land after the run).
"""
from .history import Anomaly


def fault_windows(records):
    """(start, end) of each nemesis action, from its record to its heal."""
    out, open_ = [], {}
    for r in records:
        if r.get("type") == "nemesis" and r.get("action") != "end":
            open_[r["action"]] = r["t"]
        elif r.get("type") == "nemesis-heal" and r.get("action") in open_:
            out.append((open_.pop(r["action"]), r["t"]))
    out += [(t, float("inf")) for t in open_.values()]
    return out


def check(ops, presence, runs, ends, faults):
    """`presence`, `runs`: {sid: value} at the end (one node's; the state checker compares nodes);
    `ends`: {sid: time of its clean close}; `faults`: [(start, end)]."""
    anomalies = []
    sessions = [o for o in ops if o.f == "presence"]
    for o in sessions:
        sid = o.key
        n = runs.get(sid) or 0
        if n > 1:
            anomalies.append(Anomaly("presence", "onDisconnect ran more than once", f"{sid}: {n} runs"))
        elif o.extra.get("registered") and n != 1:
            anomalies.append(Anomaly("presence", "registered onDisconnect never ran",
                                     f"{sid} on {o.node}: registered at {o.invoke:.2f}, runs {n}"))
        end = ends.get(sid)
        if o.status == "ok" and o.extra.get("online") and end is not None:
            quiet = not any(start <= end and stop >= o.invoke for start, stop in faults)
            if quiet and presence.get(sid) is not False:
                anomalies.append(Anomaly("presence", "offline write lost",
                                         f"{sid} on {o.node}: closed at {end:.2f} with no fault, reads {presence.get(sid)!r}"))
    return anomalies
