import EmberTestSupport
import Foundation
import Testing
@testable import EmberCore

/// `ember import`'s raw path (issue 42): the reader hands out primitives as their checked text
/// and the splitter keeps keys as spans, no `String`/`JSON` per value. Compared with the decoded
/// path it replaced (`DecodedEventReader`, `DecodedImportSplitter`): the same events, the same
/// parts byte for byte (so the same request bodies and the same stored state), the same failures
/// at the same offsets, on seeded export-like documents with nested objects, push IDs,
/// priorities, `.value` forms, unicode (raw and escaped, surrogate pairs) and escaped keys.
@Suite(.printsSeedOnFailure) struct ImportRawPathTests {
    // MARK: - Documents

    static let pushChars = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")

    static func pushID(_ g: inout SplitMix64) -> String {
        String((0..<20).map { _ in pushChars.randomElement(using: &g)! })
    }

    /// A string's JSON text with escapes of every kind and raw UTF-8.
    static func stringText(_ g: inout SplitMix64) -> String {
        let pieces = ["plain", "é", "😀", "中文", #"\u00e9"#, #"\ud83d\ude00"#, #"\n"#, #"\t"#, #"\""#, #"\\"#, #"\/"#,
                      #"\u0000"#, #"\u001f"#, "x", " ", #"\b\f\r"#, #"\uFFFF"#, "ключ"]
        var s = "\""
        for _ in 0..<Int.random(in: 0...6, using: &g) { s += pieces.randomElement(using: &g)! }
        if Int.random(in: 0..<8, using: &g) == 0 { s += String(repeating: "b", count: Int.random(in: 20...400, using: &g)) }
        return s + "\""
    }

    /// A key's JSON text: push IDs, words, unicode raw and escaped (all valid keys).
    static func keyText(_ g: inout SplitMix64) -> String {
        switch Int.random(in: 0..<8, using: &g) {
        case 0, 1: return "\"" + pushID(&g) + "\""
        case 2: return #""k\u00e9y\#(Int.random(in: 0..<99, using: &g))""#
        case 3: return #""\u0041B\#(Int.random(in: 0..<99, using: &g))""#
        case 4: return "\"ключ\(Int.random(in: 0..<99, using: &g))\""
        case 5: return "\"\(Int.random(in: 0..<30, using: &g))\""
        default: return "\"" + ["name", "age", "title", "likes", "body", "tags", "a b", "x😀"].randomElement(using: &g)! + "\""
        }
    }

    static func numberText(_ g: inout SplitMix64) -> String {
        ["0", "-0", "7", "-42", "1234567890123456789", "-9223372036854775808", "12345678901234567890", "3.25", "-0.5",
         "1.5e3", "-2E-2", "6.02e+23", "100000000000000000000000", "0.000001", String(Int.random(in: -99_999...99_999, using: &g))]
            .randomElement(using: &g)!
    }

    /// Random whitespace between tokens (or none).
    static func ws(_ g: inout SplitMix64, _ pretty: Bool) -> String {
        pretty ? [" ", "\n  ", "", "\t", "\r\n"].randomElement(using: &g)! : ""
    }

    static func valueText(_ g: inout SplitMix64, depth: Int, pretty: Bool) -> String {
        switch Int.random(in: 0..<(depth > 4 ? 6 : 10), using: &g) {
        case 0: return "null"
        case 1: return Bool.random(using: &g) ? "true" : "false"
        case 2, 3: return numberText(&g)
        case 4, 5: return stringText(&g)
        case 6:
            let n = Int.random(in: 0...4, using: &g)
            return "[" + (0..<n).map { _ in ws(&g, pretty) + valueText(&g, depth: depth + 1, pretty: pretty) }.joined(separator: ",") + "]"
        case 7:
            // A `.value` form with its priority (export style).
            return "{" + #"".priority":"# + ws(&g, pretty) + (Bool.random(using: &g) ? "\"p\"" : "3") + "," + #"".value":"# + numberText(&g) + "}"
        default: return objectText(&g, depth: depth + 1, pretty: pretty, members: Int.random(in: 0...6, using: &g))
        }
    }

    static func objectText(_ g: inout SplitMix64, depth: Int, pretty: Bool, members: Int) -> String {
        var parts: [String] = []
        var seen = Set<String>()
        for _ in 0..<members {
            let k = keyText(&g)
            // The decoded key decides repetition (the split path keeps a repeated key's last
            // value, the whole document its last too: documented; keep keys distinct here).
            guard let decoded = try? JSON.parse(k).stringValue, seen.insert(decoded).inserted else { continue }
            parts.append(ws(&g, pretty) + k + ws(&g, pretty) + ":" + ws(&g, pretty) + valueText(&g, depth: depth, pretty: pretty))
        }
        if Int.random(in: 0..<4, using: &g) == 0 {
            parts.append(#"".priority":"# + (Bool.random(using: &g) ? stringText(&g) : numberText(&g)))
        }
        return "{" + parts.joined(separator: ",") + ws(&g, pretty) + "}"
    }

    /// An export-like document: `{"meta": …, "users": {<push id>: {…}, …}}`.
    static func exportText(_ g: inout SplitMix64) -> [UInt8] {
        let pretty = Bool.random(using: &g)
        var users: [String] = []
        var seen = Set<String>()
        for _ in 0..<Int.random(in: 1...16, using: &g) {
            let id = pushID(&g)
            guard seen.insert(id).inserted else { continue }
            users.append(ws(&g, pretty) + "\"\(id)\":" + objectText(&g, depth: 2, pretty: pretty, members: Int.random(in: 1...8, using: &g)))
        }
        let text = #"{"meta":{"seed":1,"note":"# + stringText(&g) + #"},"users":{"# + users.joined(separator: ",") + "}" + ws(&g, pretty) + "}"
        return Array(text.utf8)
    }

    // MARK: - Both paths

    /// What a path makes of a document fed in pieces: the parts (text as sent) and the failure.
    struct Outcome: Equatable {
        var parts: [ImportStream.Part] = []
        var failure: JSONEventReader.Failure?
    }

    static func raw(_ bytes: [UInt8], partBytes: Int64, piece: Int, targetDepth: Int) -> Outcome {
        var stream = ImportStream(maxPartBytes: partBytes, targetDepth: targetDepth)
        var out = Outcome()
        do {
            var i = 0
            while i < bytes.count {
                try bytes[i..<min(bytes.count, i + piece)].withContiguousStorageIfAvailable { try stream.feed($0, completed: &out.parts) }!
                i += piece
            }
            try stream.finish(completed: &out.parts)
        } catch let f as JSONEventReader.Failure {
            out.failure = f
        } catch {
            Issue.record("\(error)")
        }
        return out
    }

    static func decoded(_ bytes: [UInt8], partBytes: Int64, piece: Int, targetDepth: Int) -> Outcome {
        var reader = DecodedEventReader()
        var splitter = DecodedImportSplitter(maxPartBytes: partBytes, targetDepth: targetDepth)
        var out = Outcome()
        let take: DecodedEventReader.SpanEmit = { e, start, end in
            try splitter.handle(e, start: start, end: end) { part in
                switch part.kind {
                case .value(let span):
                    out.parts.append(ImportStream.Part(path: part.path, payload: .text(Array(bytes[Int(span.lowerBound)..<Int(span.upperBound)])), end: part.end))
                case .priority(let p):
                    out.parts.append(ImportStream.Part(path: part.path, payload: .priority(p), end: part.end))
                }
            }
        }
        do {
            var i = 0
            while i < bytes.count {
                try bytes[i..<min(bytes.count, i + piece)].withContiguousStorageIfAvailable { try reader.feed($0, spans: take) }!
                i += piece
            }
            try reader.finish(spans: take)
        } catch let f as JSONEventReader.Failure {
            out.failure = f
        } catch {
            Issue.record("\(error)")
        }
        return out
    }

    /// The events of a reader, with their spans, up to its failure.
    static func events(_ bytes: [UInt8], piece: Int, rawPath: Bool) -> (events: [String], failure: JSONEventReader.Failure?) {
        var list: [String] = []
        let note: (JSONEventReader.Event, Int64, Int64) -> Void = { e, s, end in list.append("\(e) \(s)..<\(end)") }
        var newReader = JSONEventReader()
        var oldReader = DecodedEventReader()
        do {
            var i = 0
            while i < bytes.count {
                try bytes[i..<min(bytes.count, i + piece)].withContiguousStorageIfAvailable { b in
                    if rawPath {
                        // Raw events, checked against their span and decoded here.
                        try newReader.feed(b, raw: { e, s, end in
                            switch e {
                            case .key(let t), .value(let t):
                                #expect(Array(t.text).count == Int(end - s))
                                if case .key = e { note(.key(t.string()), s, end) } else { note(.value(try t.json()), s, end) }
                            case .beginObject: note(.beginObject, s, end)
                            case .endObject: note(.endObject, s, end)
                            case .beginArray: note(.beginArray, s, end)
                            case .endArray: note(.endArray, s, end)
                            }
                        })
                    } else {
                        try oldReader.feed(b, spans: note)
                    }
                }!
                i += piece
            }
            if rawPath { try newReader.finish(spans: note) } else { try oldReader.finish(spans: note) }
        } catch let f as JSONEventReader.Failure {
            return (list, f)
        } catch {
            Issue.record("\(error)")
        }
        return (list, nil)
    }

    /// The node the parts make when written into an empty tree (priorities set last), as the
    /// import's requests write them.
    static func rebuild(_ parts: [ImportStream.Part]) throws -> Node {
        try ImportStreamTests.rebuild(parts)
    }

    // MARK: - Tests

    @Test func partsAreByteEqualToTheDecodedPathsAndRebuildTheDocument() throws {
        var g = TestSeed.generator(0x5EED_4201)
        var splitDocs = 0
        for _ in 0..<30 {
            let bytes = Self.exportText(&g)
            let whole = try JSON.parse(bytes)
            let node = try Node(json: whole)
            for partBytes: Int64 in [16, 200, 4096, 1 << 20] {
                for piece in [1, 7, 100, 1 << 20] {
                    let new = Self.raw(bytes, partBytes: partBytes, piece: piece, targetDepth: 1)
                    let old = Self.decoded(bytes, partBytes: partBytes, piece: piece, targetDepth: 1)
                    #expect(new.failure == nil && old.failure == nil, "\(String(decoding: bytes, as: UTF8.self))")
                    #expect(new == old, "part size \(partBytes), piece \(piece)")
                    // The state the parts write is the document's, byte for byte as exported.
                    let built = try Self.rebuild(new.parts)
                    #expect(built.exportJSON().serializedBytes() == node.exportJSON().serializedBytes(), "part size \(partBytes), piece \(piece)")
                    if new.parts.count > 1 { splitDocs += 1 }
                }
            }
        }
        #expect(splitDocs > 50)
    }

    @Test func eventsAndTheirSpansEqualTheDecodedReadersInAnySplit() {
        var g = TestSeed.generator(0x5EED_4202)
        for _ in 0..<30 {
            let bytes = Self.exportText(&g)
            for piece in [1, 2, 5, 64, 1 << 20] {
                let new = Self.events(bytes, piece: piece, rawPath: true)
                let old = Self.events(bytes, piece: piece, rawPath: false)
                #expect(new.failure == nil)
                #expect(new.events == old.events, "piece \(piece)")
            }
        }
    }

    /// Corrupted documents (bytes replaced, inserted, removed, with JSON's significant bytes,
    /// escapes and bad UTF-8 over-represented): both paths stop at the same byte with the same
    /// reason after the same parts, or take the document the same way.
    @Test func corruptedDocumentsFailAtTheSameOffsetAfterTheSameParts() {
        var g = TestSeed.generator(0x5EED_4203)
        let alphabet: [[UInt8]] = [[0x22], [0x5C], [0x5C, 0x75], [0x7B], [0x7D], [0x5B], [0x5D], [0x3A], [0x2C], [0x2E], [0x2F],
                                   [0x30], [0x2D], [0x65], [0x74], [0x6E], [0x00], [0x1F], [0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
                                   [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xFF], [0x20], Array(#"\ud800"#.utf8), Array(#"\udc00x"#.utf8)]
        var failed = 0, taken = 0
        for _ in 0..<300 {
            var bytes = Self.exportText(&g)
            for _ in 0..<Int.random(in: 1...3, using: &g) {
                let at = Int.random(in: 0..<bytes.count, using: &g)
                let ins = alphabet.randomElement(using: &g)!
                switch Int.random(in: 0..<3, using: &g) {
                case 0: bytes.replaceSubrange(at..<min(bytes.count, at + ins.count), with: ins)
                case 1: bytes.insert(contentsOf: ins, at: at)
                default: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...3, using: &g)))
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            let piece = [1, 3, 50, 1 << 20].randomElement(using: &g)!
            let partBytes: Int64 = [8, 300, 1 << 20].randomElement(using: &g)!
            let new = Self.raw(bytes, partBytes: partBytes, piece: piece, targetDepth: 1)
            let old = Self.decoded(bytes, partBytes: partBytes, piece: piece, targetDepth: 1)
            #expect(new == old, "piece \(piece), parts \(partBytes): \(bytes)")
            #expect(Self.events(bytes, piece: piece, rawPath: true) == Self.events(bytes, piece: piece, rawPath: false))
            // The reader takes exactly what the parser takes.
            let readerTook = Self.events(bytes, piece: piece, rawPath: true).failure == nil
            #expect(readerTook == ((try? JSON.parse(bytes)) != nil))
            if new.failure == nil { taken += 1 } else { failed += 1 }
        }
        #expect(failed > 150 && taken > 5, "failed \(failed), taken \(taken)")
    }

    @Test func malformedTokensFailAsTheDecodedPathWithTheirOffsets() {
        let cases: [String] = [
            #"{"a":"b\q"}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00"}"#, #"{"a":"\ud800\u0041"}"#, #"{"a":"\u12"}"#, #"{"a":"\u12G4"}"#,
            "{\"a\":\"x\u{1}\"}", #"{"a":01}"#, #"{"a":1.}"#, #"{"a":-}"#, #"{"a":1e}"#, #"{"a":1e400}"#, #"{"a":-1e999}"#,
            #"{"a":1-2}"#, #"{"a":tru}"#, #"{"a":falsey}"#, #"{"a":nul}"#, #"{"a":truex}"#, #"{"":1}"#, #"{"a/b":1}"#,
            #"{"\u002e":1}"#, #"{"\u002evalue":1,"b":2}"#, #"{"b":{".value":1,"c":2}}"#, #"{"k\u0001":1}"#,
            "{\"" + String(repeating: "k", count: Limits.maxKeyBytes + 1) + "\":1}", #"{"a":{".priority":{}}}"#,
            #"{"a":{".priority":true}}"#, #"{"a":"\u0000ok","b":"é"}"#, #"{"x":12345678901234567890123}"#,
            "{\"a\":\"\u{E9}\"}", #"{"a":1} x"#, #"{"a":"unterminated"#, "{\"a\":\"\\",
        ]
        var failures = 0
        for text in cases {
            var bytes = Array(text.utf8)
            for variant in 0..<2 {
                if variant == 1 {
                    // The same with invalid UTF-8 where a string starts.
                    guard let q = bytes.firstIndex(of: 0x3A) else { continue }
                    bytes.insert(contentsOf: [0x22, 0xC3, 0x28, 0x22, 0x2C, 0x22, 0x7A, 0x22, 0x3A], at: q + 1)
                }
                for piece in [1, 2, 4, 1 << 10] {
                    for partBytes: Int64 in [2, 1 << 20] {
                        let new = Self.raw(bytes, partBytes: partBytes, piece: piece, targetDepth: 0)
                        let old = Self.decoded(bytes, partBytes: partBytes, piece: piece, targetDepth: 0)
                        #expect(new == old, "\(String(decoding: bytes, as: UTF8.self)) piece \(piece) parts \(partBytes): \(String(describing: new.failure)) vs \(String(describing: old.failure))")
                        if new.failure != nil { failures += 1 }
                    }
                }
            }
        }
        #expect(failures > 200)
    }

    @Test func utf8CheckAcceptsWhatStringValidatingAccepts() {
        var g = TestSeed.generator(0x5EED_4204)
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC,
                                    0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFE, 0xFF]
        func agree(_ b: [UInt8]) {
            let expected = String(validating: b, as: UTF8.self) != nil
            let got = b.withUnsafeBufferPointer { UTF8Check.isValid($0) }
            #expect(got == expected, "\(b)")
        }
        // Every sequence of up to two bytes, and every three-byte one from the interesting bytes.
        for a in 0...255 {
            agree([UInt8(a)])
            for b in 0...255 { agree([UInt8(a), UInt8(b)]) }
        }
        for a in interesting { for b in interesting { for c in interesting { agree([a, b, c]) } } }
        for _ in 0..<100_000 {
            agree((0..<Int.random(in: 0...9, using: &g)).map { _ in
                Bool.random(using: &g) ? interesting.randomElement(using: &g)! : UInt8.random(in: 0...255, using: &g)
            })
        }
        // Text of every plane.
        for s in ["", "a", "é", "€", "😀", "\u{10FFFF}", "\u{FFFF}", "\u{D7FF}\u{E000}", "中文ключ😀é"] { agree(Array(s.utf8)) }
    }
}
