"""Runs every checker on one history file: `python3 -m checkers.run HISTORY.jsonl` (from
Tests/robustness). Prints one line per checker and each anomaly; exits 1 on any anomaly."""
import sys
from collections import Counter

from . import counters, linearizable, listeners, presence, pushes, state, transactions, triggers
from .history import load, of, pair


def finals_by_key(records):
    """{key: {node: value}} from the `final` records."""
    out = {}
    for r in of(records, "final"):
        for key, value in r.get("values", {}).items():
            out.setdefault(key, {})[r["node"]] = value
    return out


def check_all(records, budget=linearizable.DEFAULT_BUDGET):
    ops = pair(records)
    finals = finals_by_key(records)
    meta = next((r for r in records if r.get("type") == "meta"), {})
    groups = set(meta.get("groups", []))
    results = {}
    lin, inconclusive = linearizable.check(ops, budget=budget)
    phantom, stale = linearizable.stale_reads(ops)
    results["linearizable"] = lin + phantom
    results["counters"] = counters.check(ops, {k: v for k, v in finals.items() if k in meta.get("counters", [])})
    results["transactions"] = transactions.check(ops, {k: v for k, v in finals.items() if k in meta.get("txn_keys", [])})
    results["pushes"] = pushes.check(ops, {k: {n: sorted((v or {}).keys()) for n, v in per.items()}
                                           for k, per in finals.items() if k in meta.get("lists", [])})
    excused = []
    results["listeners"] = listeners.check(records, ops, finals, groups=groups, excused=excused)
    results["state"] = state.check(of(records, "final"))
    # Presence keys hold one child per session; any node's final value (the state checker
    # compares the nodes).
    pkey, rkey = meta.get("presence", [None, None])
    def first(key):
        return next((v for v in (finals.get(key) or {}).values() if v is not None), None) or {}
    ends = {r["sid"]: r["t"] for r in records if r.get("type") == "presence-end"}
    results["presence"] = presence.check(ops, first(pkey), first(rkey), ends, presence.fault_windows(records))
    # Only campaigns run with --triggers (make robustness) deliver triggers.
    if meta.get("triggers"):
        results["triggers"] = triggers.check(records, ops, meta["triggers"], refused_keys=meta.get("refused_keys", []))
    summary = {
        "operations": len(ops),
        "by_status": dict(Counter(o.status for o in ops)),
        "by_kind": dict(Counter(o.f for o in ops)),
        "stale_default_reads": len(stale),
        "inconclusive_keys": inconclusive,
        "faults": dict(Counter(r["action"] for r in records if r.get("type") == "nemesis" and r["action"] != "end")),
        "events": sum(1 for r in records if r.get("type") == "event"),
        "listener_gaps_across_snapshot_installs": len(excused),
        "snapshot_installs": sum(1 for r in records if r.get("type") == "install"),
        "presence_sessions": sum(1 for o in ops if o.f == "presence"),
        "presence_registered": sum(1 for o in ops if o.f == "presence" and o.extra.get("registered")),
        "presence_clean_closes": len(ends),
    }
    if meta.get("triggers"):
        delivered = [r for r in records if r.get("type") == "trigger-event"]
        summary["trigger_events"] = len(delivered)
        summary["trigger_redeliveries"] = len(delivered) - len({(r["trigger"], r["id"]) for r in delivered})
        summary["trigger_posts_cut_short"] = sum(1 for r in records if r.get("type") == "trigger-truncated")
    return results, summary


def report(results, summary, out=None):
    out = out or sys.stdout  # looked up per call (pytest replaces it)
    failed = 0
    for name, anomalies in results.items():
        print(f"{'FAIL' if anomalies else 'ok  '} {name}: {len(anomalies)} anomalies", file=out)
        for a in anomalies[:20]:
            print(f"     {a}", file=out)
        failed += bool(anomalies)
    print(f"summary: {summary}", file=out)
    print(f"{len(results) - failed} passed, {failed} failed", file=out)
    return failed


def main(argv):
    results, summary = check_all(load(argv[1]))
    return 1 if report(results, summary) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
