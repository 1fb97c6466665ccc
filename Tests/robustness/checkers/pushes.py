"""Push ids (REST POST): unique; ordered (an id generated after another push was acknowledged
sorts after it when both came from the same node, and its millisecond timestamp is never earlier
when they came from different nodes); and every acknowledged push is in the final list exactly
once, with nothing there that no push could have created."""
from .history import Anomaly

TIME_PREFIX = 8  # push ids start with 8 characters of millisecond timestamp


def check(ops, finals):
    """`finals`: {list key: {node: [child ids]}} read at the end."""
    anomalies = []
    pushes = [o for o in ops if o.f == "push"]
    ok = [o for o in pushes if o.status == "ok"]
    ids = {}
    for o in ok:
        if o.result in ids:
            anomalies.append(Anomaly("pushes", "duplicate id", f"ops {ids[o.result].id} and {o.id} got {o.result}"))
        ids[o.result] = o
    by_done = sorted(ok, key=lambda o: o.complete)
    for b in ok:
        # Acknowledged pushes finished before b began: b's id must not sort before theirs.
        for a in by_done:
            if a.complete >= b.invoke:
                break
            if a.key != b.key:
                continue
            if a.node == b.node and not a.result < b.result:
                anomalies.append(Anomaly("pushes", "out of order", f"op {b.id} ({b.result}) after op {a.id} ({a.result}) on {a.node}"))
            elif a.result[:TIME_PREFIX] > b.result[:TIME_PREFIX]:
                anomalies.append(Anomaly("pushes", "timestamp went back", f"op {b.id} ({b.result}) after op {a.id} ({a.result})"))
    for key, per_node in sorted(finals.items()):
        lists = {tuple(v) for v in per_node.values()}
        if len(lists) != 1:
            anomalies.append(Anomaly("pushes", "nodes disagree", f"{key}: {len(lists)} different lists"))
            continue
        final = list(lists.pop())
        if len(set(final)) != len(final):
            anomalies.append(Anomaly("pushes", "duplicate child", key))
        present = set(final)
        mine = [o for o in ok if o.key == key]
        lost = [o.id for o in mine if o.result not in present]
        if lost:
            anomalies.append(Anomaly("pushes", "acknowledged push lost", f"{key}: ops {lost[:10]}"))
        attempted = sum(1 for o in pushes if o.key == key and o.status != "fail")
        if len(final) > attempted:
            anomalies.append(Anomaly("pushes", "more children than pushes", f"{key}: {len(final)} > {attempted}"))
        if final != sorted(final):
            anomalies.append(Anomaly("pushes", "list not in key order", key))
    return anomalies
