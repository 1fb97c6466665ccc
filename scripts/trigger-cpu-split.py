#!/usr/bin/env python3
"""Splits a delivering emberd's CPU by trigger stage (issue 36 (c): where the leader's extra CPU
per write goes with triggers).

Profile the leader (or a follower) during one case of `ember-bench triggers`' throughput run:

    .build/release/ember-bench triggers --runs c --cases one --duration 20 &
    perf record -F 999 -g -p <the leader's pid> -o /tmp/lead.data -- sleep 15
    scripts/trigger-cpu-split.py /tmp/lead.data

Each sample goes to the first stage whose functions are on its stack (the order below: a lane's
HMAC before the lane, the apply's record encoding before the apply's record); samples with no
trigger function on the stack are "not trigger code". Multiply a stage's share by the process's
CPU per write (the bench prints it) for microseconds per write. perf must resolve the binary's
symbols (if it does not, see scripts/perf-symbols.py).
"""

import collections
import subprocess
import sys

STAGES = [
    ("bench lag polling (GET /.ember/triggers)", ["RestHandler.triggerAdmin"]),
    ("lane: HMAC-SHA256 of bodies", ["TriggerLane.signature", "HMAC"]),
    ("apply: members serialized once for a crowded group's lanes", ["withSharedMembers"]),
    ("lane: CloudEvent serialization, body cache", ["writeSharedMembers", "TriggerMembersWriter", "cloudEventBody", "TriggerBodyCache", "TriggerLane.body",
                                                   "TriggerLane.buffer"]),
    ("lane: HTTP pipe and TCP to the receiver", ["TriggerPipe"]),
    ("lane: reads (deliveryRead/State, record cache)", ["deliveryRead", "deliveryState", "TriggersPort.state", "outboxRows"]),
    ("lane: the rest (machine, answers, runtime)", ["TriggerLane", "TriggerDelivery", "TriggerRuntime", "TriggerLaneEvents"]),
    ("cursor entries (logged, applied, pruning)", ["TriggerCursorLog", "applyTriggers", "TriggerChangeLog.refresh", "TriggerChangeLog.prune"]),
    ("worker woken by commits", ["TriggerWorker.wake", "onTriggerCommit", "TriggerCommit"]),
    ("apply: values before the write", ["captureTriggers", "setOnlyCreates"]),
    ("apply: changes (diff, pattern match)", ["TriggerChanges.changes"]),
    ("apply: record encoding (compact or full)", ["TriggerCompactRecord.encode", "encodeRecord", "fullBodySize"]),
    ("apply: full events for the lanes", ["closure #2 in Applier.recordTriggers", "values #1 () in Applier.recordTriggers", "TriggerTails.appended",
                                        "events #1 () in Applier.recordCreated"]),
    ("apply: record put, tails, the rest", ["recordShared", "recordTriggers", "recordCreated"]),
    ("commit: released records to the lanes' cache", ["TriggerRecordCache.insert", "TriggerReleases"]),
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    script = subprocess.run(["perf", "script", "-i", sys.argv[1]], capture_output=True, text=True).stdout
    text = subprocess.run(["swift", "demangle", "--simplified"], input=script, capture_output=True, text=True).stdout
    counts = collections.Counter()
    total = 0
    for sample in text.split("\n\n"):
        if not sample.strip():
            continue
        total += 1
        for name, patterns in STAGES:
            if any(p in sample for p in patterns):
                counts[name] += 1
                break
        else:
            counts["not trigger code"] += 1
    if total == 0:
        sys.exit("no samples")
    trigger = total - counts["not trigger code"]
    print(f"{sys.argv[1]}: {total} samples, trigger code {100 * trigger / total:.1f} %")
    for name, _ in STAGES + [("not trigger code", None)]:
        if counts[name]:
            print(f"  {100 * counts[name] / total:5.1f} %  {name}")


if __name__ == "__main__":
    main()
