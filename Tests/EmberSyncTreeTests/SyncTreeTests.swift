import EmberSyncTree
import EmberCore
import Testing

private func p(_ s: String) -> Path {
    Path(validated: s.split(separator: "/").map(String.init))
}

private func node(_ json: String) throws -> Node {
    try Node(json: JSON.parse(json))
}

private func summary(_ events: [Event]) -> [String] {
    events.map { e in
        var s = "\(e.type)"
        if let k = e.childKey { s += " \(k)" }
        if e.type != .value && e.type != .childRemoved { s += " prev=\(e.prevName ?? "-")" }
        return s + " " + e.node.exportJSON().serialized()
    }
}

@Suite("SyncTree unit tests")
struct SyncTreeTests {
    @Test("a limit window refills from an ancestor default listener's cache")
    func limitRefill() throws {
        let provider = FakeListenProvider()
        let tree = SyncTree(listenProvider: provider)
        _ = tree.addEventRegistration(SyncQuery(path: p("a")), RegistrationID(1))
        _ = tree.applyServerOverwrite(p("a"), try node(#"{"x":1,"y":2,"z":3}"#))
        let q = SyncQuery(path: p("a"), spec: QuerySpec().limited(toFirst: 2))
        let initial = tree.addEventRegistration(q, RegistrationID(2))
        #expect(summary(initial) == [#"child_added x prev=- 1"#, #"child_added y prev=x 2"#, #"value {"x":1,"y":2}"#])
        // No tag: the default listener at `a` already covers the query.
        #expect(tree.tag(for: q) == 1)
        #expect(provider.log == ["start /a tag=nil"])

        let events = tree.applyUserOverwrite(p("a/x"), .empty, writeId: 0)
        let forQuery = events.filter { $0.registration == RegistrationID(2) }
        #expect(summary(forQuery) == [#"child_removed x 1"#, #"child_added z prev=y 3"#, #"value {"y":2,"z":3}"#])
        let forDefault = events.filter { $0.registration == RegistrationID(1) }
        #expect(summary(forDefault) == [#"child_removed x 1"#, #"value {"y":2,"z":3}"#])
        #expect(provider.errors.isEmpty)
    }

    @Test("tagged data reaches only its query and starts a tagged listen")
    func taggedRouting() throws {
        let provider = FakeListenProvider()
        let tree = SyncTree(listenProvider: provider)
        let q = SyncQuery(path: p("items"), spec: QuerySpec(index: .child(p("n"))).limited(toLast: 1))
        _ = tree.addEventRegistration(q, RegistrationID(1))
        let child = SyncQuery(path: p("items/b"))
        _ = tree.addEventRegistration(child, RegistrationID(2))
        let tag = try #require(tree.tag(for: q))
        #expect(tag == 1)
        #expect(tree.query(forTag: tag) == q)
        #expect(provider.log == ["start /items {\"i\":\"n\",\"l\":1,\"vf\":\"r\"} tag=1", "start /items/b tag=nil"])

        let events = tree.applyTaggedQueryOverwrite(p("items"), try node(#"{"b":{"n":5}}"#), tag: tag)
        #expect(events.allSatisfy { $0.registration == RegistrationID(1) })
        #expect(summary(events) == [#"child_added b prev=- {"n":5}"#, #"value {"b":{"n":5}}"#])
        // An unknown tag is ignored.
        #expect(tree.applyTaggedQueryOverwrite(p("items"), try node(#"{"c":1}"#), tag: 99).isEmpty)
        // A tagged update below the query path is relative to it.
        let deeper = tree.applyTaggedQueryOverwrite(p("items/b/n"), Node(.int(6)), tag: tag)
        #expect(summary(deeper) == [#"child_moved b prev=- {"n":6}"#, #"child_changed b prev=- {"n":6}"#, #"value {"b":{"n":6}}"#])

        tree.removeEventRegistration(q, RegistrationID(1))
        #expect(tree.tag(for: q) == nil)
        #expect(provider.log.last == "stop /items {\"i\":\"n\",\"l\":1,\"vf\":\"r\"} tag=1")
        #expect(provider.errors.isEmpty)
    }

    @Test("a rejected write rolls the view back with events")
    func revertEvents() throws {
        let tree = SyncTree(listenProvider: FakeListenProvider())
        _ = tree.addEventRegistration(SyncQuery(path: p("a")), RegistrationID(1))
        _ = tree.applyServerOverwrite(p("a"), try node(#"{"x":1}"#))
        let set = tree.applyUserOverwrite(p("a/y"), Node(.int(2)), writeId: 0)
        #expect(summary(set) == [#"child_added y prev=x 2"#, #"value {"x":1,"y":2}"#])
        let revert = tree.ackUserWrite(0, revert: true)
        #expect(summary(revert) == [#"child_removed y 2"#, #"value {"x":1}"#])
        #expect(tree.pendingWriteIds.isEmpty)
    }

    @Test("an ack reveals a different server value; a matching ack raises nothing")
    func ackRevealsServerValue() throws {
        let tree = SyncTree(listenProvider: FakeListenProvider())
        _ = tree.addEventRegistration(SyncQuery(path: p("a")), RegistrationID(1))
        _ = tree.applyServerOverwrite(p("a"), try node(#"{"x":1}"#))
        _ = tree.applyUserOverwrite(p("a/x"), Node(.int(2)), writeId: 0)
        _ = tree.applyUserOverwrite(p("a/z"), Node(.int(3)), writeId: 1)
        // The server's data is shadowed by the pending write.
        #expect(tree.applyServerOverwrite(p("a/x"), Node(.int(7))).isEmpty)
        #expect(summary(tree.ackUserWrite(0)) == [#"child_changed x prev=- 7"#, #"value {"x":7,"z":3}"#])
        #expect(tree.applyServerOverwrite(p("a/z"), Node(.int(3))).isEmpty)
        #expect(tree.ackUserWrite(1).isEmpty)
    }

    @Test("latest local value includes pending and hidden writes; server hash covers server data only")
    func completeEventCacheAndHash() throws {
        let tree = SyncTree(listenProvider: FakeListenProvider())
        let q = SyncQuery(path: p("a"))
        #expect(tree.calcCompleteEventCache(p("a")) == nil)
        _ = tree.addEventRegistration(q, RegistrationID(1))
        let server = try node(#"{"x":1,"y":{"z":true}}"#)
        _ = tree.applyServerOverwrite(p("a"), server)
        #expect(tree.serverHash(for: q) == server.firebaseHash)
        _ = tree.applyUserOverwrite(p("a/x"), Node(.int(5)), writeId: 0)
        _ = tree.applyUserOverwrite(p("a/w"), Node(.string("t")), writeId: 1, visible: false)
        #expect(tree.calcCompleteEventCache(p("a")) == (try node(#"{"x":5,"y":{"z":true},"w":"t"}"#)))
        #expect(tree.calcCompleteEventCache(p("a"), excluding: [1]) == (try node(#"{"x":5,"y":{"z":true}}"#)))
        #expect(tree.calcCompleteEventCache(p("a/y/z")) == Node(.bool(true)))
        #expect(tree.serverHash(for: q) == server.firebaseHash)
        // Unknown location with a complete write still has a local value.
        _ = tree.applyUserOverwrite(p("b"), Node(.int(1)), writeId: 2)
        #expect(tree.calcCompleteEventCache(p("b")) == Node(.int(1)))
    }

    @Test("a default listen above others replaces their server listens and restores them on removal")
    func listenDedup() throws {
        let provider = FakeListenProvider()
        let tree = SyncTree(listenProvider: provider)
        let child = SyncQuery(path: p("a/b"))
        let limited = SyncQuery(path: p("a/c"), spec: QuerySpec().limited(toFirst: 1))
        let root = SyncQuery(path: p("a"))
        _ = tree.addEventRegistration(child, RegistrationID(1))
        _ = tree.addEventRegistration(limited, RegistrationID(2))
        _ = tree.addEventRegistration(root, RegistrationID(3))
        #expect(provider.active == [FakeListenProvider.Listen(query: root, tag: nil)])
        tree.removeEventRegistration(root, RegistrationID(3))
        #expect(provider.active == [FakeListenProvider.Listen(query: child, tag: nil),
                                    FakeListenProvider.Listen(query: limited, tag: 1)])
        #expect(provider.errors.isEmpty)
    }

    @Test("spec test 54: unlistening moves the server listen to the nearest remaining default listens")
    func collectSubviews() throws {
        let provider = FakeListenProvider()
        let tree = SyncTree(listenProvider: provider)
        let cb = RegistrationID(1)
        for path in ["", "a", "a/b"] { _ = tree.addEventRegistration(SyncQuery(path: p(path)), cb) }
        #expect(provider.log == ["start / tag=nil"])
        tree.removeEventRegistration(SyncQuery(path: .root), cb)
        #expect(provider.log == ["start / tag=nil", "start /a tag=nil", "stop / tag=nil"])
        tree.removeEventRegistration(SyncQuery(path: p("a")), cb)
        #expect(provider.log.suffix(2) == ["start /a/b tag=nil", "stop /a tag=nil"])
        #expect(provider.errors.isEmpty)
    }

    @Test("priority writes: a child written into a prioritized leaf keeps the priority")
    func priorityKeptOnLeafToObject() throws {
        let tree = SyncTree(listenProvider: FakeListenProvider())
        _ = tree.addEventRegistration(SyncQuery(path: p("a")), RegistrationID(1))
        _ = tree.applyServerOverwrite(p("a"), try node(#"{".value":"leaf",".priority":7}"#))
        let events = tree.applyUserOverwrite(p("a/k"), Node(.int(1)), writeId: 0)
        #expect(summary(events) == [#"child_added k prev=- 1"#, #"value {".priority":7,"k":1}"#])
        // Deleting below a leaf changes nothing.
        let tree2 = SyncTree(listenProvider: FakeListenProvider())
        _ = tree2.addEventRegistration(SyncQuery(path: p("a")), RegistrationID(1))
        _ = tree2.applyServerOverwrite(p("a"), Node(.string("leaf")))
        #expect(tree2.applyServerOverwrite(p("a/k/j"), .empty).isEmpty)
    }
}
