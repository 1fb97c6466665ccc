"""Push ids (REST POST): unique; ordered (an id generated after another push was acknowledged
sorts after it when both came from the same node, and its millisecond timestamp is never earlier
when they came from different nodes); and every acknowledged push is in the final list exactly
once, with nothing there that no push could have created."""
import bisect

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
    # Per (list, node): acknowledged pushes by completion time, with the running greatest id and
    # timestamp prefix, so each push is checked against all pushes acknowledged before it began
    # in O(nodes · log n) (a scan of every pair took hours on an hour-long history).
    done = {}
    for o in sorted(ok, key=lambda o: o.complete):
        d = done.setdefault((o.key, o.node), {"t": [], "id": [], "ts": []})
        d["t"].append(o.complete)
        d["id"].append(max(o, d["id"][-1], key=lambda x: x.result) if d["id"] else o)
        d["ts"].append(max(o, d["ts"][-1], key=lambda x: x.result[:TIME_PREFIX]) if d["ts"] else o)
    for b in ok:
        for (key, node), d in done.items():
            if key != b.key:
                continue
            n = bisect.bisect_left(d["t"], b.invoke)  # pushes acknowledged before b began
            if n == 0:
                continue
            if node == b.node:
                a = d["id"][n - 1]
                if not a.result < b.result:
                    anomalies.append(Anomaly("pushes", "out of order", f"op {b.id} ({b.result}) after op {a.id} ({a.result}) on {a.node}"))
            else:
                a = d["ts"][n - 1]
                if a.result[:TIME_PREFIX] > b.result[:TIME_PREFIX]:
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
