import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// The delivery lanes' record cache: a group's record is decoded once for all its lanes, per
/// namespace, and when full the newer generation stays (the lanes read near the stream's end).
@Suite(.printsSeedOnFailure) struct TriggerRecordCacheTests {
    static func event(_ index: UInt64) -> TriggerEvent {
        TriggerEvent(index: index, seq: 0, timestamp: Int64(index), type: .created, location: Path(validated: ["m", "k\(index)"]),
                     params: ["id": "k\(index)"], before: .null, after: .int(Int64(index)), delta: .int(Int64(index)),
                     authType: "admin", authID: nil)
    }

    static func rows(_ r: ClosedRange<UInt64>) -> [(index: UInt64, value: [UInt8])] { r.map { ($0, [UInt8](repeating: 1, count: 3)) } }

    @Test func eachRecordIsDecodedOnceAndTheNewestStayWhenFull() throws {
        let cache = TriggerRecordCache()
        var decoded = 0
        func read(_ ns: String, _ group: UInt64, _ r: ClosedRange<UInt64>) throws -> [(index: UInt64, events: [TriggerEvent])] {
            var i = r.lowerBound
            return try cache.events(ns, group, Self.rows(r)) { (_: [UInt8]) throws(StorageError) -> [TriggerEvent] in
                decoded += 1
                defer { i += 1 }
                return [Self.event(i)]
            }
        }
        let first = try read("a", 7, 1...100)
        #expect(decoded == 100 && first.map(\.index) == Array(1...100) && first.allSatisfy { $0.events == [Self.event($0.index)] })
        // Another lane of the group: nothing decoded again, the same events.
        let again = try read("a", 7, 1...100)
        #expect(decoded == 100 && again.map(\.index) == first.map(\.index) && zip(again, first).allSatisfy { $0.events == $1.events })
        // Another group or namespace is another stream.
        _ = try read("a", 8, 1...10)
        _ = try read("b", 7, 1...10)
        #expect(decoded == 120)
        // Past two generations' worth, the newest records are still there; the oldest went.
        let max = UInt64(TriggerRecordCache.maxRecords)
        _ = try read("a", 7, 101...(2 * max + 50))
        decoded = 0
        _ = try read("a", 7, (2 * max + 50 - max + 1)...(2 * max + 50))
        #expect(decoded == 0)
        _ = try read("a", 7, 1...10)
        #expect(decoded == 10)
    }

    static func record(_ ns: String, _ group: UInt64, _ index: UInt64) -> TriggerReleases.Record {
        var e = event(index)
        e.seq = Int(group)
        return TriggerReleases.Record(namespace: ns, group: group, index: index, events: [e])
    }

    /// Released records handed over at their commit (`insert`, runs in log order, namespaces
    /// interleaved) are found by group and index as given, the others not; a lane's read finds
    /// them without decoding; past twice `maxRecords` of a namespace the oldest runs go, the
    /// newest stay; a run out of log order starts the namespace's runs over.
    @Test func releasedRunsAreFoundByGroupAndIndexAndTheNewestStay() throws {
        let cache = TriggerRecordCache()
        var r = TestSeed.generator(36)
        var given: [String: [(UInt64, UInt64)]] = [:]
        var next: UInt64 = 1
        for _ in 0..<200 {
            // One commit's records: entries in log order, each of one namespace, with one or two groups.
            var batch: [TriggerReleases.Record] = []
            for _ in 0..<(r.below(12) + 1) {
                let ns = ["a", "b"][r.below(2)]
                let groups: [UInt64] = r.below(3) == 0 ? [3, 5] : [UInt64(r.below(2) == 0 ? 3 : 5)]
                for g in groups {
                    batch.append(Self.record(ns, g, next))
                    given[ns, default: []].append((g, next))
                }
                next += UInt64(r.below(3) + 1)
            }
            cache.insert(batch)
        }
        for (ns, records) in given {
            for (g, i) in records {
                #expect(cache.cached(ns, g, i) == [Self.record(ns, g, i).events[0]], "\(ns) \(g) \(i)")
                #expect(cache.cached(ns, g == 3 ? 4 : 6, i) == nil)
                #expect(cache.cached(ns == "a" ? "c" : "d", g, i) == nil)
            }
            let held = Set(records.map { $0.1 })
            for i in 0...next where !held.contains(i) { #expect(cache.cached(ns, 3, i) == nil && cache.cached(ns, 5, i) == nil) }
        }
        // A lane's read of released records decodes none of them.
        let some = given["a"]!.filter { $0.0 == 3 }.prefix(20).map(\.1)
        var decoded = 0
        let got = try cache.events("a", 3, indexes: Array(some)) { (_: Int) throws(StorageError) -> [TriggerEvent] in
            decoded += 1
            return []
        }
        #expect(decoded == 0 && got.map(\.index) == Array(some) && got.allSatisfy { $0.events == Self.record("a", 3, $0.index).events })
        // Bounded: runs of one record each, far past the limit; the newest stay, the oldest went.
        let max = UInt64(TriggerRecordCache.maxRecords)
        let base = next + 10
        for i in base..<(base + 3 * max) { cache.insert([Self.record("a", 3, i)]) }
        #expect(cache.cached("a", 3, base + 3 * max - 1) != nil && cache.cached("a", 3, base + max + 1) != nil)
        #expect(cache.cached("a", 3, base) == nil && cache.cached("a", 3, given["a"]!.last!.1) == nil)
        // Another namespace keeps its own.
        #expect(cache.cached("b", given["b"]!.last!.0, given["b"]!.last!.1) != nil)
        // Out of log order: the namespace's runs start over from that run.
        cache.insert([Self.record("a", 3, base)])
        #expect(cache.cached("a", 3, base) != nil && cache.cached("a", 3, base + 3 * max - 1) == nil)
    }
}
