import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A bulk write's tree records go in key order with MDB_APPEND (issue 42, `Applier.putRecords`):
/// exactly the rows the plain puts in map order gave (`StoreOptions.orderedRecords` false, the
/// path before), in fewer pages (as full as a compacted copy's: `BulkLoadPagesTests`).
@Suite(.printsSeedOnFailure) struct OrderedRecordsTests {
    /// One user as an export holds it (scripts/large-data.py: leaves, tags, posts with long
    /// bodies and priorities), with one of the values a record writer must get exactly right.
    static func user(_ g: inout SplitMix64, _ i: Int) -> String {
        var m = [#""name":"user\#(i)""#, #""age":\#(Int.random(in: 13...99, using: &g))"#]
        if Bool.random(using: &g) { m.append(#""active":\#(Bool.random(using: &g))"#) }
        if Int.random(in: 0..<5, using: &g) == 0 { m.append(#"".priority":"p\#(i % 7)""#) }
        if Bool.random(using: &g) { m.append(#""tags":{"tag\#(i % 50)":true,"tag\#((i + 3) % 50)":true}"#) }
        var posts: [String] = []
        for k in 0..<Int.random(in: 0...5, using: &g) {
            let body = String(repeating: "b", count: Int.random(in: 20...300, using: &g))
            let pr = Int.random(in: 0..<3, using: &g) == 0 ? #"".priority":\#(k + 1),"# : ""
            posts.append(#""-P\#(i)x\#(k)":{\#(pr)"body":"\#(body)","likes":\#(k * 37),"title":"t\#(k)"}"#)
        }
        if !posts.isEmpty { m.append(#""posts":{\#(posts.joined(separator: ","))}"#) }
        let deep = String(repeating: #"{"a":"#, count: 20) + #"{"x":1,".priority":2}"# + String(repeating: "}", count: 20)
        let many = (0..<70).map { #""m\#($0 * 7919 % 100)x\#($0)":\#($0)"# }.joined(separator: ",")
        let edge = [
            #""v":{".value":5,".priority":2.5}"#, #""w":{".priority":"q",".value":"s"}"#,
            #""e":{}"#, #""z":null"#, #""o":{"gone":null,"empty":{}}"#,
            #""deep":\#(deep)"#,
            #""keys":{"k\"q":1,"k\\b":2,"\u00e9":3,"e\u0301":4,"\ud83d\ude00":5,"\ue000":6,"日本":7}"#,
            #""ints":{"1":1,"10":2,"2":3,"-5":4,"007":5,"a":6,"2147483648":7,"-0":8}"#,
            #""nums":{"a":1.0,"b":1e3,"c":-0,"d":1E+2,"e":0.1,"f":9007199254740993,"g":1.5e-7,"h":-12}"#,
            #""arr":[1,null,{"x":2},[true,"s"]]"#,
            #""many":{\#(many)}"#,
            #""long":"\#(String(repeating: "L", count: 400))""#,
        ]
        m.append(edge[i % edge.count])
        return "{" + m.shuffled(using: &g).joined(separator: ",") + "}"
    }

    /// A PATCH body of users `ids` (each part at `u<id>`; some parts below a user: `u<id>/posts`).
    static func body(_ g: inout SplitMix64, _ ids: Range<Int>, deletes: Bool = false) -> String {
        let parts = ids.map { i -> String in
            let key = String(format: "u%06d", i)
            if deletes && i % 3 == 0 { return #""\#(key)":\#(["null", "{}"].randomElement(using: &g)!)"# }
            if deletes && i % 3 == 1 { return #""\#(key)/posts":{"-Q\#(i)":{"title":"again"}}"# }
            return #""\#(key)":\#(user(&g, i))"#
        }
        return "{" + parts.shuffled(using: &g).joined(separator: ",") + "}"
    }

    func pages(_ s: EmberStore, _ table: String) throws -> Int {
        try s.footprint().tables.first { $0.name == table }!.pages
    }

    /// The same updateText entries into a store of each way, nodes built from the text (a
    /// follower) or handed over (a single node's front): the same state hash, the same tree.
    @Test func theRowsAreThoseOfThePlainPuts() async throws {
        var plain = smallOptions()
        plain.orderedRecords = false
        let a = try openStore(), b = try openStore(tempDir(), plain)
        defer { a.close(); b.close() }
        var g = TestSeed.generator(0x0D3E_42)
        // Fresh users (past the table's end), then parts over them (deletes, rewrites, parts below
        // a user: appends refused), then fresh users again, then some below the first ones.
        let bodies = [Self.body(&g, 0..<300), Self.body(&g, 100..<250, deletes: true),
                      Self.body(&g, 300..<500), Self.body(&g, 0..<80), Self.body(&g, 490..<600, deletes: true)]
        for (k, body) in bodies.enumerated() {
            guard let (text, nodes) = UpdateText.scan(body: Array(body.utf8), base: p("/users"), maxParts: 100_000, maxNodes: 1_000_000) else {
                Issue.record("body \(k) was not taken whole by the scan")
                continue
            }
            #expect(text.count >= 64, "a bulk write")
            let built = k % 2 == 0 ? nodes : nil
            let ra = try await a.submit(namespace: "t", .updateText(path: p("/users"), parts: text), built: built)
            let rb = try await b.submit(namespace: "t", .updateText(path: p("/users"), parts: text), built: built)
            #expect(ra.outcome == rb.outcome && ra.index == rb.index, "body \(k)")
            #expect(try a.stateHash() == b.stateHash(), "body \(k)")
            if k == 0 {
                let (ordered, plain) = (try pages(a, "tree"), try pages(b, "tree"))
                #expect(Double(ordered) * 1.2 <= Double(plain), "a load: \(ordered) pages in key order, \(plain) put plainly")
            }
        }
        let all = try a.get("/")
        #expect(all.isIdentical(to: try b.get("/")))
        #expect(try a.footprint().tables.first { $0.name == "tree" }!.entries == b.footprint().tables.first { $0.name == "tree" }!.entries)
        // What the parts say, read back: a user deleted, posts replaced below a user, escaped
        // keys, a `.value` wrapper with its priority, deep nesting, many children.
        let users = all.child("users")
        #expect(users.child("u000102").isEmpty && !users.child("u000101").isEmpty)
        #expect(users.child("u000103").child("posts").children.count == 1)
        #expect(try a.get("/users/u000006/keys/k\"q").leaf == .int(1))
        #expect(users.child("u000006").child("keys").children.count == 7)
        #expect(users.child("u000000").child("v").leaf == .int(5) && users.child("u000000").child("v").priority == .number(2.5))
        #expect(try a.get("/users/u000005/deep" + String(repeating: "/a", count: 20) + "/x").leaf == .int(1))
        #expect(users.child("u000010").child("many").children.count == 70)
    }
}
