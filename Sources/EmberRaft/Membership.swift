// Cluster membership (voters and learners) and its wire encoding inside config-change entries.

/// The members of the cluster: voters, which elect leaders and form every quorum, and learners
/// (non-voting members), which receive the log and snapshots like any follower but neither vote,
/// campaign nor count toward the commit or read quorum. Both kept sorted so iteration is
/// deterministic (Swift's `Set`/`Dictionary` order varies between processes, which would break
/// seeded replay); the two sets are disjoint.
public struct Membership: Sendable, Hashable, CustomStringConvertible {
    public private(set) var voters: [NodeID]
    public private(set) var learners: [NodeID]

    public init(voters: [NodeID], learners: [NodeID] = []) {
        let v = Set(voters)
        self.voters = v.sorted()
        // A node named in both is a voter (the stronger role): never count it twice.
        self.learners = Set(learners).subtracting(v).sorted()
    }

    /// Whether `id` is a voter. (Most of Raft asks this; `isMember` includes learners.)
    public func contains(_ id: NodeID) -> Bool { voters.contains(id) }
    public func isLearner(_ id: NodeID) -> Bool { learners.contains(id) }
    /// A voter or a learner: replicated to, and not removed.
    public func isMember(_ id: NodeID) -> Bool { voters.contains(id) || learners.contains(id) }
    /// Voters then learners, each sorted.
    public var members: [NodeID] { voters + learners }

    /// Smallest number of voters that forms a majority (learners never count).
    public var quorum: Int { voters.count / 2 + 1 }

    public var description: String {
        "{" + voters.joined(separator: ",") + (learners.isEmpty ? "" : " learners:" + learners.joined(separator: ",")) + "}"
    }

    /// Applies a single-server change. Returns nil when the change is a no-op. Every change
    /// alters the voter set by at most one server, so the single-server rule (thesis 4.1) keeps
    /// old and new majorities overlapping; adding or removing a learner leaves it unchanged.
    public func applying(_ change: ConfigChange) -> Membership? {
        switch change {
        case .addVoter(let id):
            // Adding a learner as a voter is its promotion.
            return contains(id) ? nil : Membership(voters: voters + [id], learners: learners.filter { $0 != id })
        case .removeVoter(let id):
            guard isMember(id) else { return nil }
            return Membership(voters: voters.filter { $0 != id }, learners: learners.filter { $0 != id })
        case .addLearner(let id):
            return isMember(id) ? nil : Membership(voters: voters, learners: learners + [id])
        case .promoteLearner(let id):
            return isLearner(id) ? Membership(voters: voters + [id], learners: learners.filter { $0 != id }) : nil
        case .demoteVoter(let id):
            return contains(id) ? Membership(voters: voters.filter { $0 != id }, learners: learners + [id]) : nil
        }
    }

    /// Marks the voter count of an encoding followed by a learner list. Without learners the
    /// encoding is exactly the original one (count, ids), so configurations without learners
    /// stay readable by builds that predate them; with learners such a build fails to decode it
    /// (the count is out of reach) instead of taking the learners for voters.
    static let learnersFlag: UInt32 = 0x8000_0000

    /// Encoding: count (u32 LE) followed by each id as length (u32 LE) + UTF-8 bytes; with
    /// learners the count carries `learnersFlag` and the learners follow the same way.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func put(_ u: UInt32) {
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: u >> UInt32(shift))) }
        }
        func putIDs(_ ids: [NodeID]) {
            for v in ids {
                let bytes = Array(v.utf8)
                put(UInt32(bytes.count))
                out.append(contentsOf: bytes)
            }
        }
        put(UInt32(voters.count) | (learners.isEmpty ? 0 : Membership.learnersFlag))
        putIDs(voters)
        if !learners.isEmpty {
            put(UInt32(learners.count))
            putIDs(learners)
        }
        return out
    }

    /// Decodes `encoded()`. Returns nil for malformed input.
    public init?(decoding bytes: [UInt8]) {
        guard let (m, end) = Membership.decodePrefix(bytes), end == bytes.count else { return nil }
        self = m
    }

    /// Decodes an encoding at the start of `bytes`; returns it and where it ends.
    static func decodePrefix(_ bytes: [UInt8]) -> (Membership, Int)? {
        var pos = 0
        func get() -> UInt32? {
            guard pos + 4 <= bytes.count else { return nil }
            var u: UInt32 = 0
            for i in 0..<4 { u |= UInt32(bytes[pos + i]) << UInt32(8 * i) }
            pos += 4
            return u
        }
        func getIDs(_ count: Int) -> [NodeID]? {
            var ids: [NodeID] = []
            for _ in 0..<count {
                guard let len = get().map(Int.init), pos + len <= bytes.count else { return nil }
                ids.append(String(decoding: bytes[pos..<pos + len], as: UTF8.self))
                pos += len
            }
            return ids
        }
        guard let head = get() else { return nil }
        let hasLearners = head & learnersFlag != 0
        // Each id takes at least 4 bytes: a count beyond that is malformed (and not looped over).
        let count = Int(head & ~learnersFlag)
        guard count <= (bytes.count - pos) / 4, let voters = getIDs(count) else { return nil }
        var learners: [NodeID] = []
        if hasLearners {
            guard let n = get().map(Int.init), n > 0, n <= (bytes.count - pos) / 4, let ids = getIDs(n) else { return nil }
            learners = ids
        }
        return (Membership(voters: voters, learners: learners), pos)
    }
}

/// The data of a `.configChange` entry: the membership after the change, then opaque host
/// context (for Ember: the members' peer addresses), so a replica learns both from the entry
/// alone. With an empty context the encoding is exactly `Membership.encoded()`.
public struct ConfigEntry: Sendable, Hashable {
    public var membership: Membership
    public var context: [UInt8]

    public init(membership: Membership, context: [UInt8] = []) {
        self.membership = membership
        self.context = context
    }

    public func encoded() -> [UInt8] { membership.encoded() + context }

    public init?(decoding bytes: [UInt8]) {
        guard let (m, end) = Membership.decodePrefix(bytes) else { return nil }
        self.init(membership: m, context: Array(bytes[end...]))
    }
}

/// A single-server membership change (Ongaro's thesis, section 4.1), learners included.
public enum ConfigChange: Sendable, Hashable {
    /// Adds a voter (a learner named here is promoted, with `promoteLearner`'s catch-up check).
    case addVoter(NodeID)
    /// Removes a member, voter or learner.
    case removeVoter(NodeID)
    /// Adds a non-voting member (at most `RaftConfig.maxLearners`).
    case addLearner(NodeID)
    /// Makes a learner a voter; refused while it is more than `RaftConfig.maxPromotionLag`
    /// entries behind the leader's log (it would hold the commit quorum back until caught up).
    case promoteLearner(NodeID)
    /// Makes a voter a learner.
    case demoteVoter(NodeID)
}
