import EmberCore
import EmberStorage
import EmberTestSupport
import Foundation
import Synchronization
import Testing

@testable import EmberNodeStore

/// A text update applied from its text builds no node (issue 42, `Applier.writeText`): a
/// listener on its namespace still gets its changes, and a writer its answer, built from the
/// text when the feed or the answer reads them: the same as those of the nodes.
@Suite struct TextPatchFeedTests {
    static func openStore(textRecords: Bool) throws -> EmberStore {
        let dir = TestDirectory.root + "ember-textfeed-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var options = StoreOptions()
        options.mapSize = 1 << 30
        options.textRecords = textRecords
        return try EmberStore(directory: dir, options: options)
    }

    /// What a change says, comparable.
    static func described(_ c: CommittedChange) -> String {
        switch c.kind {
        case .set(let n): return "\(c.index) \(c.namespace) \(c.path) set \(n.toJSON().serialized())"
        case .merge(let parts): return "\(c.index) \(c.namespace) \(c.path) merge " + parts.map { "\($0.0)=\($0.1.toJSON().serialized())" }.joined(separator: ",")
        }
    }

    @Test func aListenerGetsTheChangesOfATextUpdate() async throws {
        let bulk = "{" + (0..<80).map { #""u\#($0)":{"name":"n\#($0)","posts":{"p":{"t":"x","n":\#($0)}},".priority":\#($0)}"# }
            .joined(separator: ",") + #","gone":null}"#
        let updates = [
            bulk,
            // Over data (a change and an equal value: no change) beside a part over nothing.
            #"{"u1/name":"again","u2":{"name":"n2","posts":{"p":{"t":"x","n":2}},".priority":2},"new":{"a":[1,2]}}"#,
        ]
        var seen: [[String]] = []
        var answers: [[Node]] = []
        for textRecords in [true, false] {
            let s = try Self.openStore(textRecords: textRecords)
            defer { s.close() }
            let changes = Mutex<[CommittedChange]>([])
            LMDBCommitFeed(store: s).onCommit(watched: { ["t"] }) { c in changes.withLock { $0 += c } }
            var values: [Node] = []
            for (k, body) in updates.enumerated() {
                let (text, _) = try #require(UpdateText.scan(body: Array(body.utf8), base: try Path("/users"), maxParts: 1_000,
                                                             maxNodes: 100_000, buildNodes: false))
                let e = EmberStorage.LogEntry(index: UInt64(k + 1), term: 1, namespace: "t",
                                              operation: .updateText(path: try Path("/users"), parts: text, condition: nil), timestamp: 0)
                let r = try await s.apply(entries: [e])[0]
                #expect((r.textPatch != nil) == textRecords, "update \(k): from its text")
                values.append(try LMDBTranslation.outcome(of: r).value)
            }
            // The feed's handler runs on the commit path, before `apply` returns.
            seen.append(changes.withLock { $0 }.map(Self.described))
            answers.append(values)
        }
        #expect(seen[0].count == 2)
        #expect(seen[0] == seen[1])
        #expect(zip(answers[0], answers[1]).allSatisfy { $0.isIdentical(to: $1) })
        #expect(answers[0][0].children.count == 80)
    }
}
