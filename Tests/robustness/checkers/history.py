"""The campaign's history: one JSON object per line.

Client operations are recorded twice, at invocation and at completion, with the same `op` id:

    {"op": 7, "client": "c2", "type": "invoke", "f": "write", "key": "r1", "value": "c2-7", "t": 1.52, "node": "n1", "via": "rest"}
    {"op": 7, "type": "ok", "t": 1.53}

`type` of the completion is `ok` (it happened), `fail` (it definitely did not happen) or `info`
(unknown: a timeout, a 503 "outcome unknown", a dropped connection). An operation never completed
is treated as `info`. Completions may carry a `result` (a read's value, a push's id).

Other records: listener connections and events (`listen`, `event`), nemesis actions (`nemesis`)
and the end state of each node (`final`).
"""
import json
import math
from dataclasses import dataclass, field


@dataclass
class Op:
    id: int
    client: str
    f: str
    invoke: float
    complete: float = math.inf   # inf: unknown outcome (or never completed)
    status: str = "info"         # ok | fail | info
    key: str = None
    value: object = None         # what a write / cas / incr / update sent
    result: object = None        # what a read / push returned
    node: str = None
    via: str = None
    extra: dict = field(default_factory=dict)


@dataclass
class Anomaly:
    checker: str
    kind: str
    detail: str

    def __str__(self):
        return f"[{self.checker}] {self.kind}: {self.detail}"


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


OP_FIELDS = {"op", "client", "type", "f", "t", "key", "value", "node", "via", "result"}


def pair(records):
    """Client operations from invoke/completion records, in invocation order."""
    ops = {}
    for r in records:
        if "op" not in r:
            continue
        if r["type"] == "invoke":
            ops[r["op"]] = Op(id=r["op"], client=r.get("client"), f=r["f"], invoke=r["t"], key=r.get("key"),
                              value=r.get("value"), node=r.get("node"), via=r.get("via"),
                              extra={k: v for k, v in r.items() if k not in OP_FIELDS})
        else:
            op = ops.get(r["op"])
            if op is None:
                raise ValueError(f"completion of an operation never invoked: {r}")
            op.status = r["type"]
            if r["type"] != "info":
                op.complete = r["t"]
            if "result" in r:
                op.result = r["result"]
            for k, v in r.items():
                if k not in OP_FIELDS:
                    op.extra[k] = v
    return sorted(ops.values(), key=lambda o: (o.invoke, o.id))


def of(records, kind):
    return [r for r in records if r.get("type") == kind and "op" not in r]
