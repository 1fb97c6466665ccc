import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// The store's side of a bulk import (issue 42): a multi-path update of whole children in key
/// order. A submitted write's nodes are built once, before it is logged, and its small objects
/// are encoded straight from them (`InlineObject.record(for:)`); a replica builds the same nodes
/// from the logged entry when it applies it. Both must leave the same bytes in every table.
@Suite(.printsSeedOnFailure) struct ImportWritePathTests {
    static let pushChars = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")

    /// A seeded Firebase-export-like document's children: push-ID keys, nested objects (posts,
    /// tags), small objects of leaves, priorities on objects and on leaves, ints, doubles, bools,
    /// and integer-like keys (which sort before the others).
    static func users(_ seed: UInt64, count: Int) -> [(String, JSON)] {
        var g = TestSeed.generator(seed)
        func pushID() -> String { String((0..<20).map { _ in pushChars.randomElement(using: &g)! }) }
        func user(_ n: Int) -> JSON {
            var o: KeyMap<JSON> = ["name": .string("user\(n)"), "age": .int(Int64.random(in: 13...99, using: &g))]
            if Bool.random(using: &g) { o["active"] = .bool(Bool.random(using: &g)) }
            if Int.random(in: 0..<5, using: &g) > 0 {
                var tags: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...4, using: &g) { tags["tag\(Int.random(in: 0..<50, using: &g))"] = .bool(true) }
                o["tags"] = .object(tags)
            }
            var posts: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                var post: KeyMap<JSON> = ["title": .string(String(repeating: "t", count: Int.random(in: 1...40, using: &g))),
                                          "likes": .int(Int64.random(in: 0...10_000, using: &g)),
                                          "body": .string(String(repeating: "b", count: Int.random(in: 0...300, using: &g)))]
                switch Int.random(in: 0..<4, using: &g) {
                case 0: post[".priority"] = .int(Int64.random(in: 1...100, using: &g))
                case 1: post["score"] = .object([".value": .double(Double(Int.random(in: -9...9, using: &g)) / 4), ".priority": .string("s")])
                default: break
                }
                posts[pushID()] = .object(post)
            }
            if !posts.isEmpty { o["posts"] = .object(posts) }
            // Integer-like keys and a small all-leaf object (inlined) beside a deep one.
            if Int.random(in: 0..<3, using: &g) == 0 {
                o["slots"] = .object(["1": .int(1), "10": .string("ten"), "2": .null, "a": .double(0.5)])
            }
            if Int.random(in: 0..<5, using: &g) == 0 { o[".priority"] = .string("p\(n)") }
            return .object(o)
        }
        let keys = (0..<count).map { _ in pushID() }.sorted { KeyOrder.less($0, $1) }
        return keys.enumerated().map { ($1, user($0)) }
    }

    /// Every tree, version and index record, byte for byte.
    static func tables(_ s: EmberStore) throws -> [[([UInt8], [UInt8])]] {
        try s.withRead { t in
            try [s.tables.treeS, s.tables.verS, s.tables.idxS].map { table in
                var rows: [([UInt8], [UInt8])] = []
                try t.scan(table, prefix: []) { k, v in rows.append((k, v)); return true }
                return rows
            }
        }
    }

    @Test func aSubmittedBulkUpdateStoresWhatAReplicaApplyingItsEntryStores() async throws {
        let seed = TestSeed.value(0x1_5E_42)
        let leader = try openStore()
        let replica = try openStore()
        for s in [leader, replica] {
            try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/data/users", indexes: ["age"])])
        }
        try await leader.set("/data/meta", #"{"generator": "test", "seed": 1}"#)
        let all = Self.users(seed, count: 300)
        // Chunks of the import's shape: whole children under one parent, in key order, the
        // first ones large enough to take the bulk path (`Applier.bulkParts`), the last small;
        // one chunk with a server value (its nodes are built at apply time on both stores).
        var at = 0
        for size in [150, 100, 49, 1] {
            var parts = try all[at..<(at + size)].map { (try Path("users/\($0.0)"), $0.1) }
            if size == 49 { parts.append((try Path("stamp"), .object([".sv": .string("timestamp")]))) }
            at += size
            _ = try await leader.submit(namespace: "t", .update(path: p("/data"), values: parts, condition: nil))
        }
        // Overwrites: children replaced by others (old records and index rows go).
        let again = Self.users(seed &+ 1, count: 80).enumerated().map { (try! Path("users/\(all[$0.offset * 3].0)"), $0.element.1) }
        _ = try await leader.submit(namespace: "t", .update(path: p("/data"), values: again, condition: nil))

        _ = try await replica.appendAndApply(entries: try leader.entries(from: 1), through: leader.lastLogIndex)
        #expect(replica.appliedIndex == leader.appliedIndex)
        let a = try Self.tables(leader), b = try Self.tables(replica)
        for (name, (x, y)) in zip(["tree", "versions", "index"], zip(a, b)) {
            #expect(x.count == y.count, "\(name) rows")
            #expect(x.elementsEqual(y) { $0.0 == $1.0 && $0.1 == $1.1 }, "\(name) bytes")
        }
        #expect(a[0].contains { $0.1.first == InlineObject.tag }, "some objects are inline")
        #expect(!a[2].isEmpty, "index rows were written")
        // And the data is the document's.
        let users = try leader.get("/data/users")
        #expect(users.childCount == 300)
        let overwritten = Set(again.map { $0.0.segments[1] })
        for (k, v) in all where !overwritten.contains(k) {
            #expect(users.child(k).isIdentical(to: try Node(json: v, depth: 3)), "\(k)")
        }
        for (path, v) in again { #expect(users.child(path.segments[1]).isIdentical(to: try Node(json: v, depth: 3))) }
        #expect(try leader.get("/data/stamp").leaf != nil)
    }

    /// The record `record(for:)` encodes straight from a node is the one the `InlineObject` of
    /// its children (in their segments' byte order) encodes, and nil exactly when that does not
    /// qualify.
    @Test func inlineRecordsAreTheEncodingOfTheirObject() throws {
        var g = TestSeed.generator(TestSeed.value(0x1_0B_1E))
        func leaf() -> Node {
            let l: Leaf = switch Int.random(in: 0..<5, using: &g) {
            case 0: .int(Int64.random(in: .min ... .max, using: &g))
            case 1: .double(Double(Int.random(in: -99...99, using: &g)) / 8)
            case 2: .bool(Bool.random(using: &g))
            default: .string(String(repeating: "s", count: Int.random(in: 0...120, using: &g)))
            }
            let p: Priority? = switch Int.random(in: 0..<4, using: &g) {
            case 0: .number(Double(Int.random(in: 0...9, using: &g)))
            case 1: .string("pr")
            default: nil
            }
            return Node(l, priority: p)
        }
        var inline = 0, refused = 0
        for _ in 0..<2_000 {
            var kids: KeyMap<Node> = [:]
            for _ in 0..<Int.random(in: 1...18, using: &g) {
                kids[randomKey(&g)] = Int.random(in: 0..<30, using: &g) == 0 ? Node(children: ["x": Node(.int(1))]) : leaf()
            }
            let node = Node(children: kids, priority: Bool.random(using: &g) ? .string("op") : nil)
            let key = [UInt8](repeating: 0x61, count: Int.random(in: 1...(SplitTable.inlineBytes - 2), using: &g))
            let version = UInt64.random(in: 1...UInt64(1) << 40, using: &g)
            // The reference: the object of its leaf children in their segments' order.
            let sorted = node.children.map { (KeyCodec.segment($0.key), $0.key, $0.value) }.sorted { bytesLess($0.0, $1.0) }
            var expected: [UInt8]?
            if node.childCount <= InlineObject.maxChildren, sorted.allSatisfy({ $0.2.isLeaf && key.count + $0.0.count <= SplitTable.inlineBytes }) {
                let o = InlineObject(version: version, priority: node.priority,
                                     children: sorted.map { InlineObject.Child(key: $0.1, leaf: $0.2.leaf!, priority: $0.2.priority) })
                expected = o.encoded.count <= InlineObject.maxEncodedBytes ? o.encoded : nil
            }
            let record = InlineObject.record(for: node, key: key, version: version)
            #expect(record == expected)
            if let record {
                inline += 1
                #expect(try InlineObject.decode(record).node.isIdentical(to: node))
            } else {
                refused += 1
            }
        }
        #expect(inline > 100 && refused > 100)
    }

    /// A value that holds a server value where building it fails first (a `.priority`) is still
    /// resolved, and a value without one is refused with the error it had before.
    @Test func serverValuesAndBadValuesAsBefore() async throws {
        let s = try openStore()
        let r = try await s.submit(namespace: "t", .update(path: p("/d"), values: [
            (p("a"), j(#"{"x": 1, ".priority": {".sv": "timestamp"}}"#)),
            (p("b"), j(#"{"y": 2}"#)),
        ], condition: nil))
        guard case .applied = r.outcome else { Issue.record("not applied: \(r.outcome)"); return }
        guard case .number(let stamp)? = try s.get("/d/a").priority else { Issue.record("no timestamp priority"); return }
        #expect(stamp > 1_600_000_000_000)
        #expect(try s.get("/d/b") == n(#"{"y": 2}"#))
        for bad in [#"{"a.b": 1}"#, #"{"x": {"y": [1, {"$z": 2}]}}"#, #"{"x": 1, ".priority": [1]}"#] {
            await #expect(throws: StorageError.self) {
                _ = try await s.submit(namespace: "t", .update(path: p("/e"), values: [(p("ok"), j("1")), (p("bad"), j(bad))], condition: nil))
            }
            #expect(try s.get("/e") == .empty, "\(bad): nothing written")
        }
    }
}
