import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// The Swift client keeps keys as bytes and orders them as the server and the JS SDK do
/// (issue 40, item 3): `"\u{E9}"` and `"e\u{301}"` are two children, and emoji (above U+FFFF)
/// sort before U+E000–U+FFFF (UTF-16 code units).
@Suite(.timeLimit(.minutes(1))) struct ExactKeyClientTests {
    static let utf16Order = ["10", "a", "z", "\u{E9}", "\u{D7FF}", "\u{10000}", "\u{1F600}", "\u{E000}", "\u{FF01}", "\u{FFFF}"]

    @Test func bothSpellingsAreChildrenAndTheOrderIsUTF16() async throws {
        let t = try await TestNamespace.make()
        let writer = t.client(), reader = t.client()
        defer { writer.shutdown(); reader.shutdown() }
        let rec = Recorder()
        reader.reference(withPath: "both").observe(.childAdded) { s in rec.add("added \(s.key)") }
        try await writer.reference(withPath: "both").child("\u{E9}").setValue(1)
        try await writer.reference(withPath: "both").child("e\u{301}").setValue(2)
        let seen = await rec.wait { $0.count == 2 }
        #expect(Set(seen.map { Array($0.utf8) }) == Set(["added \u{E9}", "added e\u{301}"].map { Array($0.utf8) }))
        let snap = try await reader.reference(withPath: "both").getData()
        #expect(snap.childrenCount == 2)
        #expect(snap.childSnapshot(forPath: "\u{E9}").value as? Int == 1)
        #expect(snap.childSnapshot(forPath: "e\u{301}").value as? Int == 2)
        // What the server stored, over REST.
        let rest = try await t.server.restGet("both", ns: t.ns)
        #expect(rest == .object(["\u{E9}": .int(1), "e\u{301}": .int(2)]))

        var kids: [String: Any] = [:]
        for k in Self.utf16Order.reversed() { kids[k] = k + "-n" }
        try await writer.reference(withPath: "ord").setValue(kids)
        // Ordered locally by the client, and windowed by the server.
        let all = try await reader.reference(withPath: "ord").queryOrderedByKey().getData()
        #expect(all.children.map(\.key) == Self.utf16Order)
        let first = try await reader.reference(withPath: "ord").queryOrderedByKey().queryLimited(toFirst: 7).getData()
        #expect(first.children.map(\.key) == Array(Self.utf16Order.prefix(7)))
    }
}
