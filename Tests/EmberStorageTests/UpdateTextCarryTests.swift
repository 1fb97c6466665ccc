import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A cluster leader's own text update carries the nodes its front built (`UpdateText.nodes`,
/// issue 42): its apply takes them instead of building them from the text again. They are never
/// encoded, its apply ends in the state a follower's apply of the text gives, and the leader's
/// cache of unapplied entries (`DecodedTail`) weighs them, so they never pass its bound.
@Suite(.printsSeedOnFailure) struct UpdateTextCarryTests {
    static func scan(_ base: String, _ body: String) -> (text: UpdateText, nodes: [Node])? {
        UpdateText.scan(body: Array(body.utf8), base: p(base), maxParts: 100_000, maxNodes: 100_000)
    }

    /// `text` at `base` carrying `nodes`, as an entry at `index`.
    static func entry(_ index: UInt64, _ base: String, _ text: UpdateText, carrying nodes: [Node]?) -> LogEntry {
        let parts = nodes.map { text.carrying($0, base: p(base).count) } ?? text
        return LogEntry(index: index, term: 1, namespace: "t", operation: .updateText(path: p(base), parts: parts), timestamp: 0)
    }

    static func carried(_ e: LogEntry?) -> UpdateText? {
        guard case .updateText(_, let text, _)? = e?.operation, text.nodes != nil else { return nil }
        return text
    }

    @Test func carriedNodesAreTheTextsAndAreNeverEncoded() throws {
        var g = TestSeed.generator(0xCA22_7E47)
        var checked = 0
        for round in 0..<300 {
            let body = UpdateTextEntryTests.body(&g, parts: [1, 3, 40].randomElement(using: &g)!)
            let base = ["/d", "/d/sub", "/"].randomElement(using: &g)!
            guard let (text, nodes) = Self.scan(base, body) else { continue }
            checked += 1
            #expect(text.nodes == nil && text.carriedBytes == 0, "a scan's text carries nothing by itself")
            let e = Self.entry(UInt64(round + 1), base, text, carrying: nodes)
            let carried = try #require(Self.carried(e))
            #expect(carried.carriedBytes > 0 && carried.carriedBytes >= text.nodeCount * UpdateText.carriedBytesPerNode)
            for i in 0..<text.count {
                let depth = p(base).count + text.parts[i].path.count
                #expect(try carried.node(i, depth: depth).isIdentical(to: try text.node(i, depth: depth)), "round \(round) part \(i)")
            }
            // Not in the encoding, nor in equality: the decoded entry is the entry, without them.
            let bytes = e.encoded()
            #expect(bytes == Self.entry(UInt64(round + 1), base, text, carrying: nil).encoded() && e.encodedSize() == bytes.count)
            let back = try LogEntry(decoding: bytes)
            #expect(back == e && Self.carried(back) == nil)
        }
        #expect(checked > 200)
    }

    /// The nodes of a part are taken only at the depth they were built at.
    @Test func carriedNodesAreTakenOnlyAtTheirDepth() throws {
        let (text, nodes) = try #require(Self.scan("/d", #"{"a":1,"b/c":{"x":"y"}}"#))
        let wrong = [Node(.int(2)), nodes[1]]
        let carried = text.carrying(wrong, base: 1)
        #expect(try carried.node(0, depth: 2) == Node(.int(2)))
        #expect(try carried.node(0, depth: 3) == Node(.int(1)), "another depth builds from the text")
    }

