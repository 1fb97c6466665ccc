import EmberCore
import EmberProtocol

/// emberd's side of `WireServerSession`: its identities, listens and onDisconnect writes.
enum EmberWire: WireServerContext {
    typealias Identity = EmberNodeStore.Identity
    typealias Listen = WireListen
    typealias OnDisconnect = OnDisconnectWrite

    static func claims(of identity: Identity) -> JSON? { identity.authVariable }

    static func expiry(of identity: Identity) -> Int64? {
        if case .user(_, let expiresAt) = identity { return expiresAt }
        return nil
    }

    static func outranksTokens(_ identity: Identity) -> Bool { identity.isAdmin }

    static func cancel(_ writes: [OnDisconnectWrite], at path: Path) -> [OnDisconnectWrite] {
        OnDisconnectWrite.cancel(writes, at: path)
    }
}
