"""Increments (`{".sv": {"increment": n}}`): the final value of each counter must equal the sum
of the acknowledged increments plus the amounts of some subset of the unknown ones. Amounts are
drawn at random per operation, so a double-applied or lost increment is (almost always) not a
subset sum and is caught."""
from .history import Anomaly

MAX_SUM = 1 << 22  # bound on the subset-sum bitset (amounts are small; a named limit)


def subset_sums(amounts):
    bits = 1
    for a in amounts:
        bits |= bits << a
        bits &= (1 << MAX_SUM) - 1
    return bits


def check(ops, finals):
    """`finals`: {counter key: {node: value}} read at the end (every node)."""
    anomalies = []
    for key, per_node in sorted(finals.items()):
        values = set(map(lambda v: v or 0, per_node.values()))
        if len(values) != 1:
            anomalies.append(Anomaly("counters", "nodes disagree", f"{key}: {per_node}"))
            continue
        final = values.pop()
        incs = [o for o in ops if o.f == "incr" and o.key == key]
        acked = sum(o.value for o in incs if o.status == "ok")
        unknown = [o.value for o in incs if o.status == "info"]
        extra = final - acked
        if extra < 0:
            anomalies.append(Anomaly("counters", "lost increment",
                                     f"{key}: final {final} < acknowledged sum {acked} ({len(incs)} increments)"))
        elif not (subset_sums(unknown) >> extra) & 1:
            anomalies.append(Anomaly("counters", "not a subset of the unknown increments",
                                     f"{key}: final {final} - acknowledged {acked} = {extra}, not a sum of a subset of {sorted(unknown)} "
                                     f"(double-applied or lost increment)"))
    return anomalies
