import EmberCore
import EmberRaft
import Foundation

/// Where each member can be reached: the host context of Raft config-change entries.
///
/// A membership change carries the whole directory (not just the changed member), so any replica
/// knows every member's peer address from the latest config entry alone. It is persisted as part
/// of the replicated state: the storage form of a config-change entry is a `set` of the directory
/// text at `/members` in the reserved namespace `MemberDirectory.namespace`, so a restarted node
/// reads it back from its tree, and snapshots (which copy the tree) carry it to new members.
/// Clients cannot read or write that namespace (ReplicatedDataStore refuses it).
public struct MemberDirectory: Sendable, Hashable {
    public struct Member: Sendable, Hashable, Codable {
        /// `host:port` of the member's peer listener.
        public var peer: String
        /// The member's client URL, when the operator gave it (for clients and tools).
        public var url: String?
        /// A non-voting member (learner). Omitted (nil) for voters, so a directory without
        /// learners is the same text builds before learners wrote and read.
        public var learner: Bool?

        public init(peer: String, url: String? = nil, learner: Bool = false) {
            self.peer = peer
            self.url = url
            self.learner = learner ? true : nil
        }

        public var isLearner: Bool { learner == true }
    }

    public var members: [NodeID: Member]

    public init(members: [NodeID: Member]) { self.members = members }

    /// Reserved storage namespace holding the directory (valid for storage, refused to clients).
    public static let namespace = "_ember_cluster"
    public static let path = Path(validated: ["members"])
    /// Named limits on what an admin may add (the directory rides in every config entry).
    public static let maxMembers = 64
    public static let maxURLBytes = 256

    public var voters: [NodeID] { members.filter { !$0.value.isLearner }.keys.sorted() }
    public var learners: [NodeID] { members.filter { $0.value.isLearner }.keys.sorted() }
    /// Raft's membership as this directory states it.
    public var membership: Membership { Membership(voters: voters, learners: learners) }

    public var addresses: [NodeID: PeerAddress] {
        members.compactMapValues { PeerAddress($0.peer) }
    }

    /// From the static configuration (`--peers`): addresses only.
    public init(peers: [NodeID: PeerAddress]) {
        members = peers.mapValues { Member(peer: $0.description) }
    }

    private struct Wire: Codable {
        var members: [String: Member]
    }

    /// Deterministic JSON text (sorted keys): the config entry context and the stored value.
    public func text() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(Wire(members: members))) ?? Data("{\"members\":{}}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    public init?(text: String) {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(text.utf8)) else { return nil }
        members = wire.members
    }

    public init?(context: [UInt8]) {
        guard !context.isEmpty else { return nil }
        self.init(text: String(decoding: context, as: UTF8.self))
    }

    public var context: [UInt8] { Array(text().utf8) }

    /// The status view: `{id: {"peer": ..., "url": ...}}`.
    public var json: JSON {
        .object(KeyMap(members.mapValues { m in
            var o: KeyMap<JSON> = ["peer": .string(m.peer)]
            if let url = m.url { o["url"] = .string(url) }
            if m.isLearner { o["learner"] = .bool(true) }
            return JSON.object(o)
        }))
    }
}
