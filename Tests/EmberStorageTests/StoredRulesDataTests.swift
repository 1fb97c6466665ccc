import EmberCore
import EmberRules
import Testing
@testable import EmberStorage

/// The LMDB data source rules read at apply and at the serving node answers every question as
/// the materialised tree does (real LMDB store), including priorities of objects and leaves.
@Test func storedRulesDataAnswersLikeTheTree() async throws {
    let s = try openStore()
    let data = #"{"a": {"b": 1, "c": {".value": "x", ".priority": 2}, ".priority": "pa"}, "e": true, "ab": {"z": false}}"#
    _ = try await s.submit(namespace: "t", .set(path: .root, value: j(data)))
    let paths = ["", "a", "a/b", "a/c", "a/c/d", "ab", "ab/z", "e", "e/x", "q", "a/b/c"].map(p)
    try s.withRulesData(namespace: "t") { src in
        for path in paths {
            let node = try s.get(path.description)
            #expect(src.node(at: path) == node, "\(path)")
            #expect(src.exists(at: path) == !node.isEmpty, "\(path)")
            #expect(src.hasChildren(at: path) == node.hasChildren, "\(path)")
            let sh = src.shallow(at: path)
            #expect(sh.leaf == node.leaf && sh.priority == node.priority, "\(path)")
        }
        // A path longer than any stored key is simply absent.
        let long = try Path((0..<3).map { _ in String(repeating: "k", count: 300) }.joined(separator: "/"))
        #expect(!src.exists(at: long) && !src.hasChildren(at: long) && src.shallow(at: long).leaf == nil)
    }
    // Decisions at apply over a large subtree (behaviour; read counts are in LazyDataTests).
    var big: KeyMap<JSON> = [:]
    for i in 0..<2_000 { big["n\(i)"] = .int(Int64(i)) }
    _ = try await s.submit(namespace: "t", .set(path: p("other"), value: .object(big)))
    _ = try await s.submit(namespace: "t", .setRules(text: #"{"rules": {"w": {".write": "root.child('other').hasChildren(['n1', 'n1999']) && !root.child('other').child('n5').isString()"}, "x": {".write": "root.child('other/n2000').exists()"}}}"#))
    let ok = try await s.submit(namespace: "t", .set(path: p("w"), value: .int(1)), auth: .user(nil))
    #expect(ok.isApplied)
    let denied = try await s.submit(namespace: "t", .set(path: p("x"), value: .int(1)), auth: .user(nil))
    #expect(denied.outcome == .denied)
}
