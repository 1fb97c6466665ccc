"""Per-key linearizability of a register (Wing & Gong's search with Lowe's memoisation, as in
Porcupine): writes, multi-path updates (a write on each key), compare-and-set transactions and
`consistency=linearizable` reads. Reads at the default consistency may be served from a
follower's applied state, so they are not required to be linearizable; `stale_reads` reports
the ones that were definitely stale (and flags as anomalies reads of values that never existed).

Outcomes: `ok` ops happened between invoke and completion; `fail` ops never happened (left out);
`info` ops may have happened at any point after their invocation, or not at all.
"""
import bisect
import json
import math

from .history import Anomaly

DEFAULT_BUDGET = 2_000_000  # search steps per key before the result is "inconclusive"


def _canon(v):
    return json.dumps(v, sort_keys=True)


class RegOp:
    __slots__ = ("op", "invoke", "complete", "kind", "a", "b", "required")

    def __init__(self, op, kind, a=None, b=None):
        self.op = op
        self.invoke = op.invoke
        self.complete = op.complete if op.status == "ok" else math.inf
        self.kind = kind      # write (a: value) | read (a: value) | cas (a: old, b: new)
        self.a = a
        self.b = b
        self.required = op.status == "ok"


def register_ops(ops, key):
    """The register operations on `key` that linearizability constrains."""
    out = []
    for op in ops:
        if op.status == "fail":
            continue
        if op.f == "write" and op.key == key:
            out.append(RegOp(op, "write", _canon(op.value)))
        elif op.f == "update" and key in update_writes(op):
            out.append(RegOp(op, "write", _canon(update_writes(op)[key])))
        elif op.f == "cas" and op.key == key:
            out.append(RegOp(op, "cas", _canon(op.value["old"]), _canon(op.value["new"])))
        elif op.f == "read" and op.key == key and op.extra.get("consistency") == "linearizable" and op.status == "ok":
            out.append(RegOp(op, "read", _canon(op.result)))
    # An unknown write or transaction whose value nobody observed may as well not have happened.
    observed = {r.a for r in out if r.kind in ("read", "cas") and r.required} | {r.a for r in out if r.kind == "cas"}
    out = [r for r in out if r.required or (r.b if r.kind == "cas" else r.a) in observed]
    out.sort(key=lambda r: (r.invoke, r.op.id))
    return out


def update_writes(op):
    """A multi-path update at `op.key` with children `op.value`: the register writes it makes."""
    return {f"{op.key}/{k}": v for k, v in (op.value or {}).items()}


def writes_by_value(ops):
    """{(key, canonical value): the op that wrote it}: values are unique per key in the campaign.
    A multi-path update also counts as writing its whole group object at `op.key`."""
    out = {}
    for op in ops:
        if op.f == "write":
            out[(op.key, _canon(op.value))] = op
        elif op.f == "update":
            for k, v in update_writes(op).items():
                out[(k, _canon(v))] = op
            out[(op.key, _canon(op.value))] = op
        elif op.f == "cas":
            out[(op.key, _canon(op.value["new"]))] = op
    return out



class WritesBetween:
    """Writes of one key, for "is there a write that began after `lo` and completed before
    `hi`?" in O(log n): sorted by invocation, with the earliest completion of every suffix.
    (Scanning all writes per read or event made an hour-long history's check take hours.)"""

    def __init__(self, writes):
        self.writes = sorted(writes, key=lambda x: x.invoke)
        self.invokes = [x.invoke for x in self.writes]
        self.best = [0] * len(self.writes)  # index of the earliest completion in writes[i:]
        for i in range(len(self.writes) - 1, -1, -1):
            j = self.best[i + 1] if i + 1 < len(self.writes) else i
            self.best[i] = i if self.writes[i].complete <= self.writes[j].complete else j

    def first(self, lo, hi):
        """A write with invoke > lo and complete < hi, or None."""
        i = bisect.bisect_right(self.invokes, lo)
        if i == len(self.writes):
            return None
        x = self.writes[self.best[i]]
        return x if x.complete < hi else None

def _step(r, state):
    if r.kind == "write":
        return r.a
    if r.kind == "read":
        return state if state == r.a else None
    return r.b if state == r.a else None


_ILLEGAL = object()


