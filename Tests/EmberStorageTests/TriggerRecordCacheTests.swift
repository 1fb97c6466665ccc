import EmberCore
import Testing
@testable import EmberStorage

/// The delivery lanes' record cache: a group's record is decoded once for all its lanes, per
/// namespace, and when full the newer generation stays (the lanes read near the stream's end).
@Suite struct TriggerRecordCacheTests {
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
}
