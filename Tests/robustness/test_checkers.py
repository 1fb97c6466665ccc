"""The checkers on known-good histories and on histories with a planted violation each."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from checkers import counters, linearizable, listeners, presence, pushes, state, transactions, triggers  # noqa: E402
from checkers.history import pair  # noqa: E402
from checkers.run import check_all  # noqa: E402


class H:
    """Builds a history: h.op(...) records an invocation and its completion."""

    def __init__(self):
        self.records = []
        self.n = 0

    def op(self, f, t0, t1, status="ok", key="r", value=None, result=None, node="n1", **extra):
        self.n += 1
        self.records.append(dict(op=self.n, client=f"c{self.n}", type="invoke", f=f, t=t0, key=key, value=value, node=node, **extra))
        done = dict(op=self.n, type=status, t=t1)
        if result is not None or f == "read":
            done["result"] = result
        if status != "open":
            self.records.append(done)
        return self.n

    def write(self, v, t0, t1, status="ok", key="r"):
        return self.op("write", t0, t1, status, key=key, value=v)

    def read(self, v, t0, t1, key="r", lin=True):
        return self.op("read", t0, t1, key=key, result=v, consistency="linearizable" if lin else "default")

    @property
    def ops(self):
        return pair(self.records)


# --- linearizability ---------------------------------------------------------------------------

def test_sequential_and_concurrent_histories_are_linearizable():
    h = H()
    h.write("a", 0, 1)
    h.read("a", 2, 3)
    h.write("b", 4, 8)
    h.read("b", 5, 6)  # concurrent with the write: may see it
    h.read("b", 9, 10)
    assert linearizable.check(h.ops) == ([], [])


def test_stale_linearizable_read_is_caught():
    h = H()
    h.write("a", 0, 1)
    h.write("b", 2, 3)
    h.read("a", 4, 5)  # b was acknowledged before this read began
    anomalies, _ = linearizable.check(h.ops)
    assert len(anomalies) == 1 and "not linearizable" in str(anomalies[0])


def test_stale_default_read_is_reported_as_stale_not_as_anomaly():
    h = H()
    h.write("a", 0, 1)
    h.write("b", 2, 3)
    h.read("a", 4, 5, lin=False)
    assert linearizable.check(h.ops) == ([], [])
    bad, stale = linearizable.stale_reads(h.ops)
    assert bad == [] and [o.result for o in stale] == ["a"]


def test_read_of_a_value_never_written_or_failed_is_an_anomaly():
    h = H()
    h.write("a", 0, 1, status="fail")
    h.read("a", 2, 3, lin=False)
    h.read("zzz", 2, 3, lin=False)
    bad, _ = linearizable.stale_reads(h.ops)
    assert {a.kind for a in bad} == {"read of a failed write", "phantom read"}


def test_unknown_write_may_or_may_not_take_effect():
    h = H()
    h.write("a", 0, 1)
    h.write("b", 2, 3, status="info")
    h.read("a", 4, 5)
    h.read("b", 6, 7)  # the unknown write took effect late: fine
    assert linearizable.check(h.ops) == ([], [])
    h.read("a", 8, 9)  # but it cannot be undone afterwards
    assert len(linearizable.check(h.ops)[0]) == 1


def test_failed_write_must_not_be_seen():
    h = H()
    h.write("a", 0, 1)
    h.write("b", 2, 3, status="fail")
    h.read("b", 4, 5)
    assert len(linearizable.check(h.ops)[0]) == 1


def test_cas_and_multipath_update():
    h = H()
    h.op("cas", 0, 1, key="r", value={"old": None, "new": "x"})
    h.op("update", 2, 3, key="m", value={"a": "u1", "b": "u1"})
    h.read("x", 4, 5)
    h.read("u1", 4, 5, key="m/b")
    assert linearizable.check(h.ops) == ([], [])
    h.op("cas", 6, 7, key="r", value={"old": None, "new": "y"})  # old value no longer current
    assert len(linearizable.check(h.ops)[0]) == 1


def test_search_is_fast_on_a_long_concurrent_history():
    h = H()
    t = 0.0
    for i in range(3000):
        h.write(f"v{i}", t, t + 0.5)
        h.read(f"v{i}", t + 0.6, t + 0.7)
        h.read(f"v{i}" if i % 2 else f"v{i - 1}" if i else None, t + 0.1, t + 0.4)  # concurrent
        t += 1.0
    assert linearizable.check(h.ops) == ([], [])


def test_budget_makes_the_search_inconclusive_not_wrong():
    h = H()
    for i in range(12):
        h.write(f"w{i}", 0, 100)
    h.read("nope", 101, 102)
    anomalies, inconclusive = linearizable.check(h.ops, budget=50)
    assert anomalies == [] and inconclusive == ["r"]


# --- increments --------------------------------------------------------------------------------

def incr_history(final, acked=(5, 7), unknown=(11, 13)):
    h = H()
    for a in acked:
        h.op("incr", 0, 1, key="cnt", value=a)
    for a in unknown:
        h.op("incr", 0, 1, status="info", key="cnt", value=a)
    return counters.check(h.ops, {"cnt": {"n1": final, "n2": final}})


def test_increments_with_a_subset_of_unknowns_pass():
    for final in (12, 23, 25, 36):
        assert incr_history(final) == []


def test_lost_increment_is_caught():
    assert incr_history(7)[0].kind == "lost increment"


def test_double_applied_increment_is_caught():
    assert incr_history(17)[0].kind == "not a subset of the unknown increments"  # 5 applied twice


def test_counter_nodes_disagree():
    h = H()
    h.op("incr", 0, 1, key="cnt", value=3)
    assert counters.check(h.ops, {"cnt": {"n1": 3, "n2": 0}})[0].kind == "nodes disagree"


# --- transactions ------------------------------------------------------------------------------

def test_transaction_chain_passes_and_lost_update_is_caught():
    h = H()
    h.op("cas", 0, 1, key="t", value={"old": None, "new": "t1"})
    h.op("cas", 2, 3, key="t", value={"old": "t1", "new": "t2"})
    h.op("cas", 2, 3, key="t", value={"old": "t1", "new": "t3"}, status="fail")
    assert transactions.check(h.ops, {"t": {"n1": "t2"}}) == []
    h.op("cas", 4, 5, key="t", value={"old": "t2", "new": "t4"})
    h.op("cas", 4, 5, key="t", value={"old": "t2", "new": "t5"})  # both saw t2
    kinds = {a.kind for a in transactions.check(h.ops, {"t": {"n1": "t5"}})}
    assert "lost update" in kinds


def test_committed_transaction_missing_from_the_chain_is_caught():
    h = H()
    h.op("cas", 0, 1, key="t", value={"old": None, "new": "t1"})
    h.op("cas", 2, 3, key="t", value={"old": "t1", "new": "t2"})
    assert transactions.check(h.ops, {"t": {"n1": "t1"}})[0].kind == "committed transaction lost"


# --- pushes ------------------------------------------------------------------------------------

def test_push_ids_unique_ordered_and_present():
    h = H()
    h.op("push", 0, 1, key="l", result="-AAAAAAA000")
    h.op("push", 2, 3, key="l", result="-AAAAAAB000")
    h.op("push", 2, 3, key="l", result="-AAAAAAB001", node="n2")
    finals = {"l": {"n1": ["-AAAAAAA000", "-AAAAAAB000", "-AAAAAAB001"]}}
    assert pushes.check(h.ops, finals) == []
    h.op("push", 4, 5, key="l", result="-AAAAAAA001")  # after an acknowledged later id, same node
    h.op("push", 4, 5, key="l", result="-AAAAAAB000")  # duplicate
    kinds = {a.kind for a in pushes.check(h.ops, finals)}
    assert {"out of order", "duplicate id", "acknowledged push lost"} <= kinds
    # Across nodes only the millisecond prefix must not go back.
    h = H()
    h.op("push", 0, 1, key="l", result="-AAAAAAB000")
    h.op("push", 2, 3, key="l", result="-AAAAAAB000x", node="n2")
    finals = {"l": {"n1": ["-AAAAAAB000", "-AAAAAAB000x"]}}
    assert pushes.check(h.ops, finals) == []
    h.op("push", 4, 5, key="l", result="-AAAAAAA002", node="n3")  # an older millisecond than n1's
    finals = {"l": {"n1": ["-AAAAAAA002", "-AAAAAAB000", "-AAAAAAB000x"]}}
    assert {a.kind for a in pushes.check(h.ops, finals)} == {"timestamp went back"}


# --- listeners ---------------------------------------------------------------------------------

def listener_history(events, writes=(("a", 0, 1), ("b", 2, 3), ("c", 4, 5)), final="c", key="r", group=False):
    h = H()
    for v, t0, t1 in writes:
        if group:
            h.op("update", t0, t1, key=key, value=v)
        else:
            h.write(v, t0, t1, key=key)
    h.records.append(dict(type="listen", listener="L1", conn=1, key=key, node="n1", via="sse", t=0))
    for t, v in events:
        h.records.append(dict(type="event", listener="L1", conn=1, key=key, value=v, t=t))
    return listeners.check(h.records, h.ops, {key: {"n1": final}}, groups={key} if group else set())


def test_listener_that_saw_everything_in_order_passes():
    assert listener_history([(0.5, None), (1.5, "a"), (3.5, "b"), (5.5, "c")]) == []


def test_out_of_order_event_is_caught():
    kinds = {a.kind for a in listener_history([(0.5, None), (1.5, "a"), (3.5, "c"), (5.5, "b")], final="b")}
    assert "out of order" in kinds


def test_missed_and_duplicate_events_are_caught():
    assert {a.kind for a in listener_history([(0.5, None), (1.5, "a"), (5.5, "c")])} == {"missed event"}
    assert "duplicate event" in {a.kind for a in listener_history([(0.5, None), (1.5, "a"), (3.5, "b"), (3.6, "b"), (5.5, "c")])}


def test_listener_that_did_not_converge_is_caught():
    assert {a.kind for a in listener_history([(0.5, None), (1.5, "a"), (3.5, "b")])} == {"did not converge"}


def test_partial_multipath_update_is_caught():
    w = (({"x": 1, "y": 1}, 0, 1), ({"x": 2, "y": 2}, 2, 3))
    good = listener_history([(0.5, None), (1.5, {"x": 1, "y": 1}), (3.5, {"x": 2, "y": 2})], writes=w,
                            final={"x": 2, "y": 2}, key="m", group=True)
    assert good == []
    bad = listener_history([(0.5, None), (1.5, {"x": 1, "y": 1}), (2.5, {"x": 2, "y": 1}), (3.5, {"x": 2, "y": 2})],
                           writes=w, final={"x": 2, "y": 2}, key="m", group=True)
    assert "partial multi-path update" in {a.kind for a in bad}


def test_listeners_disagreeing_on_order_is_caught_across_segments():
    h = H()
    h.write("a", 0, 10)
    h.write("b", 0, 10)  # concurrent: either order, but one for everyone
    for lid, order in (("L1", ["a", "b"]), ("L2", ["b", "a"])):
        h.records.append(dict(type="listen", listener=lid, conn=1, key="r", node="n1", via="wire", t=0))
        for i, v in enumerate(order):
            h.records.append(dict(type="event", listener=lid, conn=1, key="r", value=v, t=11 + i))
    kinds = {a.kind for a in listeners.check(h.records, h.ops, {})}
    assert "out of order" in kinds


# --- state and the whole run -------------------------------------------------------------------

def test_state_hashes_must_agree():
    assert state.check([{"node": "n1", "hash": "x"}, {"node": "n2", "hash": "x"}]) == []
    assert state.check([{"node": "n1", "hash": "x"}, {"node": "n2", "hash": "y"}])[0].kind == "nodes differ"


def test_check_all_on_a_small_clean_history():
    h = H()
    h.records.append(dict(type="meta", groups=["m"], counters=["cnt"], txn_keys=["t"], lists=["l"]))
    h.write("a", 0, 1)
    h.read("a", 2, 3)
    h.op("incr", 0, 1, key="cnt", value=4)
    h.op("cas", 0, 1, key="t", value={"old": None, "new": "t1"})
    h.op("push", 0, 1, key="l", result="-AAAAAAA000")
    h.records.append(dict(type="nemesis", action="kill", t=1))
    for n in ("n1", "n2"):
        h.records.append(dict(type="final", node=n, hash="H", values={"r": "a", "cnt": 4, "t": "t1", "l": {"-AAAAAAA000": 1}}))
    results, summary = check_all(h.records)
    assert all(v == [] for v in results.values()), results
    assert summary["operations"] == 5 and summary["faults"] == {"kill": 1}


def test_gap_across_a_snapshot_install_on_the_listeners_node_is_excused_not_hidden():
    h = H()
    for v, t0, t1 in (("a", 0, 1), ("b", 2, 3), ("c", 4, 5)):
        h.write(v, t0, t1)
    h.records.append(dict(type="listen", listener="L1", conn=1, key="r", node="n1", via="wire", t=0))
    for t, v in ((0.5, None), (1.5, "a"), (5.5, "c")):
        h.records.append(dict(type="event", listener="L1", conn=1, key="r", value=v, t=t))
    excused = []
    # An install on another node explains nothing.
    h.records.append(dict(type="install", node="n2", t_lo=3.0, t_hi=4.0, t=3.0))
    assert {a.kind for a in listeners.check(h.records, h.ops, {"r": {"n1": "c"}}, excused=excused)} == {"missed event"}
    h.records.append(dict(type="install", node="n1", t_lo=3.0, t_hi=4.0, t=3.0))
    excused = []
    assert listeners.check(h.records, h.ops, {"r": {"n1": "c"}}, excused=excused) == []
    assert len(excused) == 1


def test_repeat_right_after_a_snapshot_install_is_a_duplicate():
    h = H()
    h.write("a", 0, 1)
    h.records.append(dict(type="listen", listener="L1", conn=1, key="r", node="n1", via="sse", t=0))
    for t, v in ((0.5, None), (1.5, "a"), (3.5, "a")):
        h.records.append(dict(type="event", listener="L1", conn=1, key="r", value=v, t=t))
    h.records.append(dict(type="install", node="n1", t_lo=2.0, t_hi=3.0, t=2.0))
    assert {a.kind for a in listeners.check(h.records, h.ops, {"r": {"n1": "a"}})} == {"duplicate event"}


# --- presence (durable onDisconnect) ------------------------------------------------------------

def presence_history():
    """s1: registered, online, closed cleanly at 3 with no fault; s2: registered, its node killed
    (fault 4..6); s3: registration unknown."""
    h = H()
    h.op("presence", 1, 2, key="s1", registered=True, online=True)
    h.op("presence", 3.5, 4, key="s2", registered=True, online=True)
    h.op("presence", 7, 8, status="info", key="s3", registered=False, online=False)
    h.records.append(dict(type="presence-end", sid="s1", t=3))
    h.records.append(dict(type="nemesis", action="kill", t=4.5))
    h.records.append(dict(type="nemesis-heal", action="kill", t=6))
    return h


def test_presence_runs_once_passes():
    h = presence_history()
    faults = presence.fault_windows(h.records)
    assert faults == [(4.5, 6)]
    ends = {"s1": 3}
    assert presence.check(h.ops, {"s1": False, "s2": False, "s3": True}, {"s1": 1, "s2": 1}, ends, faults) == []
    # An unknown registration may have run once, or not at all.
    assert presence.check(h.ops, {"s1": False, "s2": False}, {"s1": 1, "s2": 1, "s3": 1}, ends, faults) == []


def test_presence_double_run_is_caught():
    h = presence_history()
    found = presence.check(h.ops, {"s1": False, "s2": False}, {"s1": 1, "s2": 2}, {"s1": 3}, presence.fault_windows(h.records))
    assert [a.kind for a in found] == ["onDisconnect ran more than once"]
    found = presence.check(h.ops, {"s1": False, "s2": False}, {"s1": 1, "s2": 1, "s3": 2}, {"s1": 3}, [])
    assert [a.kind for a in found] == ["onDisconnect ran more than once"]


def test_presence_lost_run_is_caught():
    h = presence_history()
    # s2's node died and nobody ran its writes: still online, never counted.
    found = presence.check(h.ops, {"s1": False, "s2": True}, {"s1": 1}, {"s1": 3}, presence.fault_windows(h.records))
    assert [a.kind for a in found] == ["registered onDisconnect never ran"]


def test_presence_offline_write_lost_on_a_quiet_clean_close_is_caught_but_excused_under_a_fault():
    h = presence_history()
    found = presence.check(h.ops, {"s1": True, "s2": False}, {"s1": 1, "s2": 1}, {"s1": 3}, presence.fault_windows(h.records))
    assert [a.kind for a in found] == ["offline write lost"]
    # The same session overlapping a fault is not judged on its final value.
    found = presence.check(h.ops, {"s1": True, "s2": False}, {"s1": 1, "s2": 1}, {"s1": 3}, [(2.5, 2.8)])
    assert found == []


def test_writes_between_agrees_with_a_scan_of_every_write():
    # The checkers' O(log n) lookup must answer what the plain scan answered.
    import random
    from types import SimpleNamespace
    from checkers.linearizable import WritesBetween
    rng = random.Random(5)
    for _ in range(200):
        ws = []
        for _ in range(rng.randint(0, 12)):
            a = rng.uniform(0, 10)
            ws.append(SimpleNamespace(invoke=a, complete=a + rng.uniform(0, 3)))
        wb = WritesBetween(ws)
        for _ in range(20):
            lo, hi = rng.uniform(-1, 11), rng.uniform(-1, 14)
            found = wb.first(lo, hi)
            assert (found is not None) == any(x.invoke > lo and x.complete < hi for x in ws)
            if found is not None:
                assert found.invoke > lo and found.complete < hi


# --- triggers (campaign --triggers) -------------------------------------------------------------

TRIGGER_LOCATIONS = {"r0": "/rb/r0", "group": "/rb/m", "cnt": "/rb/cnt", "list": "/rb/list/*", "locked": "/rb/locked"}


def trigger_history():
    """Acknowledged: a write to rb/r0, an update of rb/m, an increment, a push; failed: a write
    refused at rb/locked and a write never sent; unknown: an increment. Delivered in order, the
    write twice (a redelivery after a failover), the unknown increment's event too."""
    h = H()
    h.op("write", 0, 1, key="rb/r0", value="c1-1")
    h.op("update", 1, 2, key="rb/m", value={"a": "c1-2", "b": "c1-2"})
    h.op("incr", 2, 3, key="rb/cnt", value=5)
    h.op("push", 3, 4, key="rb/list", value="c1-3", result="-Nabc")
    h.op("refused", 4, 5, status="fail", key="rb/locked", value="c1-4")
    h.op("write", 5, 6, status="fail", key="rb/r0", value="c1-5")
    h.op("incr", 6, 7, status="info", key="rb/cnt", value=7)
    ev = lambda trigger, index, ref, tokens, seq=0, kind="written": dict(
        type="trigger-event", trigger=trigger, id=f"{index}-{seq}", sequence=str(index), ref=ref, kind=kind, tokens=tokens, t=index)
    h.records += [ev("r0", 10, "/rb/r0", ["c1-1"]), ev("group", 11, "/rb/m", ["c1-2"]), ev("cnt", 12, "/rb/cnt", []),
                  ev("r0", 10, "/rb/r0", ["c1-1"]), ev("list", 13, "/rb/list/-Nabc", ["c1-3"], kind="created"),
                  ev("cnt", 16, "/rb/cnt", []), dict(type="triggers-drained", ok=True, t=20)]
    return h


