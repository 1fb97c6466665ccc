import EmberCore
import EmberTestSupport
import Testing
@testable import EmberProtocol

/// The REST front's text scan of a PATCH body (`UpdateText.scan`) takes a body only where the
/// tree path (`JSON.parse`, `WriteValidation.updateParts`, `Node(json:)` as the store builds)
/// takes it, with the same parts in the same order and the same nodes; everything else it hands
/// to the tree path, so refusals are answered as before.
@Suite(.printsSeedOnFailure) struct UpdateTextScanTests {
    static let validation = WriteValidation(maxWriteNodes: 40, maxUpdateParts: 12)

    static func member(_ g: inout SplitMix64, _ i: Int) -> String {
        let path = ["k\(i)", "k\(i)/c", "a", "a/b", "b/c/d", "", "/", "x.y", "k\(i)/$z", "é/\(i)", "0", "k\(i)//q"].randomElement(using: &g)!
        let value = [#"1"#, #"null"#, #""s""#, #"{"n":1,"m":[1,2,{"z":null}]}"#, #"{".sv":"timestamp"}"#, #"{"a":{".sv":{"increment":1}}}"#,
                     #"{".value":3,".priority":"p"}"#, #"{"bad.key":1}"#, #"[]"#, #"{}"#, #"{"e":null}"#, #"1e999"#, #"[1,"#,
                     "[" + Array(repeating: "1", count: 45).joined(separator: ",") + "]", #"{".priority":{}}"#, #"2.5"#, #"-0"#,
                     String(repeating: "{\"d\":", count: 31) + "1" + String(repeating: "}", count: 31),
                     // A member written twice, null once: what the object is depends on which came last.
                     #"{"e":1,"e":null}"#, #"{"e":null,"e":1}"#, #"{"e":{"f":null},"g":[null]}"#, #"{"e":[null,{}],"h":2}"#,
                     #"{".value":{"e":null},".priority":1}"#].randomElement(using: &g)!
        return String(decoding: JSON.string(path).serializedBytes(), as: UTF8.self) + ":" + value
    }

    /// The tree path's parts and nodes, or nil where it refuses.
    static func tree(_ body: [UInt8], base: Path) -> [(Path, Node)]? {
        guard let json = try? JSON.parse(body), case .object(let o) = json,
              let parts = try? validation.updateParts(base: base, o) else { return nil }
        var out: [(Path, Node)] = []
        for (rel, v) in parts {
            guard let node = try? Node(json: v, depth: base.count + rel.count) else { return nil }
            out.append((rel, node))
        }
        return out
    }

    @Test func takesOnlyWhatTheTreePathTakes() throws {
        var g = TestSeed.generator(0x5CA7_7E47)
        var taken = 0, treeTook = 0
        for round in 0..<6_000 {
            let n = Int.random(in: 0...14, using: &g)
            let body = Array(("{" + (0..<n).map { Self.member(&g, $0) }.joined(separator: [",", " , ", ",\n"].randomElement(using: &g)!) + "}").utf8)
            let base = try Path(["", "d", "d/e/f"].randomElement(using: &g)!)
            let want = Self.tree(body, base: base)
            if want != nil { treeTook += 1 }
            let checked = UpdateText.scan(body: body, base: base, maxParts: Self.validation.maxUpdateParts,
                                          maxNodes: Self.validation.maxWriteNodes, buildNodes: false)
            guard let (text, built) = UpdateText.scan(body: body, base: base, maxParts: Self.validation.maxUpdateParts,
                                                      maxNodes: Self.validation.maxWriteNodes) else {
                #expect(checked == nil, "round \(round): the checking scan took what the building scan refuses")
                continue
            }
            // The checking scan (a cluster's front) decides as the building scan does, with the same parts.
            let (checkedText, unbuilt) = try #require(checked, "round \(round): the checking scan refused what the building scan takes")
            #expect(checkedText == text && unbuilt == nil, "round \(round)")
            let nodes = try #require(built)
            taken += 1
            let tree = try #require(want, "round \(round): the scan took what the tree path refuses: \(String(decoding: body, as: UTF8.self))")
            #expect(text.parts.map(\.path) == tree.map(\.0), "round \(round)")
            #expect(nodes.count == tree.count && zip(nodes, tree).allSatisfy { $0.isIdentical(to: $1.1) }, "round \(round)")
            // Each part's text is its value as sent.
            for i in 0..<text.count {
                #expect(try Node(json: JSON.parse(text.text(i)), depth: base.count + text.parts[i].path.count).isIdentical(to: nodes[i]))
            }
        }
        // The tree path takes what the scan hands over only with a server value (never in the
        // text form) or a repeated path (the parse keeps the last): most of what it takes is taken.
        #expect(taken > 200 && taken * 3 > treeTook, "taken \(taken) of \(treeTook)")
    }

    @Test func handsOverWhatItDoesNotTakeWhole() {
        func scan(_ s: String, base: Path = .root) -> Bool {
            UpdateText.scan(body: Array(s.utf8), base: base, maxParts: 3, maxNodes: 5) != nil
        }
        #expect(scan(#"{"a":1,"b/c":{"x":[1,2]}}"#))
        #expect(scan(#" { "a" : 1 } "#))
        #expect(!scan(#"{"a":{".sv":"timestamp"}}"#))  // server values keep the tree form
        #expect(!scan(#"{"a":1,"a":2}"#))  // repeated path: the parse keeps the last
        #expect(!scan(#"{"a":1,"a/b":2}"#))  // nested paths
        #expect(!scan(#"{"a":1,"b":2,"c":3,"d":4}"#))  // parts over the limit
        #expect(!scan(#"{"a":[1,2,3,4,5]}"#))  // nodes over the limit (the array and its items)
        #expect(!scan(#"{}"#) && !scan(#"[1]"#) && !scan(#"1"#) && !scan(#"{"a":1}x"#) && !scan(#"{"a":1"#))
        #expect(!scan(#"{"":1}"#) && !scan(#"{"a.b":1}"#))
        #expect(!scan(#"{"a":1}"#, base: try! Path((0..<Limits.maxPathDepth).map { "p\($0)" }.joined(separator: "/"))))
    }
}
