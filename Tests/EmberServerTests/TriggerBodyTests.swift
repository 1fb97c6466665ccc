import EmberCore
import EmberTestSupport
import NIOCore
import Testing
@testable import EmberServer

/// The lanes of a group build their POST bodies from members serialized once for all of them
/// (`TriggerBodyCache`) behind their own head: for seeded random events each trigger gets the
/// bytes of each event written whole (the path before the cache), batched or not, and its own
/// signature (its secret's HMAC of those bytes); a trigger's own rows (group 0) likewise.
@Suite struct TriggerBodyTests {
    static let texts = ["a", "é\u{1}", "q\"uote", "line\nbreak", "\\", "日本", "🔥", "", "x y"]

    static func json(_ r: inout SplitMix64, depth: Int = 0) -> JSON {
        switch r.below(depth > 2 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(r.below(2) == 0)
        case 2: return .int(Int64(bitPattern: r.next()) >> r.below(64))
        case 3: return .double(Double(r.below(1_000_000)) / 7)
        case 4: return .string(texts[r.below(texts.count)])
        case 5: return .array((0..<r.below(4)).map { _ in json(&r, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<r.below(4) { o[texts[r.below(texts.count)] + String(r.below(10))] = json(&r, depth: depth + 1) }
            return .object(o)
        }
    }

    static func events(_ r: inout SplitMix64, count: Int) -> [TriggerEvent] {
        var out: [TriggerEvent] = []
        var index = UInt64(r.below(1_000_000) + 1)
        while out.count < count {
            let n = r.below(3) + 1
            for seq in 0..<n where out.count < count {
                let key = "k\(r.below(100))" + (r.below(4) == 0 ? "\"" : "")
                out.append(TriggerEvent(index: index, seq: seq, timestamp: Int64(r.below(2_000_000_000)) * 1000 + Int64(r.below(1000)),
                                        type: TriggerEventKind.allCases[r.below(4)], location: Path(validated: ["rooms", key]),
                                        params: ["id": key, "n\(r.below(3))": "v"], before: json(&r), after: json(&r), delta: json(&r),
                                        authType: ["admin", "app_user", "unauthenticated"][r.below(3)],
                                        authID: r.below(2) == 0 ? nil : texts[r.below(texts.count)]))
            }
            index += UInt64(r.below(5) + 1)
        }
        return out
    }

    /// The body as built before the cache: every event written whole.
    static func whole(_ events: [TriggerEvent], ns: String, trigger: String, batch: Bool) -> [UInt8] {
        var out: [UInt8] = []
        guard batch else {
            events.first?.writeCloudEvent(namespace: ns, trigger: trigger, into: &out)
            return events.isEmpty ? Array("null".utf8) : out
        }
        out.append(0x5B)
        for (k, e) in events.enumerated() {
            if k > 0 { out.append(0x2C) }
            e.writeCloudEvent(namespace: ns, trigger: trigger, into: &out)
        }
        out.append(0x5D)
        return out
    }

    @Test(arguments: [1, 2, 3]) func eachTriggerOfAGroupGetsTheWholeBytesAndItsOwnSignature(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        let bodies = TriggerBodyCache()
        let triggers = [("alpha", "0123456789abcdef-alpha"), ("beta_2", "another-secret-for-beta"), ("g-3", "0123456789abcdef")]
        let ns = "n s"
        for round in 0..<40 {
            let payload = Self.events(&r, count: r.below(30) + 1)
            for batch in [true, false] {
                var signatures: Set<String> = []
                for (name, secret) in triggers {
                    let want = Self.whole(payload, ns: ns, trigger: name, batch: batch)
                    let head = TriggerEvent.head(namespace: ns, trigger: name)
                    // Twice from the cache (the second lane of the group finds every event) and as own rows.
                    for group: UInt64 in [7, 7, 0] {
                        let got = TriggerLane.body(payload, namespace: ns, trigger: name, head: head, batch: batch, group: group, bodies: bodies)
                        #expect(got == want, "seed \(seed) round \(round) batch \(batch) trigger \(name) group \(group)")
                        #expect(TriggerLane.signature(got, secret: secret) == TriggerLane.signature(want, secret: secret))
                    }
                    signatures.insert(TriggerLane.signature(want, secret: secret))
                }
                #expect(signatures.count == triggers.count, "each trigger signs with its own secret")
            }
        }
    }

    /// Members the apply serialized once for a crowded group (`TriggerEvent.sharedMembers`)
    /// behind each trigger's head: the bytes of each event written whole, batched or not; and
    /// the serialized members do not count in an event's equality.
    @Test(arguments: [11, 12]) func membersSerializedAtTheApplyGiveTheWholeBytes(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        let ns = "n s"
        for round in 0..<40 {
            let payload = Self.events(&r, count: r.below(30) + 1)
            let serialized = payload.map { $0.withSharedMembers(namespace: ns) }
            #expect(serialized == payload)
            let members = serialized.map { $0.sharedMembers ?? [] }
            for name in ["alpha", "g-3"] {
                let head = TriggerEvent.head(namespace: ns, trigger: name)
                for batch in [true, false] {
                    let got = TriggerEvent.cloudEventBody(head: head, shared: members, batch: batch)
                    #expect(got == Self.whole(payload, ns: ns, trigger: name, batch: batch), "seed \(seed) round \(round) batch \(batch) trigger \(name)")
                    // Written straight into the POST's buffer: the same bytes, the same signature.
                    let buffer = TriggerLane.buffer(head: head, members: members, batch: batch)
                    #expect(Array(buffer.readableBytesView) == got)
                    let secret = "0123456789abcdef-\(name)"
                    #expect(TriggerLane.signature(buffer, secret: secret) == TriggerLane.signature(got, secret: secret))
                }
            }
        }
    }
}

/// A lane alone in its group writes its bodies straight from the events it holds by log index
/// (`TriggerLane.body(_:_:namespace:head:batch:)`): for seeded events and windows of them, some
/// not held, the bytes of the events held written whole, batched or not, as before.
@Suite struct TriggerHeldBodyTests {
    @Test(arguments: [6, 7, 8]) func aBodyFromTheHeldEventsIsTheWholeBytesOfThoseHeld(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        let ns = "n s", name = "alone"
        let head = TriggerEvent.head(namespace: ns, trigger: name)
        for round in 0..<40 {
            let all = TriggerBodyTests.events(&r, count: r.below(40) + 1)
            var byIndex: [UInt64: [TriggerEvent]] = [:]
            for e in all { byIndex[e.index, default: []].append(e) }
            let held = TriggerLaneEvents(byIndex)
            // Items in the machine's order; some of them for events the lane no longer holds
            // (another entry's, or a place past its entry's events).
            var items = all.map { TriggerDelivery.Event(index: $0.index, seq: $0.seq, last: false) }
            if r.below(3) == 0 { items.insert(TriggerDelivery.Event(index: 0, seq: 0, last: true), at: r.below(items.count + 1)) }
            if r.below(3) == 0, let e = all.last { items.append(TriggerDelivery.Event(index: e.index, seq: e.seq + 7, last: true)) }
            let start = r.below(items.count), window = Array(items[start..<min(items.count, start + r.below(20) + 1)])
            let payload = window.compactMap { i in byIndex[i.index]?.first { $0.seq == i.seq } }
            for batch in [true, false] {
                let got = TriggerLane.body(window, held, namespace: ns, head: head, batch: batch)
                #expect(got == TriggerBodyTests.whole(payload, ns: ns, trigger: name, batch: batch), "seed \(seed) round \(round) batch \(batch)")
                #expect(got == TriggerEvent.cloudEventBody(payload, namespace: ns, head: head, batch: batch))
            }
        }
        // Nothing held: an empty batch, or null.
        let none = [TriggerDelivery.Event(index: 3, seq: 0, last: true)]
        #expect(TriggerLane.body(none, TriggerLaneEvents(), namespace: ns, head: head, batch: true) == Array("[]".utf8))
        #expect(TriggerLane.body(none, TriggerLaneEvents(), namespace: ns, head: head, batch: false) == Array("null".utf8))
    }
}

/// A batching lane's body from the batch another lane of its group cut (`TriggerBodyCache.batch`):
/// found by its first event and length, checked event by event, so a different run of the same
/// length from the same first event (a lane that skipped records past its retention limit)
/// gets its own bytes; and the recent deliveries the admin endpoint shows stay bounded.
@Suite struct TriggerBatchBodyTests {
    @Test(arguments: [4, 5]) func aBatchFromTheCacheIsTheWholeBytesOnlyForTheSameEvents(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        let bodies = TriggerBodyCache()
        let ns = "t"
        let all = TriggerBodyTests.events(&r, count: 60)
        for round in 0..<30 {
            // Runs of the stream from one first event: whole, and with one event left out and
            // another taken at the end (same first event, same length).
            let start = r.below(20), n = r.below(20) + 3
            let run = Array(all[start..<(start + n)])
            var other = run
            other.remove(at: 1 + r.below(n - 1))
            other.append(all[start + n])
            for (name, payload) in [("a", run), ("b", run), ("c", other), ("a", other), ("b", run)] {
                let head = TriggerEvent.head(namespace: ns, trigger: name)
                let got = TriggerLane.body(payload, namespace: ns, trigger: name, head: head, batch: true, group: 9, bodies: bodies)
                #expect(got == TriggerBodyTests.whole(payload, ns: ns, trigger: name, batch: true), "seed \(seed) round \(round) trigger \(name)")
            }
        }
    }

    @Test func recentDeliveriesShowABoundedNumberOfIds() throws {
        let runtime = TriggerRuntime()
        let events = (1...1_000).map { TriggerDelivery.Event(index: UInt64($0), seq: 0, last: true) }
        for _ in 0..<(TriggerRuntime.maxRecent + 5) {
            runtime.recorded("t", "a", .init(events: events, outcome: "delivered", status: 200, millis: 3, at: 1), events: events.count, latencies: [])
        }
        guard case .object(let o) = runtime.json("t", "a"), case .array(let recent)? = o["recent"] else {
            Issue.record("no recent deliveries")
            return
        }
        #expect(recent.count == TriggerRuntime.maxRecent)
        for d in recent {
            guard case .object(let m) = d, case .array(let ids)? = m["ids"] else { Issue.record("\(d)"); continue }
            #expect(ids.count == TriggerRuntime.maxIdsShown)
            #expect(ids.first == .string("1-0") && m["firstId"] == .string("1-0") && m["lastId"] == .string("1000-0"))
            #expect(m["events"] == .int(1_000) && m["outcome"] == .string("delivered"))
        }
        // A small delivery shows all its ids.
        let two = Array(events.prefix(2))
        runtime.recorded("t", "b", .init(events: two, outcome: "HTTP 500", status: 500, millis: 3, at: 1), events: 2, latencies: [])
        guard case .object(let ob) = runtime.json("t", "b"), case .array(let rb)? = ob["recent"], case .object(let d)? = rb.first else {
            Issue.record("no recent deliveries for b")
            return
        }
        #expect(d["ids"] == .array([.string("1-0"), .string("2-0")]) && d["events"] == .int(2))
    }
}
