import EmberCore
import EmberTestSupport
import Testing
@testable import EmberServer

/// The events a lane holds (`TriggerLaneEvents`) answer as a dictionary by log index would,
/// for entries taken and settled in log order (the lane's case) and out of it, and a POST's
/// items are found in their order, those not held skipped.
@Suite(.printsSeedOnFailure) struct TriggerLaneEventsTests {
    static func entry(_ index: UInt64, _ count: Int) -> [TriggerEvent] {
        (0..<count).map {
            TriggerEvent(index: index, seq: $0, timestamp: Int64(index), type: .created, location: Path(validated: ["k\(index)", "\($0)"]),
                         params: [:], before: .null, after: .int(Int64(index)), delta: .int(Int64(index)), authType: "admin", authID: nil)
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64]) func answersAsADictionary(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        var held = TriggerLaneEvents()
        var model: [UInt64: [TriggerEvent]] = [:]
        var next: UInt64 = 1
        for step in 0..<3_000 {
            switch r.below(10) {
            case 0...4:
                // Entries taken in log order (now and then one below the newest).
                next += UInt64(r.below(3) + 1)
                var index = next
                if r.below(20) == 0, let low = model.keys.min(), low > 1 { index = low - 1 }
                let events = Self.entry(index, r.below(3) + 1)
                held[index] = events
                model[index] = events
            case 5...7:
                // The oldest settled, a run of them.
                let run = Array(model.keys.sorted().prefix(r.below(4) + 1))
                held.forget(run)
                for i in run { model[i] = nil }
            default:
                // One settled out of order (not expected of a lane), or one not held.
                let keys = model.keys.sorted()
                let i = keys.isEmpty ? next + 1 : keys[r.below(keys.count)]
                if r.below(2) == 0 { held[i] = nil } else { held.forget([i]) }
                model[i] = nil
            }
            #expect(held.count == model.count && held.isEmpty == model.isEmpty, "step \(step)")
            for _ in 0..<4 {
                let probe = UInt64(r.below(Int(next) + 2))
                #expect(held[probe] == model[probe], "step \(step): \(probe)")
            }
            // A POST's items: a run of held events in log order, with some not held among them.
            var items = model.keys.sorted().prefix(r.below(6)).flatMap { i in model[i]!.map { TriggerDelivery.Event(index: i, seq: $0.seq, last: false) } }
            if r.below(3) == 0 { items.insert(TriggerDelivery.Event(index: next + 5, seq: 0, last: true), at: r.below(items.count + 1)) }
            if r.below(3) == 0, let last = items.last { items.append(TriggerDelivery.Event(index: last.index, seq: last.seq + 9, last: true)) }
            var seen: [(Int, UInt64, Int)] = []
            held.forEach(items) { k, e in seen.append((k, e.pointee.index, e.pointee.seq)) }
            let want = items.enumerated().compactMap { k, i in model[i.index]?.first { $0.seq == i.seq }.map { (k, $0.index, $0.seq) } }
            #expect(seen.map(\.0) == want.map(\.0) && seen.map(\.1) == want.map(\.1) && seen.map(\.2) == want.map(\.2), "step \(step)")
            for i in items { #expect(held.event(i) == model[i.index]?.first { $0.seq == i.seq }) }
        }
    }
}
