import Foundation

/// The WebSocket URLs a connection tries, one at a time: the ones the app gave, then the ones
/// the last handshake named (Ember's `en` field: the client URLs of the cluster's members and
/// learners), so a client given one node of a cluster can fail over to the others. Pure: no
/// I/O, no clock; randomness comes from a seed.
///
/// Learned URLs are the nodes' client URLs (`http(s)://host[:port]`) turned into WebSocket URLs
/// with the given URLs' path and query (`/.ws?v=5&ns=...`). Every URL appears once (compared by
/// scheme, host and port); a handshake's list replaces the previous one (a node removed from
/// the cluster is dropped), a handshake without the field changes nothing.
///
/// Spreading (issue 38; on when a seed is given): clients of one cluster should not all sit on
/// the node their app names first, or adding nodes (learners especially) would add no capacity.
/// So a spreading list starts at a random given URL, moves once to a random node of the first
/// handshake that names nodes (`handshake`; staying when the pick is where it is), and fails
/// over through its own shuffled order of the nodes, so the clients of a dead node scatter over
/// the others instead of all landing on the next one. Without a seed: the given order, first
/// URL first, round-robin.
struct NodeList: Sendable, Equatable {
    /// Learned URLs kept (the handshake comes from a server, so its list is bounded).
    static let maxLearned = 16
    /// Longer client URLs in a handshake are skipped.
    static let maxURLLength = 2_048

    /// The app's URLs, deduplicated, in its order.
    private(set) var given: [String]
    /// From the last handshake that named nodes, minus the given ones.
    private(set) var learned: [String] = []
    /// The nodes the last handshake that named any named, as URLs of `all` (a given URL for a
    /// given node), in its order.
    private(set) var named: [String] = []
    /// The URL in use (or to be tried next).
    private(set) var current: String
    /// The order failover walks: `all`, shuffled when spreading.
    private(set) var rotation: [String]
    /// Whether the one move to a random named node was made (or found unneeded).
    private(set) var spread = false
    /// nil: no spreading.
    private var random: NodeChoiceRandom?
    /// Path and query of the first given URL, appended to learned origins.
    private let suffix: String

    /// `seed`: spread connections (see the type), with choices replayable from it; nil: the
    /// given order.
    init(given urls: [String], seed: UInt64? = nil) {
        precondition(!urls.isEmpty, "a connection needs at least one URL")
        var seen = Set<String>()
        given = urls.filter { seen.insert(Self.key(of: $0)).inserted }
        suffix = Self.split(urls[0]).suffix
        random = seed.map(NodeChoiceRandom.init(seed:))
        rotation = given
        if var r = random {
            rotation = r.shuffled(given)
            random = r
        }
        current = rotation[0]
    }

    /// Every URL in the order they are tried.
    var all: [String] { given + learned }

    var isSpreading: Bool { random != nil }

    /// Replaces the learned URLs with the nodes of a handshake (client URLs). Bad or overlong
    /// entries and ones already known are skipped; at most `maxLearned` are kept.
    mutating func learn(clientURLs: [String]) {
        let givenKeys = Dictionary(given.map { (Self.key(of: $0), $0) }, uniquingKeysWith: { a, _ in a })
        var seen = Set<String>()
        var next: [String] = []
        var names: [String] = []
        for url in clientURLs where names.count < Self.maxLearned {
            guard url.utf8.count <= Self.maxURLLength, let origin = Self.websocketOrigin(ofClientURL: url),
                  seen.insert(origin.lowercased()).inserted else { continue }
            if let known = givenKeys[origin.lowercased()] {
                names.append(known)
            } else {
                next.append(origin + suffix)
                names.append(origin + suffix)
            }
        }
        let before = Set(all)
        learned = next
        if !names.isEmpty { named = names }
        guard Set(all) != before else { return }
        // The nodes changed: a new failover order (a spreading client's own shuffle).
        if var r = random {
            rotation = r.shuffled(all)
            random = r
        } else {
            rotation = all
        }
    }

    /// A handshake arrived naming `clientURLs` (its `en`; nil when it named none, which changes
    /// nothing): learns them and, on a spreading list's first handshake, picks a node uniformly
    /// among the named ones. Returns the URL to move to, or nil to stay. A list whose given URLs
    /// are exactly the named nodes stays (its first pick was already uniform over them).
    mutating func handshake(named clientURLs: [String]?) -> String? {
        if let clientURLs { learn(clientURLs: clientURLs) }
        guard var r = random, !spread else { return nil }
        spread = true
        guard !named.isEmpty, Set(named.map(Self.key(of:))) != Set(given.map(Self.key(of:))) else { return nil }
        let pick = named[r.below(named.count)]
        random = r
        guard pick != current else { return nil }
        current = pick
        return pick
    }

    /// Moves to the URL after the current one in the rotation: called when an attempt fails or
    /// a connection drops. A current URL that is no longer listed restarts at the first.
    mutating func advance() {
        guard let i = rotation.firstIndex(of: current) else {
            current = rotation[0]
            return
        }
        current = rotation[(i + 1) % rotation.count]
    }

    /// `http(s)://host[:port][/...]` → `ws(s)://host[:port]` (default ports dropped); nil for
    /// anything else. Database URLs go through the same function, so equal nodes compare equal.
    static func websocketOrigin(ofClientURL url: String) -> String? {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty,
              c.user == nil, c.password == nil,
              host.allSatisfy({ !$0.isWhitespace && $0 != "/" && $0 != "?" && $0 != "#" && $0 != "@" }) else { return nil }
        let secure: Bool
        switch scheme {
        case "http", "ws": secure = false
        case "https", "wss": secure = true
        default: return nil
        }
        // IPv6 literals keep their brackets in the URL.
        let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        var origin = (secure ? "wss://" : "ws://") + hostPart
        if let port = c.port, port != (secure ? 443 : 80) { origin += ":\(port)" }
        return origin
    }

    /// `ws://host:port/.ws?v=5` → (`ws://host:port`, `/.ws?v=5`).
    private static func split(_ url: String) -> (origin: String, suffix: String) {
        guard let scheme = url.range(of: "://") else { return (url, "") }
        let rest = url[scheme.upperBound...]
        guard let cut = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else { return (url, "") }
        return (String(url[..<cut]), String(url[cut...]))
    }

    /// Compared by origin, case-insensitively.
    private static func key(of url: String) -> String { split(url).origin.lowercased() }
}
