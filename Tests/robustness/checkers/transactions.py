"""Transactions (read, then compare-and-set on what was read, retried on conflict): every value a
transaction key takes is written by one transaction, so committed transactions form one chain
through their (old → new) values. Each committed transaction must have seen the value the
previous one wrote: no two committed transactions saw the same value (a lost update), none saw
a value no transaction produced, and following the chain back from the final value passes
every committed transaction (none lost)."""
import json

from .history import Anomaly


def _c(v):
    return json.dumps(v, sort_keys=True)


def check(ops, finals, initial=None):
    """`finals`: {txn key: {node: value}} read at the end."""
    anomalies = []
    keys = sorted({o.key for o in ops if o.f == "cas"} | set(finals))
    for key in keys:
        txns = [o for o in ops if o.f == "cas" and o.key == key and o.status != "fail"]
        by_new = {}
        for t in txns:
            by_new[_c(t.value["new"])] = t
        seen_old = {}
        for t in txns:
            if t.status != "ok":
                continue
            old = _c(t.value["old"])
            if old in seen_old:
                anomalies.append(Anomaly("transactions", "lost update",
                                         f"{key}: ops {seen_old[old].id} and {t.id} both committed on top of {old}"))
            seen_old[old] = t
            if old != _c(initial) and old not in by_new:
                anomalies.append(Anomaly("transactions", "saw a value no transaction wrote",
                                         f"{key}: op {t.id} committed on top of {old}"))
        per_node = finals.get(key, {})
        values = {_c(v) for v in per_node.values()}
        if len(values) > 1:
            anomalies.append(Anomaly("transactions", "nodes disagree", f"{key}: {per_node}"))
            continue
        if not values:
            continue
        cur = values.pop()
        chain = set()
        while cur != _c(initial):
            t = by_new.get(cur)
            if t is None:
                anomalies.append(Anomaly("transactions", "final value from no transaction", f"{key}: {cur}"))
                break
            if t.id in chain:
                anomalies.append(Anomaly("transactions", "cycle", f"{key}: op {t.id}"))
                break
            chain.add(t.id)
            cur = _c(t.value["old"])
        missing = [t.id for t in txns if t.status == "ok" and t.id not in chain]
        if missing and not any(a.checker == "transactions" and key in a.detail for a in anomalies):
            anomalies.append(Anomaly("transactions", "committed transaction lost",
                                     f"{key}: ops {missing[:10]} acknowledged but not in the final chain"))
    return anomalies
