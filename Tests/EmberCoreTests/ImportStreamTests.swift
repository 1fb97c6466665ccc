import EmberTestSupport
import Testing
@testable import EmberCore

/// `ember import`'s parts as text (`ImportStream` over `ImportSplitter`): each part is the
/// document's own bytes, checked as the node checks a value, from a window that stays about one
/// part large.
@Suite(.printsSeedOnFailure) struct ImportStreamTests {
    /// Parts of `bytes` fed in pieces of `piece` bytes; checks the window's bound after each.
    static func parts(_ bytes: [UInt8], partBytes: Int64, piece: Int, targetDepth: Int = 0,
                      reserved: String? = nil) throws -> [ImportStream.Part] {
        var stream = ImportStream(maxPartBytes: partBytes, targetDepth: targetDepth, reservedKey: reserved)
        var out: [ImportStream.Part] = []
        var i = 0
        while i < bytes.count {
            try bytes[i..<min(bytes.count, i + piece)].withContiguousStorageIfAvailable { try stream.feed($0, completed: &out) }!
            i += piece
            // A buffered part, the piece and one token (the generated strings are short), and
            // at most as much again not dropped yet.
            #expect(stream.heldBytes <= 2 * (Int(partBytes) + piece + 1024), "held \(stream.heldBytes) of part size \(partBytes), piece \(piece)")
        }
        try stream.finish(completed: &out)
        return out
    }

    /// The node the parts make when written into an empty tree (priorities set last).
    static func rebuild(_ parts: [ImportStream.Part]) throws -> Node {
        var built = Node.empty
        var priorities: [(Path, JSON)] = []
        for p in parts {
            let path = Path(validated: p.path)
            switch p.payload {
            case .text(let text): built = built.setting(try Node(json: try JSON.parse(text)), at: path)
            case .priority(let pr): priorities.append((path, pr))
            }
        }
        for (path, pr) in priorities { built = built.setting(built.child(at: path).withPriority(try Priority(json: pr)), at: path) }
        return built
    }

    /// A value with priorities and `.value` forms (export-like), as JSON.
    static func exportLike(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        let v = JSONEventReaderTests.randomJSON(&g, depth: depth)
        guard case .object(var o) = v else {
            if v.isPrimitive, !v.isNull, Int.random(in: 0..<4, using: &g) == 0 { return .object([".value": v, ".priority": .string("p")]) }
            return v
        }
        for k in o.keys where Bool.random(using: &g) { o[k] = exportLike(&g, depth: depth + 1) }
        if Int.random(in: 0..<3, using: &g) == 0 { o[".priority"] = Bool.random(using: &g) ? .int(Int64.random(in: 0...99, using: &g)) : .string("pr") }
        return .object(o)
    }

