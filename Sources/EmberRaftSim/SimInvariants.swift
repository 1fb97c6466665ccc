// Safety invariants checked after every simulated step.

import EmberRaft

struct SimInvariants {
    private struct EntryKey: Hashable {
        var index: UInt64
        var term: UInt64
    }

    /// Election safety: the leader elected in each term.
    private var leaders: [UInt64: NodeID] = [:]
    /// Log matching: every (index, term) ever persisted maps to one payload and one previous term.
    private var persisted: [EntryKey: (fingerprint: UInt64, prevTerm: UInt64?)] = [:]
    /// Committed (applied somewhere) entries: never changed or lost.
    private var committed: [UInt64: (term: UInt64, fingerprint: UInt64)] = [:]
    private var maxCommitted: UInt64 = 0
    /// State machine fingerprint after applying each index: all replicas apply the same sequence.
    private var states: [UInt64: UInt64] = [:]

    static func fingerprint(_ e: LogEntry) -> UInt64 { fnv1a(e.data, seed: 0xcbf2_9ce4_8422_2325 ^ UInt64(e.kind.rawValue)) }

    /// Returns true when `node` is a newly observed leader.
    mutating func checkNode(_ node: RaftNode, time: Int) throws -> Bool {
        guard node.role == .leader else { return false }
        if let existing = leaders[node.term] {
            guard existing == node.id else {
                throw SimFailure(message: "election safety: \(existing) and \(node.id) both lead term \(node.term)", time: time)
            }
            return false
        }
        leaders[node.term] = node.id
        // Leader completeness: a new leader's log holds every committed entry.
        guard node.log.lastIndex >= maxCommitted else {
            throw SimFailure(message: "leader completeness: \(node.id) (term \(node.term)) lacks committed index \(maxCommitted)", time: time)
        }
        var idx = node.log.snapshotIndex + 1
        while idx <= maxCommitted {
            if let c = committed[idx], let e = node.log.entry(at: idx), c.term != e.term || c.fingerprint != Self.fingerprint(e) {
                throw SimFailure(message: "leader completeness: \(node.id) has a different entry at committed index \(idx)", time: time)
            }
            idx += 1
        }
        return true
    }

    mutating func recordPersisted(_ entries: [LogEntry], in log: RaftLog, node: NodeID, time: Int) throws {
        for e in entries {
            let key = EntryKey(index: e.index, term: e.term)
            let fp = Self.fingerprint(e)
            let prev = log.term(at: e.index - 1)
            if let seen = persisted[key] {
                if seen.fingerprint != fp {
                    throw SimFailure(message: "log matching: two different entries at index \(e.index) term \(e.term) (\(node))", time: time)
                }
                if let p = prev, let q = seen.prevTerm, p != q {
                    throw SimFailure(message: "log matching: entry \(e.index)/\(e.term) follows term \(p) on \(node) but \(q) elsewhere", time: time)
                }
                if seen.prevTerm == nil, let p = prev { persisted[key] = (fp, p) }
            } else {
                persisted[key] = (fp, prev)
            }
        }
    }

    mutating func recordCommitted(_ e: LogEntry, node: NodeID, time: Int) throws {
        let fp = Self.fingerprint(e)
        if let c = committed[e.index] {
            guard c.term == e.term && c.fingerprint == fp else {
                throw SimFailure(message: "state machine safety: \(node) applied a different entry at \(e.index) (term \(e.term) vs \(c.term))", time: time)
            }
        } else {
            committed[e.index] = (e.term, fp)
            maxCommitted = max(maxCommitted, e.index)
        }
    }

    mutating func recordState(index: UInt64, fingerprint: UInt64, node: NodeID, time: Int) throws {
        if let s = states[index] {
            guard s == fingerprint else {
                throw SimFailure(message: "replicas diverged: \(node) state after \(index) differs", time: time)
            }
        } else {
            states[index] = fingerprint
        }
    }

    /// Durability: what a node applied before crashing must survive in its durable state.
    func checkRestart(_ state: PersistentState, appliedBeforeCrash: UInt64, node: NodeID, time: Int) throws {
        let base = state.snapshot.index
        guard base + UInt64(state.entries.count) >= appliedBeforeCrash else {
            throw SimFailure(message: "durability: \(node) lost applied entries (had \(appliedBeforeCrash), disk has \(base + UInt64(state.entries.count)))", time: time)
        }
        for e in state.entries where e.index <= appliedBeforeCrash {
            if let c = committed[e.index], c.term != e.term || c.fingerprint != Self.fingerprint(e) {
                throw SimFailure(message: "durability: \(node) disk has a different committed entry at \(e.index)", time: time)
            }
        }
    }
}
