import EmberTestSupport
import Testing
@testable import EmberCore

/// The streaming reader of `ember import` (`JSONEventReader`), the parts it is cut into
/// (`ImportSplitter`) and the piecewise writer of streamed reads (`JSONStreamWriter`).
@Suite(.printsSeedOnFailure) struct JSONEventReaderTests {
    static func randomJSON(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 3 ? 5 : 8), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: -1_000_000...1_000_000, using: &g))
        case 3: return .double(Double(Int.random(in: -999...999, using: &g)) / 8)
        case 4: return .string(["", "a", "q\"\\/\n\t", "é😀", "\u{1}", String(repeating: "x", count: 300)].randomElement(using: &g)!)
        case 5:
            return .array((0..<Int.random(in: 0...4, using: &g)).map { _ in randomJSON(&g, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...5, using: &g) {
                o[["a", "b", "0", "12", "-x", "key é", "z"].randomElement(using: &g)! + String(Int.random(in: 0..<9, using: &g))] =
                    randomJSON(&g, depth: depth + 1)
            }
            return .object(o)
        }
    }

    @Test func eventsBuildWhatTheParserBuildsInAnySplit() throws {
        var g = TestSeed.generator(0x5EED_0042)
        for _ in 0..<300 {
            let v = Self.randomJSON(&g)
            let pretty = Bool.random(using: &g)
            let bytes = v.serializedBytes(pretty: pretty)
            for split in [1, 2, 3, 7, 64, 1 << 20] {
                let got = try JSONEventReader.parseInPieces(bytes, split: split)
                #expect(got.serializedBytes() == (try JSON.parse(bytes)).serializedBytes())
            }
        }
    }

    @Test func malformedInputFailsAtItsByteOffset() {
        let cases: [(String, Int64)] = [
            (#"{"a":1,}"#, 7), (#"{"a" 1}"#, 5), (#"[1,2"#, 4), (#"{"a":tru}"#, 5), (#"[01]"#, 2),
            (#"{"a":"b\q"}"#, 9), ("[1] 2", 4), ("", 0), ("{\"a\":\"\u{1}\"}", 6), ("[-]", 2), (#"{"a":[}"#, 6),
        ]
        for (text, offset) in cases {
            for split in [1, 3, 100] {
                #expect(throws: JSONEventReader.Failure.self) { try JSONEventReader.parseInPieces(Array(text.utf8), split: split) }
                do {
                    _ = try JSONEventReader.parseInPieces(Array(text.utf8), split: split)
                } catch let f as JSONEventReader.Failure {
                    #expect(f.offset == offset, "\(text) split \(split): \(f)")
                } catch {
                    Issue.record("\(error)")
                }
                #expect((try? JSON.parse(text)) == nil)
            }
        }
        // Depth and string limits.
        var deep = JSONEventReader(maxDepth: 3)
        #expect(throws: JSONEventReader.Failure(offset: 3, reason: "nesting too deep")) { try deep.feed(Array("[[[[1]]]]".utf8)) { _, _ in } }
        var long = JSONEventReader(maxStringBytes: 4)
        #expect(throws: JSONEventReader.Failure(offset: 0, reason: "string longer than 4 bytes")) { try long.feed(Array(#""abcdefg""#.utf8)) { _, _ in } }
    }

    /// Parts written into an empty tree give the document's node, for any part size.
    @Test func partsRebuildTheDocument() throws {
        var g = TestSeed.generator(0x5EED_0043)
        for _ in 0..<200 {
            var v = Self.randomJSON(&g)
            if case .object(var o) = v, Bool.random(using: &g) {  // priorities, also on large objects
                o[".priority"] = .int(7)
                v = .object(o)
            }
            guard case .object = v, let node = try? Node(json: v) else { continue }
            for partBytes: Int64 in [1, 16, 200, 1 << 20] {
                var built = Node.empty
                var count = 0
                var lastEnd: Int64 = 0
                let bytes = v.serializedBytes()
                try ImportSplitter.split(bytes, maxPartBytes: partBytes, targetDepth: 2) { part in
                    count += 1
                    #expect(part.end >= lastEnd)
                    lastEnd = part.end
                    let path = Path(validated: part.path)
                    switch part.kind {
                    case .value(let span):
                        let text = bytes[Int(span.lowerBound)..<Int(span.upperBound)]
                        built = built.setting(try Node(json: try JSON.parse(text)), at: path)
                    case .priority(let p): built = built.setting(built.child(at: path).withPriority(try Priority(json: p)), at: path)
                    }
                }
                #expect(built == node, "part size \(partBytes): \(built.exportJSON().serialized()) vs \(node.exportJSON().serialized())")
                if partBytes >= Int64(bytes.count) { #expect(count == 1) }
            }
        }
    }

    @Test func splitterRefusesBadKeysAndDepthWithOffsets() throws {
        func failure(_ text: String, targetDepth: Int = 0) -> ImportSplitter.Failure? {
            do {
                try ImportSplitter.split(Array(text.utf8), maxPartBytes: 8, targetDepth: targetDepth) { _ in }
                return nil
            } catch let f as ImportSplitter.Failure { return f } catch { return nil }
        }
        #expect(failure(#"{"ok":1,"b/d":2}"#)?.offset == 13)
        #expect(failure(#"{"ok":1,"b.d":2}"#)?.reason.contains("must not contain") == true)
        #expect(failure(#"{"a":{"b":1}}"#, targetDepth: 31) != nil)
        #expect(failure(#"{"a":{"b":1}}"#, targetDepth: 30) == nil)
        #expect(failure(#"{"a":{".value":1,"x":2}}"#) != nil)
    }

    @Test func streamWriterWritesWhatTheSerializerWrites() {
        var g = TestSeed.generator(0x5EED_0044)
        func emit(_ v: JSON, _ w: inout JSONStreamWriter, _ g: inout SplitMix64) {
            switch v {
            case .object(let o) where Bool.random(using: &g):
                w.beginObject()
                for k in o.keys.sorted(by: KeyOrder.less) {
                    w.key(k)
                    emit(o[k]!, &w, &g)
                }
                w.end()
            case .array(let a) where Bool.random(using: &g):
                w.beginArray()
                for e in a { emit(e, &w, &g) }
                w.end()
            default: w.value(v)
            }
        }
        for _ in 0..<300 {
            let v = Self.randomJSON(&g)
            for pretty in [false, true] {
                var w = JSONStreamWriter(pretty: pretty)
                emit(v, &w, &g)
                #expect(w.depth == 0)
                #expect(w.take() == v.serializedBytes(pretty: pretty))
            }
        }
    }
}
