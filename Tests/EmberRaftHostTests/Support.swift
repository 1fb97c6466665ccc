import EmberRaft
import EmberRaftHost

let voters: [NodeID] = ["n1", "n2", "n3"]

/// A log of entries 1...count in term 1 (payload "i<index>").
func entries(_ range: ClosedRange<UInt64>, term: UInt64 = 1) -> [LogEntry] {
    range.map { LogEntry(index: $0, term: term, kind: .normal, data: Array("i\($0)".utf8)) }
}

/// Follower n3 in term 1 whose log holds 1...3, all committed and applied.
func followerCore() -> HostCore {
    var s = PersistentState.bootstrap(voters: voters)
    s.entries = entries(1...3)
    s.hardState = HardState(term: 1, votedFor: nil, commit: 3)
    return HostCore(node: RaftNode(id: "n3", config: RaftConfig(electionTick: 10, heartbeatTick: 2), state: s, appliedIndex: 3))
}

/// n1 elected leader of term 2 over a log 1...3 (term 1), its no-op (index 4) not yet durable.
func leaderCore() -> (core: HostCore, plan: [HostEffect]) {
    var s = PersistentState.bootstrap(voters: voters)
    s.entries = entries(1...3)
    s.hardState = HardState(term: 1, votedFor: nil, commit: 3)
    var core = HostCore(node: RaftNode(id: "n1", config: RaftConfig(electionTick: 10, heartbeatTick: 2, preVote: false),
                                       state: s, appliedIndex: 3))
    _ = core.handle(.event(.campaign))
    _ = core.handle(.endTurn(inputWaiting: false))
    _ = core.handle(.event(.receive(Message(from: "n2", to: "n1", term: 2, payload: .requestVoteResponse(granted: true)))))
    return (core, core.handle(.endTurn(inputWaiting: false)))
}

func append(_ es: [LogEntry], prev: UInt64, commit: UInt64, term: UInt64 = 1) -> Event {
    .receive(Message(from: "n1", to: "n3", term: term,
                     payload: .appendEntries(AppendEntries(prevIndex: prev, prevTerm: 1, entries: es, commit: commit))))
}

/// A one-chunk snapshot through `index` from leader n1 (term 1).
func snapshotChunk(_ index: UInt64, data: [UInt8]) -> Event {
    let meta = SnapshotMetadata(index: index, term: 1, membership: Membership(voters: voters))
    let c = SnapshotChunk(metadata: meta, offset: 0, totalSize: data.count, data: data, done: true)
    return .receive(Message(from: "n1", to: "n3", term: 1, payload: .installSnapshot(c)))
}

extension HostEffect {
    var isPersist: Bool { if case .persist = self { true } else { false } }
    var sentMessage: Message? { if case .send(let m) = self { m } else { nil } }
    var persisted: HostPersist? { if case .persist(let p) = self { p } else { nil } }
    var applied: [LogEntry]? { if case .apply(let es, _) = self { es } else { nil } }
}

/// A runtime's durable state as the effects leave it, performed strictly in order: what an
/// executor does with them, without the I/O (the state machine is the list of applied indexes).
struct ModelStore {
    var hard = HardState()
    var log: [UInt64: LogEntry] = [:]
    var applied: [UInt64] = []
    var staged: [UInt8] = []
    var state: [UInt8] = []
    var appliedIndex: UInt64 = 0
    var reports: [(UInt64, UInt64)] = []

    mutating func perform(_ effects: [HostEffect]) {
        for effect in effects {
            switch effect {
            case .persist(let p):
                if let hs = p.hardState { hard = hs }
                if let first = p.entries.first { log = log.filter { $0.key < first.index } }
                for e in p.entries { log[e.index] = e }
                apply(p.apply)
                if let r = p.report { reports.append(r) }
            case .apply(let es, _):
                apply(es)
            case .stageSnapshotChunk(let c):
                if c.offset == 0 { staged = [] }
                precondition(staged.count == c.offset, "chunk staged out of order")
                staged += c.data
            case .installSnapshot(let meta, let tail):
                state = staged
                appliedIndex = meta.index
                log = [:]
                for e in tail { log[e.index] = e }
            default:
                break
            }
        }
    }

    private mutating func apply(_ es: [LogEntry]) {
        for e in es {
            precondition(e.index == appliedIndex + 1, "applied \(e.index) after \(appliedIndex)")
            precondition(log[e.index] == e, "applied \(e.index) before it was stored")
            applied.append(e.index)
            appliedIndex = e.index
        }
    }
}
