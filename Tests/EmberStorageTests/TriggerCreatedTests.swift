import CLMDB
import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A set creating a location of a trigger pattern exactly takes its own way through the apply
/// (`Applier.setOnlyCreates`, `recordCreated`): the same rows as the general capture and diff
/// (`captureTriggers`, `recordTriggers`) would write, compact or full, and the compact record
/// the general encoding makes of its event (`TriggerCompactRecord.encodeCreated`).
@Suite(.printsSeedOnFailure) struct TriggerCreatedTests {
    typealias T = TriggerSharedRecordTests

    /// Wildcard names out of their name order (`zeta` before `alpha`), a pattern starting with a
    /// wildcard (every write is its candidate), two groups and a feed.
    static let defs = T.defs([
        ("made", T.trigger("/messages/{id}", on: "created")), ("any", T.trigger("/messages/{id}", on: "written")),
        ("gone", T.trigger("/messages/{id}", on: "deleted")),
        ("likes", T.trigger("/rooms/{room}/likes/{uid}", on: "created")), ("pair", T.trigger("/z/{zeta}/{alpha}", on: "written")),
        ("inbox", T.trigger("/{u}/inbox/{m}", on: "created")), ("feed", #"{"path": "/feeds/{a}/{b}", "on": ["written"], "feed": true}"#),
        ("fed", T.trigger("/feeds/{a}/{b}", on: "created")),
    ])

    static let auths: [WriteAuth] = [.admin, .user(nil), .user(.object(["uid": .string("u-1")])), .user(.object(["sub": .string("s-ü")]))]

    @Test func encodeCreatedIsTheCompactEncodingOfItsEvent() throws {
        var g = TestSeed.generator(0xc2_ea7e)
        let names = ["id", "a", "b", "zeta", "alpha", "pushId", "u_1", "Z", "m2"]
        for _ in 0..<2_000 {
            var segments: [String] = []
            var wild = names.shuffled(using: &g).prefix(Int.random(in: 0...4, using: &g)).map { "{\($0)}" }
            for _ in 0..<Int.random(in: 0...3, using: &g) { wild.append(["list", "x", "é"].randomElement(using: &g)!) }
            segments = wild.shuffled(using: &g)
            if segments.isEmpty { segments = ["{id}"] }
            let pattern = try TriggerPattern(parsing: "/" + segments.joined(separator: "/"))
            let keys = pattern.segments.map { s -> String in
                if case .literal(let k) = s { return k }
                return ["k", "-Nq1", "héllo", "0", "a b", String(repeating: "y", count: 70)].randomElement(using: &g)! + "\(Int.random(in: 0..<99, using: &g))"
            }
            let location = Path(validated: keys)
            let value = try ServerValues.resolve(TriggerCompactRecordTests.value(&g), existing: .empty, now: 1_700_000_000_000)
            let node = try Node(json: value, depth: location.count)
            let e = LogEntry(index: UInt64.random(in: 1...1_000_000, using: &g), term: 1, namespace: "t",
                             operation: .set(path: location, value: value), timestamp: 1_700_000_000_000,
                             auth: Self.auths.randomElement(using: &g)!)
            let last = TriggerChangeLog.Position(index: e.index - 1, records: UInt64.random(in: 0...9_999, using: &g),
                                                 bytes: UInt64.random(in: 0...1 << 40, using: &g), events: UInt64.random(in: 0...1 << 30, using: &g))
            let type: TriggerEventKind = Bool.random(using: &g) ? .created : .written
            let event = TriggerCompactRecord.Event(type: type, location: location, params: try #require(pattern.match(location)))
            let general = TriggerCompactRecord.encode([event], after: [node], pattern, entry: e, after: last)
            let created = TriggerCompactRecord.encodeCreated(type, at: location, pattern, value: node, entry: e, after: last)
            #expect(created.bytes == general.bytes && created.at == general.at, "\(pattern) at \(location)")
        }
    }

    /// Which sets take the way, and that each writes the rows the general way writes: the same
    /// set applied both ways to the same committed state, in transactions thrown away; with
    /// compact records, with every group's records full (behind the log's retention), and
    /// without compact records (a single node, a learner).
    @Test func aSetCreatingALocationWritesTheRowsOfTheGeneralWay() async throws {
        let s = try openStore()
        defer { s.close() }
        try await T().op(s, .define(text: Self.defs))
        _ = try await s.set("/messages/m0", #"{"a": 1}"#)
        _ = try await s.set("/rooms/r1/likes/u0", "true")
        let set = try s.triggerSet(namespace: "t")
        let cases: [(path: String, value: JSON, creates: Bool)] = [
            ("/messages/new1", .object(["a": .int(1), "b": .string("x")]), true),
            ("/messages/new2", .string("hello"), true),
            ("/messages/m0", .int(2), false),                          // updated
            ("/messages", .object(["m9": .int(1)]), false),           // above the locations
            ("/messages/new3/x", .int(1), false),                     // below a location
            ("/messages/new4", .null, false),                         // nothing created
            ("/rooms/r1/likes/u9", .bool(true), true),
            ("/rooms/r1/likes/u0", .bool(false), false),
            ("/z/k1/k2", .double(1.5), true),
            ("/u1/inbox/m1", .object([".value": .int(3), ".priority": .int(1)]), true),
            ("/feeds/a/b", .int(1), false),                           // a feed on the pattern
            ("/elsewhere/q", .int(1), false),                         // no pattern
        ]
        let everyGroup = Set(set.definitions.map { TriggerTails.Key(ns: "t", group: $0.group) })
        var index: UInt64 = 100
        var full = 0
        for (compact, fullGroups) in [(true, Set<TriggerTails.Key>()), (true, everyGroup), (false, [])] {
            for c in cases {
                for auth in Self.auths {
                    index += 1
                    let path = try Path(c.path)
                    let e = LogEntry(index: index, term: 1, namespace: "t", operation: .set(path: path, value: c.value),
                                     timestamp: 1_700_000_000_000 + Int64(index), auth: auth)
                    let (creates, fast) = try await apply(s, set, e, c.value, fast: true, compact: compact, full: fullGroups)
                    let (_, general) = try await apply(s, set, e, c.value, fast: false, compact: compact, full: fullGroups)
                    #expect(creates == c.creates, "\(c.path)")
                    guard creates else { continue }
                    #expect(fast.reach == general.reach && fast.reach != .none, "\(c.path)")
                    let added = fast.rows.filter { general.before[$0.key] == nil }
                    #expect(fast.rows == general.rows && !added.isEmpty, "\(c.path)")
                    // Compact exactly where the general way made it so.
                    #expect(added.values.contains { TriggerCompactRecord.isCompact($0) } == (compact && fullGroups.isEmpty), "\(c.path)")
                    full += added.values.filter { !TriggerCompactRecord.isCompact($0) }.count
                }
            }
        }
        #expect(full > 0)
    }

    struct Applied {
        var reach: TriggerReach
        var rows: [[UInt8]: [UInt8]]
        var before: [[UInt8]: [UInt8]]
    }

    /// `e` (a set of `value`) applied the fast way (when `setOnlyCreates` lets it) or the
    /// general way: whether the fast way was taken, the reach and the rows under `triggers/`.
    func apply(_ s: EmberStore, _ set: TriggerSet, _ e: LogEntry, _ value: JSON, fast: Bool, compact: Bool,
               full: Set<TriggerTails.Key>) async throws -> (Bool, Applied) {
        guard case .set(let path, _, _) = e.operation else { preconditionFailure("a set") }
        return try await s.perform { w in
            try Self.txn(w) { t in
                var ap = Applier(tables: w.tables, txn: t, triggers: ["t": set])
                ap.compactTriggers = compact
                ap.fullTriggerGroups = full
                let before = try Self.rows(w.tables, t)
                let old = try w.tables.readNode(t, "t", path)
                let node = try Node(json: value, depth: path.count)
                let creates = ap.setOnlyCreates(set, path: path, old: old, node: node)
                var reach = TriggerReach.none
                if fast && creates {
                    reach = try ap.recordCreated(e, set, path: path, node: node)
                } else if let capture = try ap.captureTriggers("t", parts: [(path, old)]) {
                    reach = try ap.recordTriggers(e, capture, parts: [(path, node)])
                }
                return (creates, Applied(reach: reach, rows: try Self.rows(w.tables, t), before: before))
            }
        }
    }

    /// A write transaction that is thrown away.
    static func txn<R>(_ w: Writer, _ body: (Txn) throws -> R) throws -> R {
        var raw: OpaquePointer?
        try check(mdb_txn_begin(w.store.env, nil, 0, &raw))
        defer { mdb_txn_abort(raw) }
        return try body(Txn(ptr: raw!))
    }

    static func rows(_ tables: Tables, _ t: Txn) throws -> [[UInt8]: [UInt8]] {
        var out: [[UInt8]: [UInt8]] = [:]
        try t.scanTriggerRows(tables, prefix: TriggerKeys.prefix) { k, v in out[k] = v; return true }
        return out
    }
}