    /// The leader's path (its entries appended as it built them, carrying their nodes, applied in
    /// the append's transaction or a later one from its cache) ends in the state, row for row, a
    /// follower's path gives (the same log as bytes, decoded and applied).
    @Test func aLeaderAppliesItsCarriedNodesAsAFollowerAppliesTheText() async throws {
        var g = TestSeed.generator(0xCA22_1EAD)
        var o = smallOptions()
        o.logRetention = 10_000
        let leader = try openStore(tempDir(), o), follower = try openStore(tempDir(), o)
        defer { leader.close(); follower.close() }
        var index: UInt64 = 0
        var carried = 0
        for _ in 0..<50 {
            var batch: [EncodedEntry] = []
            for _ in 0..<Int.random(in: 1...4, using: &g) {
                let body = UpdateTextEntryTests.body(&g, parts: [1, 5, 60].randomElement(using: &g)!)
                let base = ["/d", "/d/sub", "/", "/e"].randomElement(using: &g)!
                guard let (text, nodes) = Self.scan(base, body) else { continue }
                let (encoded, built) = try leader.validatedLogEntry(namespace: "t", operation: .updateText(path: p(base), parts: text),
                                                                   auth: .admin, writer: nil, built: nodes)
                index += 1
                var e = built
                e.index = index; e.term = 1; e.timestamp = Int64(index)
                if Self.carried(e) != nil { carried += 1 }
                batch.append(EncodedEntry(index: index, term: 1,
                                          encoded: try LogEntry.restamped(encoded, index: index, term: 1, timestamp: e.timestamp), decoded: e))
            }
            guard !batch.isEmpty else { continue }
            if Bool.random(using: &g) {
                try await leader.append(encoded: batch)
                _ = try await leader.appendAndApply(encoded: [], through: index)
            } else {
                _ = try await leader.appendAndApply(encoded: batch, through: index)
            }
        }
        #expect(carried == Int(index) && carried > 100, "every entry carried its nodes")
        let entries = try leader.encodedEntries(from: 1, through: leader.appliedIndex, maxCount: 10_000).map { try LogEntry(decoding: $0.bytes) }
        #expect(entries.count == Int(index) && entries.allSatisfy { Self.carried($0) == nil })
        try await follower.appendAndApply(entries: entries, through: index, validated: true)
        let difference = ArchiveReplayTests.firstDifference(try ArchiveReplayTests.rows(follower), try ArchiveReplayTests.rows(leader))
        #expect(difference == nil, "\(difference ?? "")")
        #expect(try leader.stateHash() == follower.stateHash())
    }

    /// The apply takes the nodes the entry carries, from its cache as well as in the append's
    /// transaction: shown by carrying a node the text does not hold (never done outside a test).
    @Test func theApplyTakesTheNodesTheEntryCarries() async throws {
        var o = smallOptions()
        o.logRetention = 1_000
        let s = try openStore(tempDir(), o)
        defer { s.close() }
        let (text, nodes) = try #require(Self.scan("/d", #"{"a":1,"b/c":{"x":"y"}}"#))
        for (i, later) in [(UInt64(1), true), (2, false)] {
            let (encoded, built) = try s.validatedLogEntry(namespace: "t", operation: .updateText(path: p("/d"), parts: text),
                                                          auth: .admin, writer: nil, built: [Node(.int(Int64(10 + i))), nodes[1]])
            var e = built
            e.index = i; e.term = 1
            let raw = [EncodedEntry(index: i, term: 1, encoded: try LogEntry.restamped(encoded, index: i, term: 1, timestamp: 0), decoded: e)]
            if later {
                try await s.append(encoded: raw)
                _ = try await s.appendAndApply(encoded: [], through: i)
            } else {
                _ = try await s.appendAndApply(encoded: raw, through: i)
            }
            #expect(try s.get("/d/a") == Node(.int(Int64(10 + i))) && s.get("/d/b/c/x") == n(#""y""#))
        }
    }

    /// Entries carrying nodes weigh their encoding plus the nodes' footprint: with a bound every
    /// encoding fits but only two entries' nodes do, every entry is kept, the next two to apply
    /// with their nodes and the rest as their text; the carried footprint never passes the bound.
    @Test func theTailWeighsCarriedNodesAndKeepsThemWithinItsBound() throws {
        // Small leaves: their nodes weigh many times their text.
        let body = "{" + (0..<200).map { #""a\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        let (text, nodes) = try #require(Self.scan("/d", body))
        let entries = (1...8).map { Self.entry(UInt64($0), "/d", text, carrying: nodes) }
        let size = entries[0].encodedSize(), footprint = Self.carried(entries[0])!.carriedBytes
        #expect(footprint > 5 * size)
        let bound = 2 * (size + footprint) + 6 * size
        var tail = DecodedTail(maxBytes: bound)
        tail.appended(entries, sizes: Array(repeating: size, count: 8))
        #expect(tail.count == 8, "every encoding fits")
        let kept = (1...8).map { tail.entry(at: UInt64($0)) }
        #expect(kept.map { Self.carried($0) != nil } == [true, true] + Array(repeating: false, count: 6))
        let carriedKept = kept.compactMap { Self.carried($0)?.carriedBytes }.reduce(0, +)
        #expect(carriedKept <= bound && tail.bytes <= bound && tail.bytes == 8 * size + 2 * footprint)
        // Kept without its nodes, an entry is still the entry (its apply builds them from the text).
        #expect(kept.compactMap { $0 } == entries)
        // Applied entries give their weight back.
        tail.applied(through: 8)
        #expect(tail.count == 0 && tail.bytes == 0)
        // A first entry whose nodes alone pass the bound is kept, without them.
        var small = DecodedTail(maxBytes: size + footprint / 2)
        small.appended([entries[0]], sizes: [size])
        #expect(small.count == 1 && Self.carried(small.entry(at: 1)) == nil && small.bytes == size)
    }
}
