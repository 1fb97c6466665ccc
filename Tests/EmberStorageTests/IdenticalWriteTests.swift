import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// The apply's identical-write check (`Node.isIdentical`, issue 38): a string leaf over a string
/// leaf decided by its bytes (`Leaf ==` through `String.isExactly`), with exact leaf types and
/// priorities.
@Suite struct IdenticalWriteTests {
    static func leaf(_ s: String, priority: Priority? = nil) -> Node { Node(.string(s), priority: priority) }

    static func identical(_ a: Node, _ b: Node) -> Bool { a.isIdentical(to: b) }

    @Test func stringsAreComparedByTheirBytes() {
        #expect(Self.identical(Self.leaf("xxxx12"), Self.leaf("xxxx" + "12")))
        #expect(!Self.identical(Self.leaf("xxxx12"), Self.leaf("xxxx13")))
        #expect(!Self.identical(Self.leaf("xxxx12"), Self.leaf("xxxx123")))
        #expect(Self.identical(Self.leaf(""), Self.leaf("")))
        // Canonically equivalent, different bytes: different values (as `Leaf.==` says).
        #expect(!Self.identical(Self.leaf("é"), Self.leaf("e\u{301}")))
        #expect(!Self.identical(Self.leaf("a", priority: .number(1)), Self.leaf("a")))
        #expect(Self.identical(Self.leaf("a", priority: .string("p")), Self.leaf("a", priority: .string("p"))))
        // A bridged (non-native) string takes the same way.
        let bridged = NSString(string: "ünïcode value") as String
        #expect(Self.identical(Self.leaf(bridged), Self.leaf("ünïcode value")))
    }

    /// Every pair of these values, each parsed on its own: identical only to itself (an int and
    /// an equal double, two priorities, canonically equivalent strings all differ).
    @Test func eachValueIsIdenticalOnlyToItself() {
        let values = ["\"a\"", "\"b\"", "\"ab\"", "\"é\"", "\"e\u{301}\"", "1", "1.0", "2", "true", "false", "{\"a\":1}",
                      "{\"a\":\"1\"}", "{\".value\":\"a\",\".priority\":1}", "{\".value\":\"a\",\".priority\":2}", "[1,2]", "\"\""]
        let left = values.map { n($0) } + [.empty], right = values.map { n($0) } + [.empty]
        for (i, a) in left.enumerated() {
            for (k, b) in right.enumerated() { #expect(a.isIdentical(to: b) == (i == k), "\(a) \(b)") }
        }
    }

    /// Random strings (and byte-for-byte copies of them): `Leaf ==` is their UTF-8 bytes' equality.
    @Test func stringLeavesAreEqualExactlyWhenTheirBytesAre() {
        var g = SystemRandomNumberGenerator()
        let pieces = ["a", "b", "é", "e\u{301}", "日", "🔥", "\u{0}", "xxxx"]
        for _ in 0..<500 {
            let a = (0..<Int.random(in: 0...4, using: &g)).map { _ in pieces.randomElement(using: &g)! }.joined()
            let b = Bool.random(using: &g) ? String(decoding: Array(a.utf8), as: UTF8.self)
                : (0..<Int.random(in: 0...4, using: &g)).map { _ in pieces.randomElement(using: &g)! }.joined()
            #expect((Leaf.string(a) == Leaf.string(b)) == (Array(a.utf8) == Array(b.utf8)), "\(a) \(b)")
        }
    }

    /// Through the apply: an identical string is no change (no version raised), another one of
    /// the same length is written.
    @Test func anIdenticalStringIsNoChange() async throws {
        let s = try openStore()
        let e = { (i: UInt64, v: String) in
            LogEntry(index: i, term: 1, namespace: "t", operation: .set(path: p("/w/k1"), value: j("\"\(v)\""), condition: nil),
                     timestamp: Int64(i))
        }
        let r = try await s.applyUnlogged(entries: [e(1, "xxx001"), e(2, "xxx001"), e(3, "xxx002")])
        #expect(r.map(\.outcome) == [.applied(changed: true), .applied(changed: false), .applied(changed: true)])
        #expect(try s.get("/w/k1") == n("\"xxx002\""))
        #expect(try s.ver("/w/k1") == 3)
    }
}
