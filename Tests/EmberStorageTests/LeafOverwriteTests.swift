import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A leaf stored in its own record and replaced by another record at its key (a leaf or a small
/// object) is overwritten in place, without a delete first (`Applier.write`, `readNodeRecord`);
/// every other replacement still removes the old records. Each case reads back the node, its
/// records and its version, so a record left behind or put beside an inline object shows.
@Suite struct LeafOverwriteTests {
    /// Every tree record under namespace "t" as (path, tag).
    static func records(_ s: EmberStore) throws -> [(String, UInt8)] {
        try s.withRead { t in
            var out: [(String, UInt8)] = []
            let base = KeyCodec.namespacePrefix("t")
            try t.scan(s.tables.treeS, prefix: base) { k, v in
                var i = base.count
                var segs: [String] = []
                while i < k.count, let seg = KeyCodec.readSegment(k, &i) { segs.append(seg) }
                out.append(("/" + segs.joined(separator: "/"), v.first ?? 0))
                return true
            }
            return out
        }
    }

    @Test func leafRecordsReplacedInPlaceOrRemoved() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.set("/a", "1")                                            // 1
        try await s.set("/a", #"{".value": 2, ".priority": 5}"#)              // 2: leaf → leaf with priority
        #expect(try s.get("/a") == n(#"{".value": 2, ".priority": 5}"#) && s.ver("/a") == 2)
        try await s.set("/a", #""three""#)                                    // 3: priority dropped
        #expect(try s.get("/a") == n(#""three""#) && s.get("/a").priority == nil)
        try await s.set("/a", #"{"x": 1, "y": true}"#)                        // 4: leaf → small object (inline)
        #expect(try s.get("/a") == n(#"{"x": 1, "y": true}"#) && s.ver("/a") == 4 && s.ver("/a/x") == 4)
        #expect(try Self.records(s).filter { $0.0.hasPrefix("/a") }.map(\.0) == ["/a"])
        #expect(try Self.records(s).first { $0.0 == "/a" }?.1 == InlineObject.tag)

        // Leaf → an object too large to be inline: its records lie below, the leaf's record goes.
        try await s.set("/b", "1")                                            // 5
        let big = "{" + (0..<40).map { #""k\#($0)": "\#(String(repeating: "v", count: 40))""# }.joined(separator: ",") + "}"
        try await s.set("/b", big)                                            // 6
        #expect(try s.get("/b") == n(big) && s.get("/b/k7") == n(#""\#(String(repeating: "v", count: 40))""#))
        #expect(try !Self.records(s).contains { $0.0 == "/b" && $0.1 != InlineObject.tag && $0.1 != 2 })
        // … and back to a leaf: the records below go, one leaf record stays.
        try await s.set("/b", "7")                                            // 7
        #expect(try s.get("/b") == n("7") && Self.records(s).filter { $0.0.hasPrefix("/b") }.map(\.0) == ["/b"])

        // A leaf deleted, a leaf under a former leaf.
        try await s.set("/c", "1")                                            // 8
        try await s.set("/c", "null")                                         // 9
        #expect(try s.get("/c") == .empty && !Self.records(s).contains { $0.0 == "/c" })
        try await s.set("/d", "1")                                            // 10
        try await s.set("/d/e", "2")                                          // 11: /d becomes an object
        #expect(try s.get("/d") == n(#"{"e": 2}"#) && s.ver("/d") == 11)

        // A leaf that is a child of an inline object has no record of its own: the object is
        // stored per leaf first, then the leaf is written.
        try await s.set("/o", #"{"p": 1, "q": 2}"#)                           // 12
        try await s.set("/o/p", "10")                                         // 13
        #expect(try s.get("/o") == n(#"{"p": 10, "q": 2}"#))
        #expect(try !Self.records(s).contains { $0.0 == "/o" && $0.1 == InlineObject.tag })
        #expect(try s.ver("/o/p") == 13 && s.ver("/o/q") == 12 && s.ver("/o") == 13)

        // Leaves in a multi-path update, one of them a leaf record, one a child of an inline object.
        try await s.set("/u", #"{"m": {"n": 1, "o": 2}, "l": 3}"#)            // 14
        try await s.set("/u/l", "4")                                          // 15
        try await s.update("/u", [("l", "5"), ("m/n", "6"), ("z", #"{"w": 1}"#)]) // 16
        #expect(try s.get("/u") == n(#"{"m": {"n": 6, "o": 2}, "l": 5, "z": {"w": 1}}"#))
        #expect(try s.ver("/u/l") == 16 && s.ver("/u/m/o") == 14 && s.ver("/u/m") == 16)

        // A leaf at a long key (overflow table) overwritten, then replaced by a small object.
        let long = "/long/" + String(repeating: "k", count: 600)
        try await s.set(long, "1")                                            // 17
        try await s.set(long, "2")                                            // 18
        #expect(try s.get(long) == n("2") && s.ver(long) == 18)
        try await s.set(long, #"{"a": 1}"#)                                   // 19
        #expect(try s.get(long) == n(#"{"a": 1}"#) && s.get("/long").children.count == 1)

        // The same state after a reopen, as a whole.
        let before = try s.get("/")
        let dir = s.directory
        s.close()
        let again = try openStore(dir)
        defer { again.close() }
        #expect(try again.get("/") == before)
    }
}