def check_register(rops, initial=None, budget=DEFAULT_BUDGET):
    """('ok' | 'illegal' | 'unknown', detail)."""
    n = len(rops)
    if n == 0:
        return "ok", ""
    invokes = [r.invoke for r in rops]
    req_idx = [i for i in range(n) if rops[i].required]
    info_idx = [i for i in range(n) if not rops[i].required]
    by_ret = sorted(req_idx, key=lambda i: rops[i].complete)
    pos_in_ret = {i: p for p, i in enumerate(by_ret)}
    nonreq_mask = 0
    for i in info_idx:
        nonreq_mask |= 1 << i
    all_req = ((1 << n) - 1) & ~nonreq_mask

    def lowest_zero(mask):
        return (~mask & (mask + 1)).bit_length() - 1

    init = _canon(initial)
    seen = set()
    steps = 0
    deepest = (0, None)
    # Each frame: (done, done_by_ret, state, candidates, next candidate position)
    stack = []

    def candidates(done, done_by_ret):
        if done & all_req == all_req:
            return None  # every completed op is linearized: success
        min_ret = rops[by_ret[lowest_zero(done_by_ret)]].complete
        k = bisect.bisect_left(invokes, min_ret)
        lo = lowest_zero(done | nonreq_mask)
        out = [i for i in range(lo, k) if rops[i].required and not (done >> i) & 1]
        out += [i for i in info_idx if i < k and not (done >> i) & 1]
        return out

    c = candidates(0, 0)
    if c is None:
        return "ok", ""
    stack.append((0, 0, init, c, 0))
    while stack:
        done, dbr, state, cands, pos = stack.pop()
        if pos >= len(cands):
            continue
        stack.append((done, dbr, state, cands, pos + 1))
        i = cands[pos]
        r = rops[i]
        options = []
        nxt = _step(r, state)
        if nxt is not None:
            options.append(nxt)
        if not r.required:
            options.append(state)  # an unknown op that did not happen
        for new_state in options:
            steps += 1
            if steps > budget:
                return "unknown", f"search budget of {budget} steps exhausted on {n} operations"
            nd = done | (1 << i)
            ndbr = dbr | (1 << pos_in_ret[i]) if r.required else dbr
            if (nd, new_state) in seen:
                continue
            seen.add((nd, new_state))
            count = bin(nd).count("1")
            if count > deepest[0]:
                deepest = (count, i)
            nc = candidates(nd, ndbr)
            if nc is None:
                return "ok", ""
            stack.append((nd, ndbr, new_state, nc, 0))
    # Report where the search got stuck: the ops around the deepest point reached.
    at = deepest[1] if deepest[1] is not None else 0
    ctx = rops[max(0, at - 2):at + 4]
    desc = "; ".join(f"op {r.op.id} {r.kind}({r.a}{'->' + r.b if r.kind == 'cas' else ''}) "
                     f"[{r.invoke:.3f}, {r.complete:.3f}] {r.op.status} on {r.op.node}" for r in ctx)
    return "illegal", f"no linearization of {n} operations; stuck after {deepest[0]} near: {desc}"


def check(ops, keys=None, budget=DEFAULT_BUDGET):
    """Anomalies for every register key (or `keys`), plus a list of inconclusive keys."""
    if keys is None:
        keys = set()
        for op in ops:
            if op.f in ("write", "cas", "read"):
                keys.add(op.key)
            elif op.f == "update":
                keys.update(update_writes(op))
    anomalies, inconclusive = [], []
    for key in sorted(keys):
        verdict, detail = check_register(register_ops(ops, key), budget=budget)
        if verdict == "illegal":
            anomalies.append(Anomaly("linearizable", "not linearizable", f"key {key}: {detail}"))
        elif verdict == "unknown":
            inconclusive.append(key)
    return anomalies, inconclusive


def stale_reads(ops):
    """Default-consistency reads: (anomalies, stale) where stale lists reads that returned a value
    already overwritten by a write acknowledged before the read began (allowed for follower reads,
    reported as what they are), and anomalies are reads of values no write could have produced."""
    writes = writes_by_value(ops)
    by_key = {}
    for (k, _), w in writes.items():
        if w.status == "ok":
            by_key.setdefault(k, []).append(w)
    between = {k: WritesBetween(ws) for k, ws in by_key.items()}
    anomalies, stale = [], []
    for op in ops:
        if op.f != "read" or op.status != "ok" or op.extra.get("consistency") == "linearizable":
            continue
        if op.result is None:
            src = None
        else:
            src = writes.get((op.key, _canon(op.result)))
            if src is None:
                anomalies.append(Anomaly("reads", "phantom read", f"op {op.id} read {op.key}={op.result!r}, which no operation wrote"))
                continue
            if src.status == "fail":
                anomalies.append(Anomaly("reads", "read of a failed write", f"op {op.id} read {op.key}={op.result!r} from failed op {src.id}"))
                continue
            if src.invoke > op.complete:
                anomalies.append(Anomaly("reads", "read from the future", f"op {op.id} read {op.result!r} written by op {src.id} invoked after it completed"))
                continue
        src_done = src.complete if src is not None else -math.inf
        # A write acknowledged before the read began overwrote what it returned (the source
        # itself cannot match: it began before it completed).
        if op.key in between and between[op.key].first(src_done, op.invoke) is not None:
            stale.append(op)
    return anomalies, stale
