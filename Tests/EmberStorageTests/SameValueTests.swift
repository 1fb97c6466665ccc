import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// The apply's identical-write check (`SameValue`, issue 38): a string leaf over a string leaf
/// decided by its bytes, everything else by `Node.isIdentical`, with the same answers.
@Suite struct SameValueTests {
    static func leaf(_ s: String, priority: Priority? = nil) -> Node { Node(.string(s), priority: priority) }

    @Test func stringsAreComparedByTheirBytes() {
        #expect(SameValue.identical(Self.leaf("xxxx12"), Self.leaf("xxxx" + "12")))
        #expect(!SameValue.identical(Self.leaf("xxxx12"), Self.leaf("xxxx13")))
        #expect(!SameValue.identical(Self.leaf("xxxx12"), Self.leaf("xxxx123")))
        #expect(SameValue.identical(Self.leaf(""), Self.leaf("")))
        // Canonically equivalent, different bytes: different values (as `Leaf.==` says).
        #expect(!SameValue.identical(Self.leaf("é"), Self.leaf("e\u{301}")))
        #expect(!SameValue.identical(Self.leaf("a", priority: .number(1)), Self.leaf("a")))
        #expect(SameValue.identical(Self.leaf("a", priority: .string("p")), Self.leaf("a", priority: .string("p"))))
        // A bridged (non-native) string takes the same way.
        let bridged = NSString(string: "ünïcode value") as String
        #expect(SameValue.identical(Self.leaf(bridged), Self.leaf("ünïcode value")))
    }

    /// Seeded pairs of every kind: the same answer as `isIdentical`.
    @Test func agreesWithIsIdentical() {
        var g = SystemRandomNumberGenerator()
        let values = ["\"a\"", "\"b\"", "\"ab\"", "\"é\"", "\"e\u{301}\"", "1", "1.0", "2", "true", "false", "{\"a\":1}",
                      "{\"a\":\"1\"}", "{\".value\":\"a\",\".priority\":1}", "{\".value\":\"a\",\".priority\":2}", "[1,2]", "\"\""]
        let nodes = values.map { n($0) } + [.empty]
        for _ in 0..<500 {
            let a = nodes.randomElement(using: &g)!, b = nodes.randomElement(using: &g)!
            #expect(SameValue.identical(a, b) == a.isIdentical(to: b), "\(a) \(b)")
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
