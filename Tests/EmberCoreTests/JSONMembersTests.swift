import Testing
import EmberTestSupport
@testable import EmberCore

/// `JSONMembers` walks objects member by member; a document rebuilt through it must be the one
/// `JSON.parse` builds, and it must refuse exactly what `JSON.parse` refuses.
@Suite(.printsSeedOnFailure) struct JSONMembersTests {
    /// Rebuilds the document: objects through the walk (every level), other values whole.
    static func rebuilt(_ text: String) -> JSON? {
        var m = JSONMembers(text)
        func walk() throws(EmberError) -> JSON {
            guard try m.enterObject() else { return try m.value() }
            var o: KeyMap<JSON> = [:]
            while let k = try m.nextKey() { o[k] = try walk() }
            return .object(o)
        }
        do {
            let v = try walk()
            try m.finish()
            return v
        } catch { return nil }
    }

    static func document(_ g: inout SplitMix64, depth: Int = 0) -> String {
        let ws = ["", " ", "\n"]
        switch Int.random(in: 0..<(depth > 3 ? 3 : 6), using: &g) {
        case 0: return ["1", "-0.5", "true", "null", #""s""#, #""\u00e9""#].randomElement(using: &g)!
        case 1: return "[" + (0..<Int.random(in: 0..<3, using: &g)).map { _ in document(&g, depth: depth + 1) }.joined(separator: ",") + "]"
        default:
            let members = (0..<Int.random(in: 0..<4, using: &g)).map { _ in
                ws.randomElement(using: &g)! + [#""a""#, #""b""#, #""\u0061""#].randomElement(using: &g)! + ws.randomElement(using: &g)!
                    + ":" + ws.randomElement(using: &g)! + document(&g, depth: depth + 1) + ws.randomElement(using: &g)!
            }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    @Test func rebuildsWhatTheParserBuildsAndRefusesWhatItRefuses() {
        var g = TestSeed.generator(0x0A5E_2026)
        var accepted = 0, refused = 0
        for _ in 0..<10_000 {
            var b = Array(Self.document(&g).utf8)
            if Bool.random(using: &g), !b.isEmpty {  // one random edit
                let at = Int.random(in: 0..<b.count, using: &g)
                if Bool.random(using: &g) { b.remove(at: at) } else { b.insert(Array("{}[]\",:".utf8).randomElement(using: &g)!, at: at) }
            }
            let text = String(decoding: b, as: UTF8.self)
            let want = try? JSON.parse(text)
            #expect(Self.rebuilt(text) == want, "\(text)")
            if want == nil { refused += 1 } else { accepted += 1 }
        }
        #expect(accepted > 1_000 && refused > 1_000, "accepted \(accepted), refused \(refused)")
    }

    @Test func depthLimitCountsTheWalkedObjects() {
        let text = String(repeating: #"{"a":"#, count: 4) + "1" + String(repeating: "}", count: 4)
        var m = JSONMembers(text, maxDepth: 3)
        #expect(throws: EmberError.self) {
            while try m.enterObject() { _ = try m.nextKey() }
        }
        #expect(Self.rebuilt(text) != nil)
        #expect((try? JSON.parse(text, maxDepth: 3)) == nil)
    }
}
