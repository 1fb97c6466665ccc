import EmberCore
import EmberTestSupport
import Testing

@testable import EmberServer

/// The listener index finds exactly the listeners a change concerns: those for which
/// `ChangeRouting.events` is not empty (what a scan of every listener found before).
@Suite(.printsSeedOnFailure) struct PathIndexTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    /// The keys the index matches for `change`, with the path they were registered at.
    func matched(_ index: PathIndex<Int, Path>, _ change: CommittedChange) -> [Int: Path] {
        var out: [Int: Path] = [:]
        for (path, values) in index.matching(change) {
            for (key, registered) in values {
                #expect(registered == path, "a value is reported under the path it was registered at")
                #expect(out.updateValue(path, forKey: key) == nil, "each listener once")
            }
        }
        return out
    }

    /// What a scan of every listener finds.
    func naive(_ listeners: [Int: Path], _ change: CommittedChange) -> [Int: Path] {
        listeners.filter { !ChangeRouting.events(for: change, at: $0.value).isEmpty }
    }

    func index(_ listeners: [Int: Path]) -> PathIndex<Int, Path> {
        var i = PathIndex<Int, Path>()
        for (k, path) in listeners { i.insert(path, for: k, at: path) }
        return i
    }

    @Test func deepRootSiblingAndUnrelatedListeners() {
        let listeners: [Int: Path] = [
            1: .root, 2: p("a"), 3: p("a/b"), 4: p("a/b/c/d"), 5: p("a/x"), 6: p("other"), 7: p("a/b"),
        ]
        let idx = index(listeners)
        #expect(idx.count == 7)
        // A set at a/b: the root, a and both a/b listeners above or at it, a/b/c/d below it;
        // the sibling a/x and other are not visited.
        let set = CommittedChange(index: 1, namespace: "ns", path: p("a/b"), kind: .set(n("1")))
        #expect(Set(matched(idx, set).keys) == [1, 2, 3, 4, 7])
        // A deep set reaches every listener on its way from the root and none beside it.
        let deep = CommittedChange(index: 2, namespace: "ns", path: p("a/b/c/d/e/f"), kind: .set(n("1")))
        #expect(Set(matched(idx, deep).keys) == [1, 2, 3, 4, 7])
        // A set at the root concerns everyone.
        let root = CommittedChange(index: 3, namespace: "ns", path: .root, kind: .set(n("1")))
        #expect(Set(matched(idx, root).keys) == Set(listeners.keys))
        // A set where nobody listens below it: only the listeners above.
        let elsewhere = CommittedChange(index: 4, namespace: "ns", path: p("zzz/q"), kind: .set(n("1")))
        #expect(Set(matched(idx, elsewhere).keys) == [1])
    }

    @Test func mergeVisitsOnlyTheTouchedParts() {
        let listeners: [Int: Path] = [1: .root, 2: p("a"), 3: p("a/b"), 4: p("a/b/c"), 5: p("a/x"), 6: p("a/y/z")]
        let idx = index(listeners)
        // update at a of {b/c: 1, y: {...}}: a and the root get a patch; a/b (above a part) and
        // a/b/c (at one), a/y/z (below one) get puts; a/x gets nothing.
        let merge = CommittedChange(index: 1, namespace: "ns", path: p("a"),
                                    kind: .merge([(p("b/c"), n("1")), (p("y"), n(#"{"z":2}"#))]))
        #expect(Set(matched(idx, merge).keys) == [1, 2, 3, 4, 6])
        #expect(matched(idx, merge) == naive(listeners, merge))
        // Overlapping parts (a part below another) report each listener once.
        let overlapping = CommittedChange(index: 2, namespace: "ns", path: p("a"),
                                          kind: .merge([(p("b"), n("1")), (p("b/c"), n("2"))]))
        #expect(Set(matched(idx, overlapping).keys) == [1, 2, 3, 4])
    }

    @Test func removalIsExactAndPrunes() {
        var idx = index([1: p("a/b/c"), 2: p("a/b/c"), 3: p("a")])
        let set = CommittedChange(index: 1, namespace: "ns", path: p("a/b/c/d"), kind: .set(n("1")))
        #expect(Set(matched(idx, set).keys) == [1, 2, 3])
        #expect(idx.remove(1, at: p("a/b/c")) == p("a/b/c"))
        #expect(idx.remove(1, at: p("a/b/c")) == nil, "removing twice removes nothing")
        #expect(idx.remove(2, at: p("a/b")) == nil, "a key is removed only at its own path")
        #expect(Set(matched(idx, set).keys) == [2, 3])
        #expect(idx.remove(2, at: p("a/b/c")) != nil)
        #expect(idx.remove(3, at: p("a")) != nil)
        #expect(idx.isEmpty)
        #expect(idx.all().isEmpty, "no empty nodes are left behind")
        #expect(matched(idx, set).isEmpty)
        // Re-inserting the same key replaces its value and counts once.
        idx.insert(p("q"), for: 9, at: p("q"))
        idx.insert(p("q"), for: 9, at: p("q"))
        #expect(idx.count == 1)
    }

    /// A query-window listen is indexed at its location like any other: a change to a child
    /// outside the window still reaches it (the window is computed by the listen itself).
    @Test func queryWindowListensAreFoundAtTheirLocation() async throws {
        let hub = RealtimeHub()
        let s = try #require(hub.open(id: "q", namespace: "ns"))
        let window: JSON = .object(["i": .string(".value"), "l": .int(1), "vf": .string("l")])
        #expect(started(s.beginListen(r: 1, listen(p("scores"), try QuerySpec(wire: window), window, 3))))
        s.listenRead(r: 1, listen(p("scores"), .default, window, 3), indexed: true, read: ReadResult(node: n(#"{"a":5,"b":9}"#), version: 1, appliedIndex: 1))
        #expect(hub.listenCount == 1)
        // b drops below a: the one-child window changes from a to b.
        hub.publish(CommittedChange(index: 2, namespace: "ns", path: p("scores/b"), kind: .set(n("1"))))
        // A sibling location: nothing.
        hub.publish(CommittedChange(index: 3, namespace: "ns", path: p("other/b"), kind: .set(n("1"))))
        let got = await drain(s, 3)
        let push = try #require(got.last?.objectValue?["d"]?.objectValue?["b"]?.objectValue)
        #expect(push["t"] == .int(3))
        #expect(push["d"] == .object(["a": .null, "b": .int(1)]))
        s.endListen(listen(p("scores"), .default, window, 3))
        #expect(hub.listenCount == 0)
        hub.close(s)
    }

    @Test func closingASessionTakesItsListensOutOfTheIndex() throws {
        let hub = RealtimeHub()
        let s = try #require(hub.open(id: "a", namespace: "ns"))
        for path in ["", "x", "x/y"] {
            #expect(started(s.beginListen(r: 1, listen(p(path), .default, nil, nil))))
        }
        #expect(hub.listenCount == 3)
        hub.close(s)
        #expect(hub.listenCount == 0)
        // A listen begun after the hub forgot the session is not indexed.
        #expect(started(s.beginListen(r: 1, listen(p("z"), .default, nil, nil))))
        #expect(hub.listenCount == 0)
    }

    // MARK: - Against the naive scan

    typealias Rng = SplitMix64

    /// Paths over a small alphabet, so listeners and changes often share prefixes.
    func randomPath(_ rng: inout Rng, maxDepth: Int = 4) -> Path {
        let keys = ["a", "b", "c", "é", "e\u{301}"]
        let depth = Int.random(in: 0...maxDepth, using: &rng)
        return Path(validated: (0..<depth).map { _ in keys.randomElement(using: &rng)! })
    }

    func randomChange(_ rng: inout Rng, index: UInt64) -> CommittedChange {
        let base = randomPath(&rng)
        if Bool.random(using: &rng) {
            return CommittedChange(index: index, namespace: "ns", path: base, kind: .set(n("1")))
        }
        let parts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in (randomPath(&rng, maxDepth: 3), n("2")) }
        return CommittedChange(index: index, namespace: "ns", path: base, kind: .merge(parts))
    }

    @Test func matchesTheNaiveScanUnderRandomRegistrationAndRemoval() {
        var rng = TestSeed.generator(13)
        for round in 0..<200 {
            var listeners: [Int: Path] = [:]
            var idx = PathIndex<Int, Path>()
            var nextKey = 0
            for step in 0..<60 {
                if !listeners.isEmpty, Int.random(in: 0..<3, using: &rng) == 0 {
                    let k = listeners.keys.randomElement(using: &rng)!
                    #expect(idx.remove(k, at: listeners[k]!) == listeners[k]!)
                    listeners.removeValue(forKey: k)
                } else {
                    let path = randomPath(&rng)
                    listeners[nextKey] = path
                    idx.insert(path, for: nextKey, at: path)
                    nextKey += 1
                }
                #expect(idx.count == listeners.count)
                let change = randomChange(&rng, index: UInt64(step + 1))
                #expect(matched(idx, change) == naive(listeners, change),
                        "round \(round) step \(step): \(change.path) \(change.kind)")
            }
            // The index's own listing holds exactly the registered listeners.
            var listed: [Int: Path] = [:]
            for (path, values) in idx.all() { for (k, _) in values { listed[k] = path } }
            #expect(listed == listeners)
        }
    }
}
