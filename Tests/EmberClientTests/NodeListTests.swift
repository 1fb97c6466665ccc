import Testing
@testable import EmberClient

/// The pure list of node URLs a connection rotates through (`NodeList`).
@Suite struct NodeListTests {
    let suffix = "/.ws?v=5&ns=x"

    @Test func givenURLsAreDedupedAndRotatedInOrder() {
        var list = NodeList(given: ["ws://a:1" + suffix, "ws://A:1" + suffix, "ws://b:2" + suffix])
        #expect(list.all == ["ws://a:1" + suffix, "ws://b:2" + suffix])
        #expect(list.current == "ws://a:1" + suffix)
        list.advance()
        #expect(list.current == "ws://b:2" + suffix)
        list.advance()
        #expect(list.current == "ws://a:1" + suffix)
    }

    @Test func learnedNodesGetTheGivenPathAndQueryAndSkipKnownOrBadOnes() {
        var list = NodeList(given: ["ws://a:1" + suffix])
        list.learn(clientURLs: [
            "http://A:1/",               // the given node, named differently
            "http://b:2", "http://b:2",  // twice
            "https://c:3/prefix?q=1",    // path and query of a client URL are not used
            "http://d:80",               // default port dropped
            "ftp://e:4", "b:2", "http://", "http://user@f:5", "",
            "http://" + String(repeating: "h", count: NodeList.maxURLLength) + ":1",
        ])
        #expect(list.learned == ["ws://b:2" + suffix, "wss://c:3" + suffix, "ws://d" + suffix])
        #expect(list.all.count == 4)
    }

    @Test func aLaterHandshakeReplacesTheLearnedNodes() {
        var list = NodeList(given: ["ws://a:1" + suffix])
        list.learn(clientURLs: ["http://a:1", "http://b:2", "http://c:3"])
        list.advance()
        list.advance()
        #expect(list.current == "ws://c:3" + suffix)
        // c was removed from the cluster and d added: the next attempt does not go to c, and
        // the rotation restarts at the first URL.
        list.learn(clientURLs: ["http://a:1", "http://b:2", "http://d:4"])
        #expect(list.all == ["ws://a:1" + suffix, "ws://b:2" + suffix, "ws://d:4" + suffix])
        list.advance()
        #expect(list.current == "ws://a:1" + suffix)
        list.advance()
        list.advance()
        #expect(list.current == "ws://d:4" + suffix)
        // A list that names only the given nodes forgets every learned one; the given ones stay.
        list.learn(clientURLs: ["http://a:1"])
        #expect(list.all == ["ws://a:1" + suffix])
        list.advance()
        #expect(list.current == "ws://a:1" + suffix)
    }

    @Test func learnedNodesAreBounded() {
        var list = NodeList(given: ["ws://a:1" + suffix])
        list.learn(clientURLs: (0..<100).map { "http://n\($0):9" })
        #expect(list.learned.count == NodeList.maxLearned)
        #expect(list.learned.first == "ws://n0:9" + suffix)
    }

    @Test func ipv6HostsKeepTheirBrackets() {
        #expect(NodeList.websocketOrigin(ofClientURL: "http://[::1]:9000") == "ws://[::1]:9000")
        #expect(NodeList.websocketOrigin(ofClientURL: "https://[fe80::1]") == "wss://[fe80::1]")
    }
}
