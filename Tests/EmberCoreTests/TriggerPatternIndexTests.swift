import Testing
@testable import EmberCore

/// `TriggerPatternIndex`: a write looks only at the patterns its first keys can reach, and never
/// misses one that `TriggerPattern.scope` would give a scope.
@Suite struct TriggerPatternIndexTests {
    static let texts = ["/messages/{id}", "/orders/{id}", "/{any}/likes", "/orders/{id}/items/{item}", "/users/{uid}"]
    let patterns = texts.map { try! TriggerPattern(parsing: $0) }

    func paths(_ p: [String]) -> [Path] { p.map { try! Path($0) } }

    @Test func aWriteBelowOneListLooksAtItsPatternsAndTheWildcardFirstOnes() {
        let index = TriggerPatternIndex(patterns)
        #expect(index.candidates(paths(["/messages/m1"])) == [0, 2])
        #expect(index.candidates(paths(["/orders/o1/items/i1"])) == [1, 2, 3])
        #expect(index.candidates(paths(["/elsewhere/x"])) == [2])
        // A multi-path update over two lists: both lists' patterns, each once, in plan order.
        #expect(index.candidates(paths(["/users/u1", "/messages/m1", "/users/u2"])) == [0, 2, 4])
        // A write at the root can change any pattern's locations.
        #expect(index.candidates([.root]) == [0, 1, 2, 3, 4])
        #expect(index.candidates(paths(["/messages/m1", "/"])) == [0, 1, 2, 3, 4])
    }

    @Test func noPatternOrOneIsNotIndexed() {
        #expect(TriggerPatternIndex([]).candidates(paths(["/a"])).isEmpty)
        #expect(TriggerPatternIndex([patterns[0]]).candidates(paths(["/orders/x"])) == [0])
    }

    /// Patterns on separate lists (none starting with a wildcard): one path's candidates come
    /// straight from its first key's plans, and are what the general walk over every path
    /// gives (a path listed twice takes that walk).
    @Test func onePathBelowSeparateListsGetsItsListsPlansAsTheGeneralWalkDoes() {
        let texts = (0..<10).map { "/p\($0)/{w}/{k}" } + ["/p3/{w}", "/other/{x}"]
        let index = TriggerPatternIndex(texts.map { try! TriggerPattern(parsing: $0) })
        #expect(index.candidates(paths(["/p3/w1/k9"])) == [3, 10])
        #expect(index.candidates(paths(["/p7/w1/k9"])) == [7])
        #expect(index.candidates(paths(["/nowhere/a"])).isEmpty)
        for w in ["/p0/a/b", "/p3/a", "/p3", "/other/y/z", "/x", "/p9/w/k/deeper"] {
            let one = paths([w])
            #expect(index.candidates(one) == index.candidates(one + one), "\(w)")
        }
        #expect(index.candidates([.root]) == Array(0..<12))
    }

    /// Against trying every pattern: each pattern with a scope for some path of the write is a
    /// candidate (the index only leaves out patterns that could not change anything).
    @Test func neverMissesAPatternTheWriteCanChange() {
        let all = Self.texts + ["/", "/{a}/{b}", "/messages"]
        let pats = all.map { try! TriggerPattern(parsing: $0) }
        let index = TriggerPatternIndex(pats)
        let writes: [[String]] = [["/"], ["/messages"], ["/messages/m1/text"], ["/orders"], ["/orders/o1", "/users/u1/name"],
                                  ["/x/likes"], ["/x/likes/y"], ["/zzz"], ["/messages/m1", "/orders/o1/items/i1/qty"]]
        for w in writes {
            let ps = paths(w)
            let reached = pats.indices.filter { i in ps.contains { pats[i].scope(of: $0) != nil } }
            let candidates = Set(index.candidates(ps))
            #expect(reached.allSatisfy { candidates.contains($0) }, "write \(w): reached \(reached), candidates \(candidates.sorted())")
        }
    }
}
