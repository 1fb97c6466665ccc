import EmberCore
import Foundation
import EmberTestSupport
import Testing
@testable import EmberStorage

/// The `updateText` log entry (issue 42): a bulk update's parts as their checked JSON text. It
/// round-trips, its counted size is its encoding's, damaged bytes are refused with an error, and
/// a store applies it to exactly the rows the tree form (`update`) of the same PATCH gives.
@Suite(.printsSeedOnFailure) struct UpdateTextEntryTests {
    /// The text form of a PATCH body at `base`, as the REST front scans it.
    static func text(_ base: String, _ body: String) -> UpdateText {
        UpdateText.scan(body: Array(body.utf8), base: p(base), maxParts: 100_000, maxNodes: 100_000)!.text
    }

    /// A seeded PATCH body: parts under distinct keys, values without server values.
    static func body(_ g: inout SplitMix64, parts: Int) -> String {
        var members: [String] = []
        for i in 0..<parts {
            let value = NodeConvertValues.random(&g)
            let path = Bool.random(using: &g) ? "k\(i)" : "k\(i)/c\(Int.random(in: 0..<9, using: &g))"
            members.append(String(decoding: JSON.string(path).serializedBytes(), as: UTF8.self) + ":" + String(decoding: value.serializedBytes(), as: UTF8.self))
        }
        return "{" + members.joined(separator: Bool.random(using: &g) ? "," : " ,\n ") + "}"
    }

    @Test func roundTripsAndCountsItsSize() throws {
        var g = TestSeed.generator(0x7E47_E417)
        var checked = 0
        for round in 0..<800 {
            let b = Self.body(&g, parts: [1, 2, 9, 140].randomElement(using: &g)!)
            guard let (text, _) = UpdateText.scan(body: Array(b.utf8), base: p("/d"), maxParts: 1_000, maxNodes: 100_000) else { continue }
            checked += 1
            let condition: WriteCondition? = [nil, .ifVersion(UInt64(round)), .ifHash("h"), .ifDataVersion(nil)].randomElement(using: &g)!
            let e = LogEntry(index: UInt64(round + 1), term: 2, namespace: "t", operation: .updateText(path: p("/d"), parts: text, condition: condition),
                             timestamp: Int64(round), auth: [.admin, .user(nil)].randomElement(using: &g)!,
                             writer: Bool.random(using: &g) ? WriterStamp(writer: "w", seq: UInt64(round)) : nil)
            let bytes = e.encoded()
            #expect(e.encodedSize() == bytes.count, "round \(round)")
            let back = try LogEntry(decoding: bytes)
            #expect(back == e, "round \(round)")
            #expect(LogEntry.isUpdateText(bytes) && !LogEntry.isTriggerAdvance(bytes))
            // Decoded as spans of the entry's own bytes (not copied), each the part's text.
            guard case .updateText(_, let decoded, _) = back.operation else { Issue.record("round \(round): \(back.operation)"); continue }
            #expect(decoded.bytes == bytes)
            for i in 0..<text.count {
                #expect(decoded.text(i).elementsEqual(text.text(i)))
                #expect(try decoded.node(i, depth: 2).isIdentical(to: try Node(json: JSON.parse(text.text(i)), depth: 2)))
            }
        }
        #expect(checked > 600)
        // The tree form is not the text form.
        let tree = LogEntry(index: 1, term: 1, namespace: "t", operation: .update(path: p("/d"), values: [(p("a"), .int(1))]), timestamp: 0)
        #expect(!LogEntry.isUpdateText(tree.encoded()))
    }

