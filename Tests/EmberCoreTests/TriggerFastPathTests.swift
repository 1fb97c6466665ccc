import EmberTestSupport
import Testing
@testable import EmberCore

/// The per-write and per-event shortcuts of triggers give what the general paths give:
/// a one-part write's scopes and changes (no set of paths) are those of the same write given
/// twice (which takes the general path and dedups), and an event's shared CloudEvent members
/// written as bytes (digits, keys escaped one by one) are the bytes of each member's string
/// written whole, as they were built before.
@Suite struct TriggerFastPathTests {
    static let keys = ["a", "b", "m1", "m2", "x", "q\"k", "é\u{1}", "line\nbreak", "\\", "日本", "🔥", "-K1"]

    static func node(_ r: inout SplitMix64, depth: Int = 0) -> Node {
        switch r.below(depth > 2 ? 3 : 5) {
        case 0: return .empty
        case 1: return Node(.int(Int64(r.below(4))))
        case 2: return Node(.string(keys[r.below(keys.count)]))
        default:
            var children: [(String, Node)] = []
            for _ in 0..<r.below(4) { children.append((keys[r.below(4)], node(&r, depth: depth + 1))) }
            var n = Node.empty
            for (k, c) in children { n.set(c, at: Path(validated: [k])) }
            return n
        }
    }

    static func path(_ r: inout SplitMix64) -> Path {
        Path(validated: (0..<r.below(5)).map { _ in keys[r.below(5)] })
    }

