import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// A delivering node's writer hands the change records it released before their commit to the
/// lanes' decoded records once the commit is done (`TriggerReleases.committed`,
/// `TriggerRecordCache.insert`): a lane that reads them from LMDB afterwards finds exactly the
/// events it would decode there, and nothing of a batch that reached the namespace whole (a
/// record rewritten or not collected) is handed over.
@Suite(.printsSeedOnFailure) struct TriggerReleasedCacheTests {
    @Test func committedReleasedRecordsAreCachedAsStored() async throws {
        var g = TestSeed.generator(0xcace_d0de)
        let (s, start) = try await TriggerDeliveryReadTests.store()
        defer { s.close() }
        let defs = TriggerDeliveryReadTests.defs
        let triggers = [("msgs", try TriggerTailsTests.group(defs, "msgs")), ("likes", try TriggerTailsTests.group(defs, "likes"))]
        var next = start, cached = 0, wholeRounds = 0
        for round in 0..<24 {
            var batch: [LogEntry] = []
            for _ in 0..<Int.random(in: 1...6, using: &g) {
                let k = Int(next)
                let op: WriteOperation
                switch Int.random(in: 0..<9, using: &g) {
                case 0...3: op = .set(path: p("/messages/m\(Int.random(in: 0..<12, using: &g))"), value: j(#"{"n":\#(k)}"#))
                case 4, 5: op = .set(path: p("/rooms/r\(k % 3)/likes/u\(Int.random(in: 0..<4, using: &g))"), value: j("\(k)"))
                case 6, 7: op = .set(path: p("/elsewhere/x\(k % 4)"), value: j("\(k)"))
                default:
                    // Both groups in one write: the namespace is reached whole.
                    op = .update(path: p("/"), values: [(p("messages/m\(k % 12)/n"), j("\(k)")), (p("rooms/r\(k % 3)/likes/v\(k)"), j("true"))])
                }
                batch.append(TriggerDeliveryReadTests.entry(next, op))
                next += 1
            }
            try await s.append(entries: batch)
            let (results, release) = try await s.applyCommittedReleasing(through: next - 1)
            await s.committed(release)
            let whole = results.contains { $0.triggerReach == .namespace }
            if whole { wholeRounds += 1 }
            for (name, group) in triggers {
                let st = try #require(try s.triggerState(namespace: "t", name: name))
                let stored = try s.withRead { t in
                    try TriggerChangeLog.read(s.tables, t, "t", st, after: batch[0].index - 1, limit: 100)
                }
                for r in stored {
                    let hit = s.triggerRecords.cached("t", group, r.index)
                    if whole {
                        #expect(hit == nil, "round \(round): record \(r.index) of \(name) cached from a batch reaching the namespace whole")
                    } else {
                        #expect(hit == r.events, "round \(round): record \(r.index) of \(name)")
                        cached += 1
                    }
                }
            }
        }
        #expect(cached > 10 && wholeRounds > 0, "\(cached) records cached, \(wholeRounds) batches reaching the namespace whole")
    }
}
