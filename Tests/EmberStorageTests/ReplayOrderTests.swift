import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// The restore-only replay applies runs of independent leaf sets in key order (`ReplayOrder`):
/// which stretches it plans so, and that the state is the write path's row for row when it
/// does (and when the namespace's state keeps a run in log order).
@Suite struct ReplayOrderTests {
    static func entry(_ i: Int, _ op: WriteOperation, writer: WriterStamp? = nil) -> LogEntry {
        LogEntry(index: UInt64(i), term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(i), writer: writer)
    }

    static func plan(_ ops: [WriteOperation]) -> (ReplayOrder, [LogEntry]) {
        let entries = ops.enumerated().map { Self.entry($0.offset + 1, $0.element) }
        return (ReplayOrder.plan(entries, entries.map(EmberStore.replayPrepared)), entries)
    }

    static func leaf(_ path: String, _ v: String = "1") -> WriteOperation { .set(path: p(path), value: j(v)) }

    @Test func interleavedParentsWalkInKeyOrder() {
        // Three parents interleaved, each one's keys ascending; one parent's keys descending.
        var ops: [WriteOperation] = []
        for i in 0..<30 { ops.append(Self.leaf("/c/w\(2 - i % 3)/k\(String(format: "%03d", i))")) }
        for i in 0..<10 { ops.append(Self.leaf("/d/k\(String(format: "%03d", 99 - i))")) }
        let (plan, entries) = Self.plan(ops)
        #expect(plan.runs == [0..<40])
        #expect(Set(plan.order) == Set(0..<40) && plan.order.count == 40)
        let paths = plan.order.map { entries[Int($0)].operation.path.description }
        // Parents in key order (/c/w0, /c/w1, /c/w2, /d), each one's keys ascending.
        #expect(paths == paths.sorted())
        #expect(paths.first == "/c/w0/k002" && paths.last == "/d/k099")
    }

    @Test func aPathTwiceOrAPathAboveAnotherKeepsLogOrder() {
        var twice = (0..<12).map { Self.leaf("/c/w\($0 % 2)/k\($0)") }
        twice.append(Self.leaf("/c/w0/k4", "2"))
        #expect(Self.plan(twice).0.runs.isEmpty)
        // A parent written as a leaf, its children in the same stretch (either order).
        var above = (0..<12).map { Self.leaf("/c/w\($0 % 2)/k\($0)") }
        above.append(Self.leaf("/c/w1", "5"))
        #expect(Self.plan(above).0.runs.isEmpty)
        var grand = [Self.leaf("/c")]
        grand += (0..<12).map { Self.leaf("/c/w\($0 % 2)/k\($0)") }
        #expect(Self.plan(grand).0.runs.isEmpty)
        // Siblings whose keys share a prefix are no ancestors: one run.
        let siblings = (0..<12).map { Self.leaf("/c/k\($0)") } + [Self.leaf("/c/k1x"), Self.leaf("/c/k")]
        let (plan, _) = Self.plan(siblings)
        #expect(plan.runs == [0..<14])
        #expect(plan.order.count == 14 && Set(plan.order).count == 14)
    }

