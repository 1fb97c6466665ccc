import CLMDB
import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// The restore-only apply (`EmberStore.replayArchived`, what `ArchiveRestore` replays with)
/// produces exactly the state the node's own write path produced: every row of every state
/// table (tree, versions, query indexes, their overflow twins, meta: rules, index definitions,
/// triggers and their outbox, onDisconnect, writer stamps, the archive mark), compared with
/// the store that took the writes through `submit` and with one fed the same entries through
/// the Raft follower's path (`appendAndApply`).
@Suite(.printsSeedOnFailure) struct ArchiveReplayTests {
    /// Meta slots about the log itself: the replayed store keeps no log rows, so its log starts
    /// after the index it reached (`firstIndex`), where the writing store still holds its log.
    static let logMeta: Set<String> = ["firstIndex"]

    /// Every row of every table but the log, as "table key = value" lines in key order.
    static func rows(_ s: EmberStore) throws -> [String] {
        let t = s.tables
        let tables: [(String, MDB_dbi)] = [("tree", t.tree), ("ver", t.ver), ("idx", t.idx), ("treex", t.treex),
                                           ("verx", t.verx), ("idxx", t.idxx), ("meta", t.meta),
                                           ("trigrec", t.trigrec)]
        return try s.withRead { txn in
            var out: [String] = []
            for (name, dbi) in tables {
                let c = try txn.cursor(dbi)
                defer { c.close() }
                var row = try c.first()
                while let (k, stored) = row {
                    // A cluster member's compact trigger records, as the full ones they stand for.
                    let v = name == "trigrec" && TriggerRecordRows.index(of: k) > 0
                        ? try TriggerChangeLog.full(t, txn, index: TriggerRecordRows.index(of: k), stored) : stored
                    if !(name == "meta" && Self.logMeta.contains(String(decoding: k, as: UTF8.self))) {
                        out.append("\(name) \(k.map { String(format: "%02x", $0) }.joined()) = \(v.map { String(format: "%02x", $0) }.joined())")
                    }
                    row = try c.next()
                }
            }
            return out
        }
    }

    static let s1 = OnDisconnectSession(node: "n1", incarnation: "i1", id: "c-1")
    static let s2 = OnDisconnectSession(node: "n1", incarnation: "i1", id: "c-2")