    /// Cut and changed bytes: an error or an entry, never a crash; parts out of order or nested
    /// and empty texts are refused as corrupt.
    @Test func damagedBytesAreRefused() throws {
        var g = TestSeed.generator(0xBAD_E417)
        let e = LogEntry(index: 9, term: 1, namespace: "t", operation: .updateText(path: p("/d"), parts: Self.text("/d", #"{"a":{"x":1},"b/c":[true,"s"],"e":null}"#)),
                         timestamp: 5)
        let bytes = e.encoded()
        for cut in 0..<bytes.count { #expect(throws: StorageError.self) { try LogEntry(decoding: Array(bytes[..<cut])) } }
        var decodedSome = 0
        for _ in 0..<3_000 {
            var b = bytes
            for _ in 0..<Int.random(in: 1...3, using: &g) { b[Int.random(in: 0..<b.count, using: &g)] = UInt8.random(in: 0...255, using: &g) }
            guard let back = try? LogEntry(decoding: b), case .updateText(let path, let text, _) = back.operation else { continue }
            decodedSome += 1
            // What decodes builds or is refused with an error when applied (`UpdateText.node`).
            for i in 0..<text.count { _ = try? text.node(i, depth: path.count + text.parts[i].path.count) }
        }
        #expect(decodedSome > 0)
        func entry(_ parts: [(Path, String)]) -> [UInt8] {
            var all: [UInt8] = []
            var spans: [(path: Path, range: Range<Int>)] = []
            for (path, t) in parts { spans.append((path, all.count..<all.count + t.utf8.count)); all += Array(t.utf8) }
            return LogEntry(index: 1, term: 1, namespace: "t", operation: .updateText(path: .root, parts: UpdateText(bytes: all, parts: spans)),
                            timestamp: 0).encoded()
        }
        #expect(throws: StorageError.self) { try LogEntry(decoding: entry([(p("b"), "1"), (p("a"), "2")])) }
        #expect(throws: StorageError.self) { try LogEntry(decoding: entry([(p("a"), "1"), (p("a/b"), "2")])) }
        #expect(throws: StorageError.self) { try LogEntry(decoding: entry([(p("a"), "1"), (p("a"), "2")])) }
        #expect(throws: StorageError.self) { try LogEntry(decoding: entry([(p("a"), "")])) }
        #expect((try? LogEntry(decoding: entry([(p("a"), "1"), (p("b"), "{}")]))) != nil)
    }

    /// The same PATCH as text and as a tree: the same results, row for row, on a store with a
    /// log and on one without (a single node's default: the entry only counted).
    @Test func storesTheRowsOfTheTreeForm() async throws {
        var g = TestSeed.generator(0x7E47_A991)
        for retention in [StoreOptions.singleNodeLogRetention, 1_000] {
            var o = smallOptions()
            o.logRetention = retention
            let a = try openStore(tempDir(), o), b = try openStore(tempDir(), o)
            defer { a.close(); b.close() }
            for s in [a, b] { _ = try await s.submit(namespace: "t", .setRules(text: #"{"rules":{".read":true,".write":true,"d":{".indexOn":["n"]}}}"#)) }
            for round in 0..<120 {
                let body = Self.body(&g, parts: [1, 3, 40, 150].randomElement(using: &g)!)
                let base = ["/d", "/d/sub", "/"].randomElement(using: &g)!
                guard let (text, nodes) = UpdateText.scan(body: Array(body.utf8), base: p(base), maxParts: 1_000, maxNodes: 100_000) else { continue }
                let tree = try text.json()
                let ra = try await a.submit(namespace: "t", .update(path: p(base), values: tree))
                let rb = try await b.submit(namespace: "t", .updateText(path: p(base), parts: text), built: Bool.random(using: &g) ? nodes : nil)
                #expect(ra.outcome == rb.outcome && ra.value.isIdentical(to: rb.value) && ra.version == rb.version
                        && ra.changeSet == rb.changeSet, "round \(round)")
            }
            // Every row but the clock's (`lastTimestamp`: the stores' writes ran at different times).
            let clock = "meta " + Array("lastTimestamp".utf8).map { String(format: "%02x", $0) }.joined() + " "
            func rows(_ s: EmberStore) throws -> [String] { try ArchiveReplayTests.rows(s).filter { !$0.hasPrefix(clock) } }
            let difference = ArchiveReplayTests.firstDifference(try rows(b), try rows(a))
            #expect(difference == nil, "\(difference ?? "")")
            #expect(try a.stateHash() == b.stateHash())
        }
    }

    /// A follower's path (entries decoded from their bytes, then applied) gives the rows the
    /// writing store has.
    @Test func aFollowerAppliesTheDecodedEntries() async throws {
        var g = TestSeed.generator(0x7E47_F011)
        var o = smallOptions()
        o.logRetention = 1_000
        let a = try openStore(tempDir(), o), f = try openStore()
        defer { a.close(); f.close() }
        for _ in 0..<40 {
            let text = Self.text("/d", Self.body(&g, parts: [2, 70].randomElement(using: &g)!))
            _ = try await a.submit(namespace: "t", .updateText(path: p("/d"), parts: text))
        }
        let entries = try a.encodedEntries(from: 1, through: a.appliedIndex, maxCount: 1_000).map { try LogEntry(decoding: $0.bytes) }
        try await f.appendAndApply(entries: entries, through: entries.last!.index, validated: true)
        #expect(ArchiveReplayTests.firstDifference(try ArchiveReplayTests.rows(f), try ArchiveReplayTests.rows(a)) == nil)
    }
}

/// Seeded JSON values without server values, for the bodies above.
enum NodeConvertValues {
    static func random(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 9), using: &g) {
        case 0: return Bool.random(using: &g) ? .null : .bool(true)
        case 1: return .int(Int64.random(in: -999...999, using: &g))
        case 2: return .double(Double(Int.random(in: -99...99, using: &g)) / 8)
        case 3: return .string(["", "é😀", "s\"q\\", String(repeating: "x", count: 200)].randomElement(using: &g)!)
        case 4: return .object([".value": .int(Int64.random(in: 0...9, using: &g)), ".priority": .string("p")])
        case 5: return .int(Int64.random(in: 0...3, using: &g))
        case 6: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in random(&g, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for i in 0..<Int.random(in: 0...5, using: &g) { o[["n", "m", "k\(i)", "0", "é"].randomElement(using: &g)!] = random(&g, depth: depth + 1) }
            if Int.random(in: 0..<5, using: &g) == 0 { o[".priority"] = .int(3) }
            return .object(o)
        }
    }
}