    @Test func onlyPlainLeafSetsMove() {
        let leaves = (0..<10).map { Self.leaf("/c/w\($0 % 2)/k\($0)") }
        // Each breaks a run: a delete, an object, a condition, a server value, an update, rules.
        let breakers: [WriteOperation] = [
            .set(path: p("/x/a"), value: .null),
            .set(path: p("/x/b"), value: j(#"{"o":1}"#)),
            .set(path: p("/x/c"), value: j("1"), condition: .ifHash("")),
            .set(path: p("/x/d"), value: j(#"{".sv":"timestamp"}"#)),
            .update(path: p("/x"), values: [(p("e"), j("1"))]),
            .setRules(text: #"{"rules":{".read":true,".write":true}}"#),
        ]
        for b in breakers {
            let (plan, _) = Self.plan(leaves + [b] + leaves.map { op in
                guard case .set(let path, let v, _) = op else { return op }
                return .set(path: Path(validated: ["y"] + path.segments), value: v)
            })
            #expect(plan.runs == [0..<10, 11..<21], "\(b)")
            #expect(plan.order[10] == 10)
        }
        // A writer stamp: the entry stays where it is (its outcome is recorded per writer).
        var entries = leaves.enumerated().map { Self.entry($0.offset + 1, $0.element) }
        entries.insert(Self.entry(11, Self.leaf("/z/k"), writer: WriterStamp(writer: "w", seq: 1)), at: 5)
        let plan = ReplayOrder.plan(entries, entries.map(EmberStore.replayPrepared))
        #expect(plan.runs.isEmpty, "two stretches of 5, each shorter than a run")
        #expect(plan.order == (0..<11).map { Int32($0) })
        // The root is never moved, nor are entries whose nodes were not prebuilt.
        #expect(!ReplayOrder.movable(Self.entry(1, Self.leaf("/")), EmberStore.replayPrepared(Self.entry(1, Self.leaf("/")))))
        #expect(!ReplayOrder.movable(entries[0], ReplayPrepared(nodes: nil, keys: nil)))
    }

    /// A history through the write path; the same entries replayed as one batch in the order
    /// planned: the writer's rows, and the count of entries it walked in key order.
    @Test func walkedRunsGiveTheWritePathsRows() async throws {
        let a = try openStore()
        defer { a.close() }
        let user = WriteAuth.user(.object(["uid": .string("u1")]))
        var ops: [(String, WriteOperation, WriteAuth)] = [
            // "r": open rules but a `.validate` (a verdict that may read data); "x": an index.
            ("r", .setRules(text: #"{"rules":{".read":true,".write":true,"v":{".validate":"newData.exists()"}}}"#), .admin),
            ("x", .setRules(text: #"{"rules":{".read":true,".write":true,"c":{"$w":{".indexOn":[".value"]}}}}"#), .admin),
            ("g", .setRules(text: #"{"rules":{".read":true,".write":true}}"#), .admin),
            // What the runs find: a leaf above, an inline object above, leaves to overwrite.
            ("w", .set(path: p("/lf"), value: j("5")), .admin),
            ("w", .set(path: p("/io"), value: j(#"{"a":1,"b":"two"}"#)), .admin),
            ("w", .set(path: p("/c/w3/k0008"), value: j("0")), .admin),
            ("w", .set(path: p("/c/w1/k0101"), value: j(#""old""#)), .admin),
            ("w", .set(path: p("/end"), value: .null), .admin),
        ]
        // One run per namespace, each ended by a delete: interleaved parents, ascending keys
        // (the bench's shape), a descending parent, overwrites, a priority leaf, children of
        // the leaf and of the inline object (their log order against their key order).
        for ns in ["w", "r", "x", "g"] {
            for i in 0..<200 {
                ops.append((ns, .set(path: p("/c/w\(i % 5)/k\(String(format: "%04d", i))"), value: j("\(i)")), ns == "g" ? user : .admin))
                if i % 10 == 3 { ops.append((ns, .set(path: p("/d/k\(String(format: "%04d", 999 - i))"), value: j(#""d""#)), .admin)) }
                if i == 50 { ops.append((ns, .set(path: p("/lf/b"), value: j("1")), .admin)) }
                if i == 60 { ops.append((ns, .set(path: p("/lf/a"), value: j("2")), .admin)) }
                if i == 70 { ops.append((ns, .set(path: p("/io/c"), value: j("3")), .admin)) }
                if i == 80 { ops.append((ns, .set(path: p("/io/a"), value: j("9")), .admin)) }
                if i == 90 { ops.append((ns, .set(path: p("/pp/k"), value: j(#"{".value":5,".priority":2}"#)), .admin)) }
                if i == 100 { ops.append((ns, .set(path: p("/v/k"), value: j("1")), ns == "r" ? user : .admin)) }
            }
            ops.append((ns, .set(path: p("/end"), value: .null), .admin))
        }
        // After the runs: the leaf and the object above them replaced, the walked keys overwritten.
        ops.append(("w", .set(path: p("/lf"), value: .null), .admin))
        ops.append(("w", .set(path: p("/io/b"), value: .null), .admin))
        ops.append(("w", .set(path: p("/c/w2"), value: j(#"{"k0002":"again"}"#)), .admin))
        for (ns, op, auth) in ops { _ = try await a.submit(namespace: ns, op, auth: auth, writer: nil) }
        let last = a.appliedIndex
        let entries = try a.encodedEntries(from: 1, through: last, maxCount: 100_000).map { try LogEntry(decoding: $0.bytes) }
        let prepared = entries.map(EmberStore.replayPrepared)
        let plan = ReplayOrder.plan(entries, prepared)
        let runsByNamespace = Dictionary(grouping: plan.runs, by: { entries[$0.lowerBound].namespace })
        #expect(runsByNamespace.keys.sorted() == ["g", "r", "w", "x"], "one run per namespace")
        #expect(plan.runs.allSatisfy { r in r.allSatisfy { entries[$0].namespace == entries[r.lowerBound].namespace } })

        let b = try openStore()
        defer { b.close() }
        let walked = try await b.replayArchived(entries, prepared: prepared, order: plan)
        // "w" (no rules) and "g" (open rules, a user's writes) walk; "r" (a `.validate`) and "x"
        // (a query index) apply in log order.
        #expect(walked == runsByNamespace["w"]![0].count + runsByNamespace["g"]![0].count)
        #expect(ArchiveReplayTests.firstDifference(try ArchiveReplayTests.rows(b), try ArchiveReplayTests.rows(a)) == nil)
        #expect(try b.stateHash() == a.stateHash())
        // The same entries in batches that cut the runs (a batch plans its own).
        let c = try openStore()
        defer { c.close() }
        var walkedInBatches = 0
        for at in stride(from: 0, to: entries.count, by: 97) {
            let part = Array(entries[at..<min(entries.count, at + 97)]), pre = Array(prepared[at..<min(entries.count, at + 97)])
            walkedInBatches += try await c.replayArchived(part, prepared: pre, order: ReplayOrder.plan(part, pre))
        }
        #expect(walkedInBatches > 0)
        #expect(ArchiveReplayTests.firstDifference(try ArchiveReplayTests.rows(c), try ArchiveReplayTests.rows(a)) == nil)
    }

    /// During a walk every parent's write positions the one shared cursor: no per-parent
    /// cursor stays open on `tree` (LMDB fixes each up on every insert); outside it, each
    /// parent has its own, at most `ReplayCursors.maxParents`.
    @Test func aWalkKeepsOneTreeCursor() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.perform { w in
            try w.writeTxn { t in
                let cursors = ReplayCursors(t, w.tables)
                defer { cursors.close() }
                for i in 0..<(ReplayCursors.maxParents + 10) { _ = try cursors.parent(of: EncodedPath("t", p("/c\(i)/k"))) }
                #expect(cursors.openTreeCursors == 10, "past the limit all are closed, then 10 opened again")
                try cursors.beginWalk()
                #expect(cursors.openTreeCursors == 1)
                let x = try cursors.parent(of: EncodedPath("t", p("/c1/k")))
                let y = try cursors.parent(of: EncodedPath("t", p("/new/k")))
                #expect(x.cursor.ptr == y.cursor.ptr && cursors.openTreeCursors == 1)
                cursors.endWalk()
                let z = try cursors.parent(of: EncodedPath("t", p("/c1/k")))
                #expect(z === x && z.cursor.ptr != y.cursor.ptr && cursors.openTreeCursors == 2)
            }
        }
    }
}
