// Cluster membership (voter set) and its wire encoding inside config-change entries.

/// The set of voting members. Kept sorted so iteration is deterministic
/// (Swift's `Set`/`Dictionary` order varies between processes, which would break seeded replay).
public struct Membership: Sendable, Hashable, CustomStringConvertible {
    public private(set) var voters: [NodeID]

    public init(voters: [NodeID]) {
        self.voters = Array(Set(voters)).sorted()
    }

    public func contains(_ id: NodeID) -> Bool { voters.contains(id) }

    /// Smallest number of voters that forms a majority.
    public var quorum: Int { voters.count / 2 + 1 }

    public var description: String { "{" + voters.joined(separator: ",") + "}" }

    /// Applies a single-server change. Returns nil when the change is a no-op.
    public func applying(_ change: ConfigChange) -> Membership? {
        switch change {
        case .addVoter(let id):
            return contains(id) ? nil : Membership(voters: voters + [id])
        case .removeVoter(let id):
            return contains(id) ? Membership(voters: voters.filter { $0 != id }) : nil
        }
    }

    /// Encoding: count (u32 LE) followed by each id as length (u32 LE) + UTF-8 bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func put(_ v: Int) {
            let u = UInt32(v)
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: u >> UInt32(shift))) }
        }
        put(voters.count)
        for v in voters {
            let bytes = Array(v.utf8)
            put(bytes.count)
            out.append(contentsOf: bytes)
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
        func get() -> Int? {
            guard pos + 4 <= bytes.count else { return nil }
            var u: UInt32 = 0
            for i in 0..<4 { u |= UInt32(bytes[pos + i]) << UInt32(8 * i) }
            pos += 4
            return Int(u)
        }
        guard let count = get() else { return nil }
        var ids: [NodeID] = []
        for _ in 0..<count {
            guard let len = get(), pos + len <= bytes.count else { return nil }
            ids.append(String(decoding: bytes[pos..<pos + len], as: UTF8.self))
            pos += len
        }
        return (Membership(voters: ids), pos)
    }
}

/// The data of a `.configChange` entry: the voter set after the change, then opaque host context
/// (for Ember: the members' peer addresses), so a replica learns both from the entry alone.
/// With an empty context the encoding is exactly `Membership.encoded()`.
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

/// A single-server membership change (Ongaro's thesis, section 4.1).
public enum ConfigChange: Sendable, Hashable {
    case addVoter(NodeID)
    case removeVoter(NodeID)
}