def test_triggers_clean_history_passes():
    h = trigger_history()
    assert triggers.check(h.records, h.ops, TRIGGER_LOCATIONS, refused_keys=["rb/locked"]) == []


def kinds(h):
    return [a.kind for a in triggers.check(h.records, h.ops, TRIGGER_LOCATIONS, refused_keys=["rb/locked"])]


def test_triggers_lost_change_is_caught():
    h = trigger_history()
    h.records = [r for r in h.records if r.get("trigger") != "list"]
    assert kinds(h) == ["acknowledged change never delivered"]


def test_triggers_out_of_order_and_changed_redelivery_are_caught():
    h = trigger_history()
    h.records.insert(-1, dict(type="trigger-event", trigger="r0", id="9-0", sequence="9", ref="/rb/r0", kind="written", tokens=["x"], t=30))
    assert kinds(h) == ["out of order"]
    h = trigger_history()
    h.records.insert(-1, dict(type="trigger-event", trigger="r0", id="10-0", sequence="10", ref="/rb/r0", kind="written", tokens=["other"], t=30))
    assert kinds(h) == ["redelivery differs"]


def test_triggers_event_for_a_refused_write_is_caught():
    h = trigger_history()
    h.records.insert(-1, dict(type="trigger-event", trigger="r0", id="17-0", sequence="17", ref="/rb/r0", kind="written", tokens=["c1-5"], t=30))
    assert kinds(h) == ["event for a refused write"]
    h = trigger_history()
    h.records.insert(-1, dict(type="trigger-event", trigger="locked", id="17-0", sequence="17", ref="/rb/locked", kind="written", tokens=["c1-4"], t=30))
    assert sorted(kinds(h)) == ["event for a refused write", "event where every write is refused"]


def test_triggers_counter_events_and_drain_are_checked():
    h = trigger_history()
    h.records.insert(-1, dict(type="trigger-event", trigger="cnt", id="18-0", sequence="18", ref="/rb/cnt", kind="written", tokens=[], t=30))
    assert kinds(h) == ["counter events"], "three events for at most two increments"
    h = trigger_history()
    h.records[-1]["ok"] = False
    assert kinds(h) == ["not drained"]