    @Test(arguments: [1, 2, 3]) func aOnePartWritesScopesAndChangesAreTheGeneralPaths(seed: UInt64) throws {
        var r = SplitMix64(seed: seed)
        let patterns = try ["/a/{id}", "/{x}/{y}", "/a/m1", "/", "/{x}/b/{z}"].map { try TriggerPattern(parsing: $0) }
        for _ in 0..<2_000 {
            let pattern = patterns[r.below(patterns.count)]
            let p = Self.path(&r)
            let one = TriggerChanges.scopes(pattern, parts: [p])
            #expect(one == TriggerChanges.scopes(pattern, parts: [p, p]))
            let before = one.map { _ in Self.node(&r) }
            let n = Self.node(&r)
            #expect(TriggerChanges.changes(pattern, parts: [(p, n)], before: before)
                    == TriggerChanges.changes(pattern, parts: [(p, n), (p, n)], before: before))
        }
    }

    /// Each kind's stored byte is its place in `allCases` (what records were written with) and
    /// its CloudEvents type Firebase's name; no other byte is a kind.
    @Test func eventKindsKeepTheirStoredCodesAndTypes() {
        for (k, kind) in TriggerEventKind.allCases.enumerated() {
            #expect(kind.code == UInt8(k) && TriggerEventKind(code: UInt8(k)) == kind)
            #expect(kind.cloudEventType == "google.firebase.database.ref.v1.\(kind.rawValue)")
        }
        #expect((TriggerEventKind.allCases.count...255).allSatisfy { TriggerEventKind(code: UInt8($0)) == nil })
    }

    /// The members as `writeSharedMembers` wrote them before: each string built, then written whole.
    static func reference(_ e: TriggerEvent, namespace: String) -> [UInt8] {
        var out: [UInt8] = []
        func member(_ k: String, _ v: String) {
            JSONWriter.writeString(k, into: &out); out.append(0x3A); JSONWriter.writeString(v, into: &out); out.append(0x2C)
        }
        let ref = e.location.segments.joined(separator: "/")
        member("id", e.id)
        member("type", "google.firebase.database.ref.v1.\(e.type.rawValue)")
        member("time", TriggerEvent.rfc3339(millis: e.timestamp))
        member("subject", "refs/" + ref)
        member("datacontenttype", "application/json")
        member("ref", "/" + ref)
        member("instance", namespace)
        member("sequence", String(e.index))
        JSONWriter.writeString("params", into: &out); out.append(contentsOf: [0x3A, 0x7B])
        for (k, name) in e.params.keys.sorted().enumerated() {
            if k > 0 { out.append(0x2C) }
            JSONWriter.writeString(name, into: &out); out.append(0x3A); JSONWriter.writeString(e.params[name]!, into: &out)
        }
        out.append(contentsOf: [0x7D, 0x2C])
        member("authtype", e.authType)
        if let id = e.authID { member("authid", id) }
        JSONWriter.writeString("data", into: &out); out.append(contentsOf: [0x3A, 0x7B])
        for (k, v) in [("data", e.before), ("delta", e.delta), ("before", e.before), ("after", e.after)] {
            if k != "data" { out.append(0x2C) }
            JSONWriter.writeString(k, into: &out); out.append(0x3A)
            JSONWriter.write(v, into: &out, pretty: false, indent: 0)
        }
        out.append(contentsOf: [0x7D, 0x7D])
        return out
    }

    /// One `TriggerMembersWriter` over a run of events (times repeating, as an entry's events
    /// and one millisecond's entries do, and changing) writes each event's reference bytes:
    /// what it keeps from one event never leaks into the next.
    @Test(arguments: [4, 5, 6]) func aWriterReusedOverManyEventsWritesEachOnesBytes(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        for ns in ["ns", "n s", "q\"ns"] {
            var writer = TriggerMembersWriter(namespace: ns)
            var time: Int64 = 1_764_000_000_000
            var out: [UInt8] = [], want: [UInt8] = []
            for k in 0..<1_000 {
                if r.below(3) == 0 { time += Int64(r.below(2_000)) }
                let location = Path(validated: (0..<r.below(4)).map { _ in Self.keys[r.below(Self.keys.count)] })
                var params: [String: String] = [:]
                for _ in 0..<r.below(3) { params["p\(r.below(5))"] = Self.keys[r.below(Self.keys.count)] }
                let e = TriggerEvent(index: UInt64(k / 3 + 1), seq: k % 3, timestamp: time, type: TriggerEventKind.allCases[r.below(4)],
                                     location: location, params: params, before: Self.node(&r).toJSON(), after: Self.node(&r).toJSON(),
                                     delta: Self.node(&r).toJSON(), authType: ["admin", "app_user"][r.below(2)],
                                     authID: r.below(2) == 0 ? nil : Self.keys[r.below(Self.keys.count)])
                let start = out.count
                writer.write(e, into: &out)
                #expect(Array(out[start...]) == Self.reference(e, namespace: ns), "event \(k) of \(ns)")
                want += Self.reference(e, namespace: ns)
            }
            #expect(out == want)
        }
    }

    @Test(arguments: [1, 2, 3]) func theSharedMembersAreTheWholeStringsBytes(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        // Edge times: the epoch, before it, the last millisecond of year 9999 and past it.
        let times: [Int64] = [0, -1, -86_400_001, 253_402_300_799_999, 253_402_300_800_000, 951_782_400_000, .max / 2]
        for k in 0..<3_000 {
            let depth = r.below(4)
            let location = Path(validated: (0..<depth).map { _ in Self.keys[r.below(Self.keys.count)] })
            var params: [String: String] = [:]
            for _ in 0..<r.below(4) { params["p\(r.below(5))"] = Self.keys[r.below(Self.keys.count)] }
            let index = [UInt64(r.below(10)), UInt64(r.below(1_000_000_000)), UInt64.max, r.next()][r.below(4)]
            let time = k < times.count ? times[k] : Int64(r.below(4_000_000_000)) * 1_000 + Int64(r.below(1_000))
            let e = TriggerEvent(index: index, seq: [0, 9, 10, r.below(100_000)][r.below(4)], timestamp: time,
                                 type: TriggerEventKind.allCases[r.below(4)], location: location, params: params,
                                 before: Self.node(&r).toJSON(), after: Self.node(&r).toJSON(), delta: Self.node(&r).toJSON(),
                                 authType: ["admin", "app_user", "unauthenticated"][r.below(3)],
                                 authID: r.below(2) == 0 ? nil : Self.keys[r.below(Self.keys.count)])
            let ns = ["ns", "n s", "q\"ns"][r.below(3)]
            var out: [UInt8] = []
            e.writeSharedMembers(namespace: ns, into: &out)
            #expect(out == Self.reference(e, namespace: ns), "event \(e.id) at \(time)")
        }
    }
}
