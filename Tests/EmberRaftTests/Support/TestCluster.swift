// A hand-driven cluster for unit tests: messages are queued and delivered only when the test says
// so, and links can be cut, so each test can stage an exact scenario.

@testable import EmberRaft

struct TestCluster {
    var nodes: [NodeID: RaftNode] = [:]
    var ids: [NodeID]
    /// Messages sent but not yet delivered, in send order.
    var queue: [Message] = []
    /// Undirected links that drop every message.
    var cut: Set<[NodeID]> = []
    /// Everything applied per node, in order.
    var applied: [NodeID: [LogEntry]] = [:]
    /// Non-persist, non-send actions per node (reads, proposal results, ...), in order.
    var events: [NodeID: [Action]] = [:]
    /// Every action each node produced, for contract checks.
    var allActions: [NodeID: [Action]] = [:]
    /// Each step's action list, in order.
    var stepLog: [[Action]] = []
    /// Nodes whose written entries are NOT reported durable right after each step
    /// (`Event.persisted`): tests of the leader's own durability report them by hand.
    var manualPersist: Set<NodeID> = []
    /// Host side of snapshots: the image each leader prepared (`provideImage`), the bytes each
    /// follower staged, and how often each node asked for an image.
    var images: [NodeID: (index: UInt64, data: [UInt8])] = [:]
    var staged: [NodeID: [UInt8]] = [:]
    var imageRequests: [NodeID: Int] = [:]

    static func config(_ tweak: (inout RaftConfig) -> Void = { _ in }) -> RaftConfig {
        var c = RaftConfig(electionTick: 10, heartbeatTick: 1)
        tweak(&c)
        return c
    }

    init(_ count: Int, config: RaftConfig = TestCluster.config()) {
        ids = (1...count).map { "n\($0)" }
        for id in ids {
            var c = config
            c.randomSeed = UInt64(ids.firstIndex(of: id)!) + 1
            nodes[id] = RaftNode(id: id, config: c, state: .bootstrap(voters: ids))
        }
    }

    /// Cluster from explicit per-node persisted states (to stage divergent logs).
    init(states: [NodeID: PersistentState], config: RaftConfig = TestCluster.config()) {
        ids = states.keys.sorted()
        for id in ids {
            var c = config
            c.randomSeed = UInt64(ids.firstIndex(of: id)!) + 1
            nodes[id] = RaftNode(id: id, config: c, state: states[id]!)
        }
    }

    subscript(id: NodeID) -> RaftNode { nodes[id]! }

    @discardableResult
    mutating func step(_ id: NodeID, _ event: Event) -> [Action] {
        let actions = nodes[id]!.step(event)
        allActions[id, default: []] += actions
        stepLog.append(actions)
        for a in actions {
            switch a {
            case .send(let m): queue.append(m)
            case .apply(let es): applied[id, default: []] += es
            case .persistEntries, .persistHardState, .persistSnapshot: break
            case .prepareSnapshot: imageRequests[id, default: 0] += 1
            case .sendSnapshotChunk(let req):
                // Like a host: read the range from the prepared image (dropped if it is not that one).
                if let image = images[id], image.index == req.metadata.index, image.data.count == req.totalSize {
                    queue.append(req.message(data: Array(image.data[req.offset..<req.offset + req.length])))
                }
            case .stageSnapshotChunk(let chunk):
                if chunk.offset == 0 { staged[id] = [] }
                precondition(staged[id]?.count == chunk.offset, "chunk staged out of order")
                staged[id]! += chunk.data
            default: events[id, default: []].append(a)
            }
        }
        // A synchronous disk: whatever was written is durable at once (HOST CONTRACT 2b).
        let written = actions.compactMap { a -> LogEntry? in
            if case .persistEntries(let es) = a { return es.last } else { return nil }
        }
        if !manualPersist.contains(id), let last = written.last { step(id, .persisted(through: last.index, term: last.term)) }
        return actions
    }

    func isCut(_ a: NodeID, _ b: NodeID) -> Bool { cut.contains([a, b].sorted()) }

    mutating func isolate(_ id: NodeID) {
        for other in ids where other != id { cut.insert([id, other].sorted()) }
    }

    mutating func heal() { cut = [] }

    /// Delivers queued messages (including ones produced meanwhile) until quiet.
    /// `filter` can drop individual messages. Returns the number delivered.
    @discardableResult
    mutating func deliverAll(limit: Int = 100_000, filter: (Message) -> Bool = { _ in true }) -> Int {
        var delivered = 0
        while !queue.isEmpty && delivered < limit {
            let m = queue.removeFirst()
            guard nodes[m.to] != nil, !isCut(m.from, m.to), filter(m) else { continue }
            step(m.to, .receive(m))
            delivered += 1
        }
        return delivered
    }

    /// Takes the queued messages without delivering them.
    mutating func takeQueue() -> [Message] {
        defer { queue = [] }
        return queue
    }

    mutating func tick(_ id: NodeID, _ n: Int = 1) {
        for _ in 0..<n { step(id, .tick) }
    }

    mutating func tickAll(_ n: Int = 1, deliver: Bool = true) {
        for _ in 0..<n {
            for id in ids where nodes[id] != nil { step(id, .tick) }
            if deliver { deliverAll() }
        }
    }

    /// Makes `id` leader by campaigning and delivering everything.
    mutating func elect(_ id: NodeID) {
        step(id, .campaign)
        deliverAll()
        precondition(nodes[id]!.role == .leader, "\(id) failed to become leader")
    }

    var leaders: [NodeID] { ids.filter { nodes[$0]?.role == .leader } }

    /// The host of `id` prepared `data` as the image of its state machine at its applied index.
    @discardableResult
    mutating func provideImage(_ id: NodeID, _ data: [UInt8]) -> [Action] {
        let index = nodes[id]!.appliedIndex
        images[id] = (index, data)
        return step(id, .snapshotReady(index: index, size: data.count))
    }

    @discardableResult
    mutating func propose(_ id: NodeID, _ s: String) -> [Action] { step(id, .propose(Array(s.utf8))) }

    func payloads(_ id: NodeID) -> [String] {
        (applied[id] ?? []).filter { $0.kind == .normal }.map { String(decoding: $0.data, as: UTF8.self) }
    }
}

/// A persisted state whose log has entries with the given terms (payload "t<term>i<index>").
func persisted(voters: [NodeID], terms: [UInt64], currentTerm: UInt64? = nil) -> PersistentState {
    var s = PersistentState.bootstrap(voters: voters)
    s.entries = terms.enumerated().map { i, t in
        LogEntry(index: UInt64(i + 1), term: t, kind: .normal, data: Array("t\(t)i\(i + 1)".utf8))
    }
    s.hardState.term = currentTerm ?? (terms.last ?? 0)
    return s
}

extension Array where Element == Action {
    var messages: [Message] {
        compactMap { if case .send(let m) = $0 { return m } else { return nil } }
    }
}

extension TestCluster {
    /// Starts a fresh, empty node that will be added to the cluster by a config change.
    mutating func addJoiningNode(_ id: NodeID, config: RaftConfig = TestCluster.config()) {
        ids.append(id)
        var c = config
        c.randomSeed = UInt64(ids.count) * 101
        nodes[id] = RaftNode(id: id, config: c, state: .joining)
    }
}
