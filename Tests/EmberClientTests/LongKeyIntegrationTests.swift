import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// Firebase's key limits over the wire protocol against a real emberd: 768-byte keys and a
/// 32-level path of long keys (its messages exceed one 16,384-character frame), written and
/// listened to by the Swift client over WebSocket, read back over REST, in Firebase key order.
@Suite(.timeLimit(.minutes(1))) struct LongKeyIntegrationTests {
    static let k768 = String(repeating: "k", count: 768)
    static let shared = String(repeating: "m", count: 500)

    static func tag(_ key: String) -> String {
        switch key {
        case k768: return "K768"
        case shared + "a": return "Sa"
        case shared + "b": return "Sb"
        default: return key.count > 20 ? "long\(key.utf8.count)" : key
        }
    }

    @Test func longKeysOverTheWireKeepFirebaseOrder() async throws {
        let t = try await TestNamespace.make()
        let writer = t.client(), reader = t.client()
        defer { writer.shutdown(); reader.shutdown() }
        let rec = Recorder()
        reader.reference().child("long").queryOrderedByKey().queryLimited(toLast: 3).observe(.value) { s in
            rec.add("value " + s.children.map { Self.tag($0.key) }.joined(separator: ","))
        }
        reader.reference().child("long").observe(.childAdded) { s in rec.add("added \(Self.tag(s.key)) \(s.value ?? "")") }
        await rec.wait { $0.contains("value ") }
        try await writer.reference().child("long").setValue([Self.k768: 1, Self.shared + "b": 2, Self.shared + "a": 3, "z": 4, "a": 5])
        let seen = await rec.wait { $0.contains("value Sa,Sb,z") && $0.filter { $0.hasPrefix("added") }.count == 5 }
        #expect(seen.filter { $0.hasPrefix("added") } == ["added a 5", "added K768 1", "added Sa 3", "added Sb 2", "added z 4"])
        // A second 768-byte key lands in order among them; REST sees the same data.
        let other = String(repeating: "k", count: 767) + "l"
        try await writer.reference().child("long").child(other).setValue(6)
        await rec.wait { $0.contains("added long768 6") }
        let rest = try await t.server.restGet("long/\(Self.k768)", ns: t.ns)
        #expect(rest == .int(1))
        let snap = try await reader.reference().child("long").queryOrderedByKey().queryLimited(toFirst: 3).getData()
        #expect(snap.children.map { Self.tag($0.key) } == ["a", "K768", "long768"])
    }

    @Test func thirtyTwoLevelsOfLongKeysOverTheWire() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let segs = (0..<32).map { i in String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: 760) + "\(i)" }
        let parent = db.reference().child(segs.prefix(31).joined(separator: "/"))
        let rec = Recorder()
        parent.observe(.childAdded) { s in rec.add("added \(Self.tag(s.key)) \(s.value ?? "")") }
        try await parent.child(segs[31]).setValue("deep")
        try await parent.child("short").setValue(true)
        let seen = await rec.wait { $0.count == 2 }
        #expect(seen == ["added long762 deep", "added short true"])
        #expect(try await db.reference().child(segs.joined(separator: "/")).getData().value as? String == "deep")
        let rest = try await t.server.restGet(segs.joined(separator: "/"), ns: t.ns)
        #expect(rest == .string("deep"))
        try await db.reference().child(segs[0]).removeValue()
        #expect(try await db.reference().getData().exists() == false)
    }
}