    /// A history of every kind of write, as the node's write path takes them.
    static func writeHistory(_ a: EmberStore, _ g: inout SplitMix64, after: (EmberStore) throws -> Void) async throws {
        let user = WriteAuth.user(.object(["uid": .string("u1")]))
        // An object too large to be inline: a priority record at its key and a record per child.
        let large = "{" + (0..<40).map { "\"k\($0)\":\"\(String(repeating: "p", count: 40))\"" }.joined(separator: ",") + ",\".priority\":3}"
        var ops: [(String, WriteOperation, WriteAuth, WriterStamp?)] = [
            ("t", .setRules(text: #"{"rules":{".read":true,".write":true,"items":{".indexOn":["n","s"]},"locked":{".write":false}}}"#), .admin, nil),
            ("t", .set(path: p("/a"), value: j(#"{"x":1,"y":"s","z":{"deep":[1,2,3]}}"#)), .admin, nil),
            ("t", .update(path: p("/a"), values: [(p("z/deep/1"), j("true")), (p("x"), .null), (p("w"), j(#"{".sv":"timestamp"}"#))]), .admin, nil),
            ("t", .set(path: p("/c/n"), value: j(#"{".sv":{"increment":5}}"#)), .admin, nil),
            ("t", .set(path: p("/c/n"), value: j(#"{".sv":{"increment":2.5}}"#)), .admin, nil),
            ("t", .set(path: p("/ts"), value: j(#"{".sv":"timestamp"}"#)), .admin, nil),
            // Transactions: a conditional set that holds, one that fails, a version check that fails.
            ("t", .set(path: p("/tx"), value: j("1"), condition: .ifHash("")), .admin, nil),
            ("t", .set(path: p("/tx"), value: j("2"), condition: .ifHash("not-the-hash")), .admin, nil),
            ("t", .set(path: p("/c/n"), value: j("7"), condition: .ifVersion(1)), .admin, nil),
            ("t", .set(path: p("/locked/x"), value: j("1")), user, nil),  // denied by the rules
            ("t", .set(path: p("/items/k1"), value: j(#"{"n":3,"s":"b"}"#)), user, WriterStamp(writer: "w1", seq: 1)),
            ("t", .set(path: p("/items/k1"), value: j(#"{"n":3,"s":"b"}"#)), user, WriterStamp(writer: "w1", seq: 1)),  // a resend
            ("t", .set(path: p("/items/k2"), value: j(#"{"n":1,".priority":4}"#)), .admin, nil),
            ("t", .triggers(.define(text: TriggerApplyTests.defs)), .admin, nil),
            ("t", .set(path: p("/messages/m1"), value: j(#"{"text":"hi"}"#)), user, nil),
            ("t", .update(path: p("/"), values: [(p("messages/m1/text"), j(#""bye""#)), (p("rooms/r/likes/u"), j("true"))]), .admin, nil),
            ("t", .set(path: p("/messages/m1"), value: .null), .admin, nil),
            // onDisconnect: the node's holder, writes registered, one cancelled, a run.
            (OnDisconnectTable.namespace, .onDisconnect(.holder(node: "n1", incarnation: "i1")), .admin, nil),
            ("t", .onDisconnect(.register(session: s1, write: .set(path: p("/presence/u1"), value: j(#"{"online":false}"#)))), user, nil),
            ("t", .onDisconnect(.register(session: s1, write: .update(path: p("/presence/u1"), values: [(p("seen"), j(#"{".sv":"timestamp"}"#))]))), user, nil),
            ("t", .onDisconnect(.register(session: s2, write: .set(path: p("/presence/u2"), value: j("false")))), user, nil),
            ("t", .onDisconnect(.cancel(session: s2, path: p("/presence"))), user, nil),
            ("t", .set(path: p("/presence/u1"), value: j(#"{"online":true}"#)), user, nil),
            ("t", .onDisconnect(.run(session: s1)), .admin, nil),
            ("t", .archived(through: 0), .admin, nil),
            // A rules change that moves the index: one definition dropped, one built.
            ("t", .setRules(text: #"{"rules":{".read":true,".write":true,"items":{".indexOn":["n","m"]}}}"#), .admin, nil),
            // A bulk update (Applier.bulkParts or more parts: rows written in key order).
            ("t", .update(path: p("/items"), values: (0..<80).map { (p("b\($0)"), j(#"{"n":\#($0 % 7),"m":"\#($0)"}"#)) }), .admin, nil),
            // The same as its parts' text (`updateText`, issue 42), bulk and small, over what is there.
            ("t", .updateText(path: p("/items"), parts: UpdateTextEntryTests.text("/items", "{" + (0..<80).map { #""b\#($0)":{"n":\#($0 % 5),"m":"t\#($0)"}"# }.joined(separator: ",") + "}")), .admin, nil),
            ("t", .updateText(path: p("/"), parts: UpdateTextEntryTests.text("/", #"{"items/b1/n":9,"items/b2":null,"tx/deep":{"a":[1,{"b":2}],".priority":"p"}}"#)), user, nil),
            ("t", .set(path: p("/a"), value: .null), .admin, nil),
            // What a set finds at and above its key (the replay reads it with one cursor,
            // `WriteProbe`): a leaf above (deeper and with a priority), an inline object above
            // (a new child, an existing child, below a child), a leaf replaced in place by a
            // leaf and by a small object, a priority record at the key, an unchanged value.
            ("t", .set(path: p("/lf"), value: j("5")), .admin, nil),
            ("t", .set(path: p("/lf/x/y"), value: j("1")), .admin, nil),
            ("t", .set(path: p("/lp"), value: j(#"{".value":5,".priority":2}"#)), .admin, nil),
            ("t", .set(path: p("/lp/c"), value: j("1")), .admin, nil),
            ("t", .set(path: p("/io"), value: j(#"{"a":1,"b":"two"}"#)), .admin, nil),
            ("t", .set(path: p("/io/c"), value: j("3")), .admin, nil),
            ("t", .set(path: p("/io2"), value: j(#"{"a":1,"b":"two"}"#)), .admin, nil),
            ("t", .set(path: p("/io2/a"), value: j("9")), .admin, nil),
            ("t", .set(path: p("/io3"), value: j(#"{"a":1,"b":"two"}"#)), .admin, nil),
            ("t", .set(path: p("/io3/a/deep"), value: j("1")), .admin, nil),
            ("t", .set(path: p("/io3/b"), value: .null), .admin, nil),
            ("t", .set(path: p("/lf2"), value: j("1")), .admin, nil),
            ("t", .set(path: p("/lf2"), value: j(#""s""#)), .admin, nil),
            ("t", .set(path: p("/lf2"), value: j(#"{"k":true}"#)), .admin, nil),
            ("t", .set(path: p("/lf2"), value: j(#"{"k":true}"#)), .admin, nil),
            ("t", .set(path: p("/pr"), value: j(large)), .admin, nil),
            ("t", .set(path: p("/pr"), value: j("1")), .admin, nil),
            ("t", .set(path: p("/"), value: j(#"{"whole":{"root":1}}"#)), .admin, nil),
        ]
        // New leaves under a few parents, as a restore of small writes replays them.
        for i in 0..<40 { ops.append(("t", .set(path: p("/many/w\(i % 4)/k\(i)"), value: j(#""v""#)), .admin, nil)) }
        // The replay keeps a cursor per parent across its transaction (`ReplayCursors`): keys
        // that ascend within interleaved parents over many pages (splits under the other
        // parents' cursors), keys that descend, deletes between (a key, then a whole parent
        // its cursor was in, written again after), a parent replaced by a leaf and by an
        // object, then children again; keys past the table's end (appended); more parents
        // than the cursors kept open (`ReplayCursors.maxParents`).
        let pad = String(repeating: "x", count: 60)
        for i in 0..<700 {
            let k = String(format: "%05d", i)
            ops.append(("t", .set(path: p("/asc/p\(i % 8)/k\(k)"), value: j(#""\#(pad)\#(i)""#)), .admin, nil))
            if i % 9 == 4 { ops.append(("t", .set(path: p("/desc/q\(i % 3)/k\(String(format: "%05d", 999 - i))"), value: j("\(i)")), .admin, nil)) }
            if i % 50 == 7 { ops.append(("t", .set(path: p("/asc/p\((i + 1) % 8)/k\(String(format: "%05d", i - 7))"), value: .null), .admin, nil)) }
            if i == 300 { ops.append(("t", .set(path: p("/asc/p3"), value: .null), .admin, nil)) }
            if i == 400 { ops.append(("t", .set(path: p("/asc/p5"), value: j("5")), .admin, nil)) }
            if i == 500 { ops.append(("t", .set(path: p("/asc/p5"), value: j(#"{"a":1}"#)), .admin, nil)) }
            if i % 25 == 0 { ops.append(("t", .set(path: p("/zz/z\(k)"), value: j("\(i)")), .admin, nil)) }
        }
        for i in 0..<(ReplayCursors.maxParents + 40) {
            ops.append(("t", .set(path: p("/wide/c\(i)/k"), value: j("\(i)")), .admin, nil))
            if i % 3 == 0 { ops.append(("t", .set(path: p("/asc/p\(i % 8)/k\(String(format: "%05d", i))b"), value: j("1")), .admin, nil)) }
        }
        // Then seeded random sets, updates, increments and deletes over a small key space.
        for _ in 0..<300 {
            let k = "items/r\(Int.random(in: 0..<25, using: &g))"
            let op: WriteOperation
            switch Int.random(in: 0..<7, using: &g) {
            case 0: op = .set(path: p("/\(k)"), value: j(#"{"n":\#(Int.random(in: -3...9, using: &g)),"m":"\#(randomKey(&g))"}"#))
            case 1: op = .update(path: p("/\(k)"), values: [(p("n"), j("\(Int.random(in: 0...5, using: &g))")), (p("t"), j(#"{".sv":"timestamp"}"#))])
            case 2: op = .set(path: p("/\(k)/n"), value: j(#"{".sv":{"increment":\#(Int.random(in: -2...2, using: &g))}}"#))
            case 3: op = .set(path: p("/\(k)"), value: .null)
            case 4: op = .set(path: p("/\(k)/m"), value: j("\(Int.random(in: 0...3, using: &g))"), condition: .ifHash(""))
            case 5: op = .update(path: p("/items"), values: [(p("r\(Int.random(in: 0..<25, using: &g))/s"), j(#""x""#)), (p("z"), .null)])
            default:
                let r = Int.random(in: 0..<25, using: &g)
                op = .updateText(path: p("/items"), parts: UpdateTextEntryTests.text("/items", #"{"r\#(r)/s":"y","r\#(r)/n":\#(Int.random(in: 0...5, using: &g)),"z":null}"#))
            }
            ops.append(("t", op, .admin, nil))
        }
        for (ns, op, auth, stamp) in ops {
            _ = try await a.submit(namespace: ns, op, auth: auth, writer: stamp)
            try after(a)
        }
    }

    @Test func theReplayedStateIsTheWritePathsRowForRow() async throws {
        var o = smallOptions()
        o.logRetention = 0
        o.archiveHold = 100_000  // the log keeps every entry for the segments
        let a = try openStore(tempDir(), o)
        defer { a.close() }
        let dir = try DirectoryArchiveStore(directory: tempDir() + "/archive")
        let base = tempDir() + "/b0"
        _ = try a.writeBackup(to: base)
        try dir.putFile(ArchiveName.base(index: 0, timestamp: 0), from: base)
        var g = TestSeed.generator(0x37_f457)
        // The writing store's rows at a few seeded indexes, to restore to.
        let picked = Set((0..<8).map { _ in UInt64.random(in: 1...300, using: &g) })
        var recorded: [UInt64: [String]] = [:]
        try await Self.writeHistory(a, &g) { s in
            if picked.contains(s.appliedIndex) { recorded[s.appliedIndex] = try Self.rows(s) }
        }
        let last = a.appliedIndex
        recorded[last] = try Self.rows(a)
        #expect(recorded.count == picked.count + 1)
        let all = try a.encodedEntries(from: 1, through: last, maxCount: 100_000)
        #expect(all.map(\.index) == Array(1...last))
        // Segments of seeded sizes.
        var at = 0
        while at < all.count {
            let part = Array(all[at..<min(all.count, at + Int.random(in: 1...60, using: &g))])
            let segment = try ArchiveSegment(entries: part, stateHash: "")
            try dir.put(segment.name, bytes: segment.encoded())
            at += part.count
        }

        // Whole-history restores: one transaction per call (the defaults), and small batches
        // bounded by entries and by bytes (transactions end mid-segment and across segments).
        for (entries, bytes) in [(ArchiveRestore.replayBatchEntries, ArchiveRestore.replayBatchBytes), (13, 1 << 20), (10_000, 700)] {
            let b = try openStore()
            defer { b.close() }
            let r = try await ArchiveRestore.restore(from: dir, to: .index(last), into: b, scratchFile: tempDir() + "/scratch",
                                                     batchEntries: entries, batchBytes: bytes)
            #expect(r.index == last && r.entriesReplayed == Int(last))
            #expect(Self.firstDifference(try Self.rows(b), recorded[last]!) == nil, "batches of \(entries) entries / \(bytes) bytes")
            #expect(try b.stateHash() == a.stateHash())
            #expect(b.appliedIndex == last && b.lastLogIndex == last && b.firstLogIndex == last + 1)
            // The query indexes answer as the writing store's do.
            let q = QuerySpec(index: .child(p("n")), limit: 10, limitFromStart: false)
            #expect(try b.query(namespace: "t", path: p("/items"), spec: q).map(\.key)
                    == a.query(namespace: "t", path: p("/items"), spec: q).map(\.key))
        }
        // Restores to the picked indexes: the writing store's rows there.
        for target in picked.sorted() {
            let b = try openStore()
            defer { b.close() }
            let r = try await ArchiveRestore.restore(from: dir, to: .index(target), into: b, scratchFile: tempDir() + "/scratch",
                                                     batchEntries: 17)
            #expect(r.index == target)
            #expect(Self.firstDifference(try Self.rows(b), recorded[target]!) == nil, "index \(target)")
        }
        // The Raft follower's path (log rows, then apply) gives the same rows too.
        let f = try openStore()
        defer { f.close() }
        let decoded = try all.map { try LogEntry(decoding: $0.bytes) }
        for chunk in stride(from: 0, to: decoded.count, by: 50) {
            let part = Array(decoded[chunk..<min(decoded.count, chunk + 50)])
            try await f.appendAndApply(entries: part, through: part.last!.index, validated: true)
        }
        #expect(Self.firstDifference(try Self.rows(f), recorded[last]!) == nil, "the follower's path")
    }

    /// A replayed directory opens as a node's store and goes on from the index it reached.
    @Test func aReplayedStoreReopensAndTakesTheNextEntries() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            defer { s.close() }
            try await s.replayArchived((1...5).map {
                LogEntry(index: UInt64($0), term: 2, namespace: "t", operation: .set(path: p("/k\($0)"), value: .int(Int64($0))), timestamp: 1_000 + Int64($0))
            })
            // Not the next index: refused, nothing written.
            await #expect(throws: StorageError.self) {
                try await s.replayArchived([LogEntry(index: 7, term: 2, namespace: "t", operation: .noop, timestamp: 0)])
            }
            #expect(s.appliedIndex == 5)
        }
        let s = try openStore(dir)
        defer { s.close() }
        #expect(s.appliedIndex == 5 && s.lastLogIndex == 5 && s.lastLogTerm == 2 && s.firstLogIndex == 6)
        #expect(try s.entries(from: 1).isEmpty)
        try await s.appendAndApply(entries: [LogEntry(index: 6, term: 3, namespace: "t", operation: .set(path: p("/k6"), value: .int(6)), timestamp: 2_000)],
                                   through: 6, validated: true)
        #expect(try s.get("/k5") == n("5") && s.get("/k6") == n("6") && s.appliedIndex == 6)
    }

    /// Where two row dumps first differ (nil: they are equal), short enough for a failure's message.
    static func firstDifference(_ a: [String], _ b: [String]) -> String? {
        for (x, y) in zip(a, b) where x != y { return "\(x) vs \(y)" }
        return a.count == b.count ? nil : "\(a.count) rows vs \(b.count)"
    }
}