    @Test func partsAreTheDocumentsTextInAnySplit() throws {
        var g = TestSeed.generator(0x5EED_0142)
        for _ in 0..<150 {
            let v: JSON = .object(["d": Self.exportLike(&g), "e": Self.exportLike(&g)])
            guard let node = try? Node(json: v) else { continue }
            let bytes = v.serializedBytes(pretty: Bool.random(using: &g))
            for partBytes: Int64 in [1, 16, 200, 1 << 20] {
                for piece in [1, 7, 64, 1 << 20] {
                    let parts = try Self.parts(bytes, partBytes: partBytes, piece: piece, targetDepth: 2)
                    #expect(try Self.rebuild(parts) == node, "part size \(partBytes), piece \(piece)")
                    #expect(zip(parts, parts.dropFirst()).allSatisfy { $0.end <= $1.end })
                    if partBytes >= Int64(bytes.count) { #expect(parts.count == 1) }
                    // A part's text is a value's text: whitespace only inside it, as in the file.
                    for case .text(let t) in parts.map(\.payload) { #expect(t.first != 0x20 && t.last != 0x20 && t.last != 0x0A) }
                }
            }
        }
    }

    /// A value that may break one of the node's rules: keys, `.value` beside members,
    /// priorities, depth.
    static func doubtful(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 6 ? 4 : 10), using: &g) {
        case 0: return .null
        case 1: return .int(Int64.random(in: -9...9, using: &g))
        case 2: return .string(["", "s", String(repeating: "p", count: 800)].randomElement(using: &g)!)
        case 3: return .bool(true)
        case 4: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in doubtful(&g, depth: depth + 1) })
        case 5:
            // A chain deep enough to reach the depth limit with most targets.
            var v: JSON = Bool.random(using: &g) ? .null : .int(1)
            for _ in 0..<Int.random(in: 20...34, using: &g) { v = .object(["c": v]) }
            return v
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                let k = ["a", "b", "z9", ".value", ".priority", "a.b", "$x", "a/b", ".sv", ""].randomElement(using: &g)!
                o[k] = k == ".priority"
                    ? [.int(3), .string("q"), .string(String(repeating: "q", count: 800)), .bool(false), .object([:]), .array([.int(1)]), .null]
                        .randomElement(using: &g)!
                    : doubtful(&g, depth: depth + 1)
            }
            return .object(o)
        }
    }

    /// Unsplit, the splitter takes exactly the documents the node takes (`Node.validate` at the
    /// target's depth); split, never one the node refuses.
    @Test func acceptsWhatTheNodeAccepts() throws {
        var g = TestSeed.generator(0x5EED_0143)
        var accepted = 0, refused = 0
        for _ in 0..<1_500 {
            let v = Self.doubtful(&g)
            let target = Int.random(in: 0...33, using: &g)
            let bytes = v.serializedBytes()
            let node = (try? Node.validate(json: v, depth: target)) != nil && target <= Limits.maxPathDepth
            let whole = (try? Self.parts(bytes, partBytes: 1 << 30, piece: 5, targetDepth: target)) != nil
            #expect(whole == node, "target \(target): \(v.serialized())")
            if whole { accepted += 1 } else { refused += 1 }
            if (try? Self.parts(bytes, partBytes: 8, piece: 3, targetDepth: target)) != nil {
                #expect(node, "split, target \(target): \(v.serialized())")
            }
        }
        // Both sides drawn often enough to mean something.
        #expect(accepted > 200 && refused > 200, "accepted \(accepted), refused \(refused)")
    }

    @Test func malformedDocumentsFailAtTheReadersOffsetAfterTheirCompleteParts() throws {
        let cases: [(String, Int64)] = [
            (#"{"a":{"x":1},"b":{"y":2},"c":[1,2,}"#, 34), (#"{"a":{"x":1},"b":{"y" 2}}"#, 22),
            (#"{"a":1,"b":tru}"#, 11), (#"{"a":"x\q"}"#, 9), (#"{"a":{"x":1}} 3"#, 14),
        ]
        for (text, offset) in cases {
            for piece in [1, 4, 1 << 10] {
                var stream = ImportStream(maxPartBytes: 4, targetDepth: 0)
                var out: [ImportStream.Part] = []
                let bytes = Array(text.utf8)
                do {
                    var i = 0
                    while i < bytes.count {
                        try bytes[i..<min(bytes.count, i + piece)].withContiguousStorageIfAvailable { try stream.feed($0, completed: &out) }!
                        i += piece
                    }
                    try stream.finish(completed: &out)
                    Issue.record("\(text) was taken")
                } catch let f as JSONEventReader.Failure {
                    #expect(f.offset == offset, "\(text) piece \(piece): \(f)")
                }
                // What completed before the error is the document's text up to there.
                for p in out {
                    guard case .text(let t) = p.payload else { continue }
                    #expect(p.end <= offset)
                    #expect((try? JSON.parse(t)) != nil, "\(text): part \(p.path)")
                }
            }
        }
        // The first case's members split out before its error come out (parts of 4 bytes: `c` is still buffered).
        var stream = ImportStream(maxPartBytes: 4, targetDepth: 0)
        var out: [ImportStream.Part] = []
        #expect(throws: JSONEventReader.Failure.self) {
            try Array(#"{"a":{"x":1},"b":{"y":2},"c":[1,2,}"#.utf8).withUnsafeBufferPointer { try stream.feed($0, completed: &out) }
        }
        #expect(out.map(\.path) == [["a", "x"], ["b", "y"]])
        #expect(out.map(\.payload) == [.text(Array("1".utf8)), .text(Array("2".utf8))])
    }

    @Test func theReservedKeyAndBadMembersAreRefusedWithOffsets() throws {
        func failure(_ text: String, partBytes: Int64 = 1 << 20) -> JSONEventReader.Failure? {
            do {
                _ = try Self.parts(Array(text.utf8), partBytes: partBytes, piece: 3, reserved: "__r__")
                return nil
            } catch let f as JSONEventReader.Failure { return f } catch { return nil }
        }
        #expect(failure(#"{"a":1,"__r__":{"x":1}}"#, partBytes: 4)?.reason.contains("reserved") == true)
        #expect(failure(#"{"a":{".value":1,"x":2}}"#)?.offset == 20)  // at the second member's key
        #expect(failure(#"{"a":{"x":2,".value":1}}"#)?.offset == 20)
        #expect(failure(#"{"a":{".priority":{}}}"#)?.reason.contains("priority") == true)
        #expect(failure(#"{"a":{".priority":true}}"#)?.offset == 22)
        #expect(failure(#"{"a":{".priority":1,".value":{"b":2}}}"#) == nil)
        #expect(failure(#"{"a.b":1}"#)?.offset == 6)
    }
}
