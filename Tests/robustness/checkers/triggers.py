"""Trigger delivery (issue 36) under faults: what the campaign's receiver got (`trigger-event`
records, in arrival order) against the clients' operations.

- every acknowledged change at a trigger's location was delivered at least once (an event on
  that trigger at that location whose `delta` carries the value written);
- per trigger, events are first delivered in log order (by `sequence`, then the event's place
  in its entry): a redelivery after a failover repeats an `id` already seen (allowed, with the
  same content), never a new event behind a later one;
- no event carries the value of a write that definitely did not happen (refused by the rules,
  its condition failed, never reached a node), and no event at all at a location every write
  to is refused;
- the counter's events: at least one per acknowledged increment, at most one per increment
  that may have happened;
- delivery drained at the end (no trigger had entries pending), every POST's signature valid.

`meta.triggers` maps each trigger to its location: {"r0": "/rb/r0", ..., "list": "/rb/list/*"}.
"""
from collections import defaultdict

from .history import Anomaly


def tokens_of(value):
    """The strings in a JSON value (the campaign's written values are unique strings)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(tokens_of(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(tokens_of(v) for v in value)) if value else set()
    return set()


def expectations(op, where):
    """(trigger, ref, token) an operation's change must be delivered as, for the keys a trigger
    watches (`where`: {location: trigger})."""
    out = []
    if op.f == "write":
        token = op.value
    elif op.f == "update":
        token = (op.value or {}).get("a")
    elif op.f == "cas":
        token = (op.value or {}).get("new")
    elif op.f == "push":
        if op.result and "/" + op.key + "/*" in where:
            out.append((where["/" + op.key + "/*"], f"/{op.key}/{op.result}", op.value))
        token = op.value
    else:
        return out
    if isinstance(token, str) and "/" + op.key in where:
        out.append((where["/" + op.key], "/" + op.key, token))
    return out


def order_key(event):
    index, _, seq = event["id"].partition("-")
    return int(index), int(seq or 0)


def check(records, ops, triggers, refused_keys=()):
    anomalies = []
    where = {loc: name for name, loc in triggers.items()}
    events = [r for r in records if r.get("type") == "trigger-event"]
    drained = [r for r in records if r.get("type") == "triggers-drained"]
    if not drained or not drained[-1].get("ok"):
        anomalies.append(Anomaly("triggers", "not drained", f"entries still pending at the end: {drained[-1] if drained else 'no record'}"))
    bad = sum(1 for r in records if r.get("type") == "trigger-bad-signature")
    if bad:
        anomalies.append(Anomaly("triggers", "bad signature", f"{bad} POSTs"))

    delivered = defaultdict(set)   # trigger -> {(ref, token)}
    every_token = defaultdict(list)
    per_trigger = defaultdict(list)
    for e in events:
        if e["trigger"] not in triggers:
            anomalies.append(Anomaly("triggers", "unknown trigger", e["trigger"]))
            continue
        per_trigger[e["trigger"]].append(e)
        for t in e.get("tokens", []):
            delivered[e["trigger"]].add((e["ref"], t))
            every_token[t].append(e)

    for name, evs in sorted(per_trigger.items()):
        first, last = {}, None
        for e in evs:
            seen = first.get(e["id"])
            if seen is not None:
                if (seen["ref"], seen["kind"], seen.get("tokens")) != (e["ref"], e["kind"], e.get("tokens")):
                    anomalies.append(Anomaly("triggers", "redelivery differs", f"{name} {e['id']}: {seen} then {e}"))
                continue
            first[e["id"]] = e
            k = order_key(e)
            if str(k[0]) != str(e["sequence"]):
                anomalies.append(Anomaly("triggers", "id and sequence disagree", f"{name}: {e}"))
            if last is not None and k < last:
                anomalies.append(Anomaly("triggers", "out of order", f"{name}: new event {e['id']} after {last[0]}-{last[1]}"))
            last = max(last, k) if last else k

    for op in ops:
        exp = expectations(op, where)
        if op.status == "ok":
            for trigger, ref, token in exp:
                if (ref, token) not in delivered[trigger]:
                    anomalies.append(Anomaly("triggers", "acknowledged change never delivered",
                                             f"op {op.id} ({op.f} {ref} = {token!r}) on trigger {trigger}"))
        elif op.status == "fail":
            token = op.value if isinstance(op.value, str) else None
            for t in ({token} | {tk for _, _, tk in exp}) - {None}:
                for e in every_token.get(t, []):
                    anomalies.append(Anomaly("triggers", "event for a refused write", f"op {op.id} ({op.f} {op.key}): event {e['trigger']} {e['id']}"))

    for key in refused_keys:
        name = where.get("/" + key)
        for e in per_trigger.get(name, []):
            anomalies.append(Anomaly("triggers", "event where every write is refused", f"{name} {e['id']} at {e['ref']}"))

    counter = next((name for name, loc in triggers.items() if loc.endswith("/cnt")), None)
    if counter:
        ids = {e["id"] for e in per_trigger.get(counter, [])}
        key = triggers[counter].lstrip("/")
        acked = sum(1 for o in ops if o.f == "incr" and o.key == key and o.status == "ok")
        maybe = sum(1 for o in ops if o.f == "incr" and o.key == key and o.status != "fail")
        if not acked <= len(ids) <= maybe:
            anomalies.append(Anomaly("triggers", "counter events", f"{len(ids)} distinct events for {acked} acknowledged and {maybe} possible increments"))
    return anomalies
