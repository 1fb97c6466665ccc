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

/// Spreading (issue 38): the seeded choices of a `NodeList` given a seed.
@Suite struct NodeListSpreadTests {
    let suffix = "/.ws?v=5&ns=x"
    let cluster = ["http://a:1", "http://b:2", "http://c:3", "http://d:4"]
    func ws(_ origin: String) -> String { origin.replacingOccurrences(of: "http://", with: "ws://") + suffix }

    @Test func theSameSeedReplaysTheSameChoices() {
        for seed: UInt64 in 0..<50 {
            var x = NodeList(given: ["ws://a:1" + suffix, "ws://b:2" + suffix], seed: seed)
            var y = NodeList(given: ["ws://a:1" + suffix, "ws://b:2" + suffix], seed: seed)
            #expect(x.current == y.current)
            let (mx, my) = (x.handshake(named: cluster), y.handshake(named: cluster))
            #expect(mx == my)
            x.advance()
            y.advance()
            #expect(x == y)
        }
    }

    /// Clients given the same URLs start at different ones, each about as often.
    @Test func theFirstURLIsARandomGivenOne() {
        let given = ["ws://a:1" + suffix, "ws://b:2" + suffix, "ws://c:3" + suffix]
        var counts: [String: Int] = [:]
        for seed: UInt64 in 0..<600 { counts[NodeList(given: given, seed: seed).current, default: 0] += 1 }
        #expect(Set(counts.keys) == Set(given))
        #expect(counts.values.allSatisfy { $0 > 150 }, "\(counts)")
        // Without a seed: the first given URL, as before.
        #expect(NodeList(given: given).current == given[0])
    }

    /// A client given one node lands on a random node of the first handshake's list (the given
    /// one included, where it stays), about uniformly; later handshakes never move it.
    @Test func theFirstHandshakeMovesOnceToARandomNamedNode() {
        var counts: [String: Int] = [:]
        for seed: UInt64 in 0..<800 {
            var list = NodeList(given: ["ws://a:1" + suffix], seed: seed)
            let move = list.handshake(named: cluster)
            #expect(move == nil ? list.current == "ws://a:1" + suffix : move == list.current)
            counts[list.current, default: 0] += 1
            let landed = list.current
            let again = list.handshake(named: cluster), reversed = list.handshake(named: cluster.reversed())
            #expect(again == nil && reversed == nil)
            #expect(list.current == landed)
        }
        #expect(Set(counts.keys) == Set(cluster.map(ws)))
        #expect(counts.values.allSatisfy { $0 > 140 }, "\(counts)")
    }

    /// The seeds the cluster spread test (ClusterSpreadTests.swift) gives its twelve clients
    /// reach every one of four nodes (so there the learner gets clients whatever its place in
    /// the handshake's list).
    @Test func theIntegrationTestsSeedsReachEveryNodeOfFour() {
        var landed = Set<String>()
        for seed in ClusterFailoverTests.spreadSeeds {
            var list = NodeList(given: ["ws://a:1" + suffix], seed: seed)
            _ = list.handshake(named: cluster)
            landed.insert(list.current)
        }
        #expect(landed.count == 4)
    }

    @Test func nothingMovesWhenTheGivenURLsAreTheNamedNodesOrNoneAreNamed() {
        for seed: UInt64 in 0..<100 {
            var all = NodeList(given: cluster.map(ws), seed: seed)
            let first = all.current
            let move = all.handshake(named: cluster.reversed())
            #expect(move == nil)
            #expect(all.current == first)
            var single = NodeList(given: ["ws://a:1" + suffix], seed: seed)
            let none = single.handshake(named: nil)
            #expect(none == nil)
            #expect(single.all == ["ws://a:1" + suffix])
            // ... and no later handshake moves it either: the spread happens once.
            let later = single.handshake(named: cluster)
            #expect(later == nil)
        }
    }

    /// A given URL that is no node of the cluster (a load balancer) is always left for a node.
    @Test func aGivenURLTheHandshakeDoesNotNameIsLeft() {
        for seed: UInt64 in 0..<100 {
            var list = NodeList(given: ["ws://lb:9" + suffix], seed: seed)
            let move = list.handshake(named: cluster)
            #expect(move != nil && cluster.map(ws).contains(move!))
        }
    }

    /// Failover walks a permutation of every node (each dead node is tried once per round), and
    /// the clients of one dead node scatter: their next nodes differ between seeds.
    @Test func failoverWalksEachClientsOwnOrderOfEveryNode() {
        var nextAfterA = Set<String>()
        for seed: UInt64 in 0..<100 {
            var list = NodeList(given: ["ws://a:1" + suffix], seed: seed)
            _ = list.handshake(named: cluster)
            var visited: [String] = []
            for _ in 0..<4 {
                list.advance()
                visited.append(list.current)
            }
            #expect(Set(visited) == Set(cluster.map(ws)), "seed \(seed): \(visited)")
            let i = list.rotation.firstIndex(of: ws("http://a:1"))!
            nextAfterA.insert(list.rotation[(i + 1) % 4])
        }
        #expect(nextAfterA.count == 3, "\(nextAfterA)")
    }

    /// A handshake that changes the nodes gives a new order over the new set.
    @Test func aChangedNodeSetIsReshuffled() {
        var list = NodeList(given: ["ws://a:1" + suffix], seed: 7)
        _ = list.handshake(named: cluster)
        list.learn(clientURLs: ["http://a:1", "http://b:2", "http://e:5"])
        #expect(Set(list.rotation) == Set(["ws://a:1" + suffix, "ws://b:2" + suffix, "ws://e:5" + suffix]))
        #expect(list.rotation.count == 3)
    }
}
