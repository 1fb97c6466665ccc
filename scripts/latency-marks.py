#!/usr/bin/env python3
"""Puts emberd's timed marks together (issue 38: where a learner's listener waits).

Run a cluster (or `ember-bench learners --phases catchup`) with EMBER_LATENCY_MARKS=<dir> in the
environment of emberd and ember-bench; each emberd writes <dir>/<node>-<pid>.marks when it stops
(`LatencyMarks` in EmberNodeStore), the bench's SSE probe <dir>/probe-*.samples (each event's
send and receive time, in order). Then:

    scripts/latency-marks.py <dir>

prints, for every log index the learner streamed to the probe, the time between consecutive
stages (leader write start -> leader write done -> commit -> sent to the learner -> received ->
stepped -> learner write done -> feed queued -> published -> streamed -> probe received) as
percentiles, and the same split averaged over the slowest 1 % and 10 % of events, so the wait
that makes the p99 stands out.
"""

import glob
import os
import sys


def load(path):
    marks = {}
    node = os.path.basename(path).rsplit("-", 1)[0]
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            stage, first, last, nanos, peer = line.split()
            marks.setdefault(stage, []).append((int(first), int(last), int(nanos), peer))
    return node, marks


def first_time(ranges, peer=None):
    """index -> earliest time a mark of these ranges covered it."""
    out = {}
    for first, last, nanos, p in ranges:
        if peer is not None and p != peer:
            continue
        for i in range(first, last + 1):
            if i not in out or nanos < out[i]:
                out[i] = nanos
    return out


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    nodes = dict(load(p) for p in glob.glob(os.path.join(d, "*.marks")))
    if not nodes:
        sys.exit(f"no .marks files in {d}")
    leader = max(nodes, key=lambda n: len(nodes[n].get("sent-learner", [])))
    learner = max(nodes, key=lambda n: len(nodes[n].get("streamed", [])))
    L, R = nodes[leader], nodes[learner]
    print(f"leader {leader}, learner (the probe's stream) {learner}")
    stages = [
        ("leader write start", first_time(L.get("write-start", []))),
        ("leader write done", first_time(L.get("write-done", []))),
        ("leader commit", first_time(L.get("commit", []))),
        ("sent to learner", first_time(L.get("sent-learner", []), peer=learner)),
        ("learner received", first_time(R.get("received", []))),
        ("learner stepped", first_time(R.get("stepped", []))),
        ("learner write done", first_time(R.get("write-done", []))),
        ("feed queued", first_time(R.get("feed-queued", []))),
        ("published", first_time(R.get("published", []))),
        ("streamed", first_time(R.get("streamed", []))),
    ]
    streamed = sorted(R.get("streamed", []), key=lambda m: m[2])
    # The probe's events in order are the streamed marks in order (one stream).
    samples = []
    for p in sorted(glob.glob(os.path.join(d, "probe-*.samples"))):
        with open(p) as f:
            samples += [tuple(int(x) for x in line.split()) for line in f if line.strip()]
    sent, received = {}, {}
    if samples and len(samples) <= len(streamed):
        for (s, r), m in zip(samples, streamed):
            sent[m[0]], received[m[0]] = s * 1000, r * 1000
        stages = [("probe sent", sent)] + stages + [("probe received", received)]
    elif samples:
        print(f"{len(samples)} probe samples but {len(streamed)} streamed marks: not matched")
    indices = sorted(i for i in stages[-1][1] if all(i in t for _, t in stages))
    print(f"{len(indices)} indices with every stage")
    if not indices:
        return
    legs = [(f"{a} -> {b}", [(tb[i] - ta[i]) / 1e6 for i in indices]) for (a, ta), (b, tb) in zip(stages, stages[1:])]
    total = [(stages[-1][1][i] - stages[0][1][i]) / 1e6 for i in indices]
    print(f"{'ms':<46} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} {'slowest 1%':>10} {'slowest 10%':>11}")
    order = sorted(range(len(indices)), key=lambda k: total[k])
    slow1 = order[-max(1, len(order) // 100):]
    slow10 = order[-max(1, len(order) // 10):]
    for name, v in legs + [("total: " + stages[0][0] + " -> " + stages[-1][0], total)]:
        m1 = sum(v[k] for k in slow1) / len(slow1)
        m10 = sum(v[k] for k in slow10) / len(slow10)
        print(f"{name:<46} {pct(v, .5):7.2f} {pct(v, .9):7.2f} {pct(v, .99):7.2f} {max(v):7.2f} {m1:10.2f} {m10:11.2f}")
    # Whether a commit found the learner's last append unanswered (one append in flight: what
    # commits meanwhile waits for the answer): the last append sent before the commit, and
    # whether the leader had stepped an acknowledgement covering it by then.
    import bisect
    sends = sorted((n, last) for first, last, n, peer in L.get("sent-learner", []) if peer == learner)
    acks = sorted((n, last) for first, last, n, peer in L.get("ack-stepped", []) if peer == learner)
    send_times, ack_times = [s[0] for s in sends], [a[0] for a in acks]
    commit = dict(stages)["leader commit"]
    sent_l = dict(stages)["sent to learner"]
    waited, free = [], []
    for i in indices:
        k = bisect.bisect_left(send_times, commit[i]) - 1
        j = bisect.bisect_right(ack_times, commit[i]) - 1
        outstanding = k >= 0 and (j < 0 or acks[j][1] < sends[k][1])
        (waited if outstanding else free).append((sent_l[i] - commit[i]) / 1e6)
    print(f"commits made while the learner's last append was unanswered: {len(waited)} of {len(indices)}; "
          f"their commit -> sent p50 {pct(waited, .5):.2f} p99 {pct(waited, .99):.2f} ms; "
          f"the others' p50 {pct(free, .5):.2f} p99 {pct(free, .99):.2f} ms")


if __name__ == "__main__":
    main()
