import Foundation

/// The WebSocket URLs a connection tries, one at a time: the ones the app gave, then the ones
/// the last handshake named (Ember's `en` field: the cluster's client URLs), so a client given
/// one node of a cluster can fail over to the others. Pure: no I/O, no clock.
///
/// Learned URLs are the nodes' client URLs (`http(s)://host[:port]`) turned into WebSocket URLs
/// with the given URLs' path and query (`/.ws?v=5&ns=...`). Every URL appears once (compared by
/// scheme, host and port); a handshake's list replaces the previous one (a node removed from
/// the cluster is dropped), a handshake without the field changes nothing.
struct NodeList: Sendable, Equatable {
    /// Learned URLs kept (the handshake comes from a server, so its list is bounded).
    static let maxLearned = 16
    /// Longer client URLs in a handshake are skipped.
    static let maxURLLength = 2_048

    /// The app's URLs, deduplicated, in its order.
    private(set) var given: [String]
    /// From the last handshake that named nodes, minus the given ones.
    private(set) var learned: [String] = []
    /// The URL in use (or to be tried next).
    private(set) var current: String
    /// Path and query of the first given URL, appended to learned origins.
    private let suffix: String

    init(given urls: [String]) {
        precondition(!urls.isEmpty, "a connection needs at least one URL")
        var seen = Set<String>()
        given = urls.filter { seen.insert(Self.key(of: $0)).inserted }
        current = given[0]
        suffix = Self.split(urls[0]).suffix
    }

    /// Every URL in the order they are tried.
    var all: [String] { given + learned }

    /// Replaces the learned URLs with the nodes of a handshake (client URLs). Bad or overlong
    /// entries and ones already known are skipped; at most `maxLearned` are kept.
    mutating func learn(clientURLs: [String]) {
        var seen = Set(given.map(Self.key(of:)))
        var next: [String] = []
        for url in clientURLs where next.count < Self.maxLearned {
            guard url.utf8.count <= Self.maxURLLength, let origin = Self.websocketOrigin(ofClientURL: url),
                  seen.insert(origin.lowercased()).inserted else { continue }
            next.append(origin + suffix)
        }
        learned = next
    }

    /// Moves to the URL after the current one (round-robin): called when an attempt fails or a
    /// connection drops. A current URL that is no longer listed restarts at the first.
    mutating func advance() {
        let list = all
        guard let i = list.firstIndex(of: current) else {
            current = list[0]
            return
        }
        current = list[(i + 1) % list.count]
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
