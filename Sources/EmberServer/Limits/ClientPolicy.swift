import EmberCore
import Foundation
import HTTPTypes
import NIOCore

/// What the node asks of every client, whichever front it comes through (REST and its fast
/// paths, SSE, the wire protocol): the request budgets per connection and per address, the
/// connection slots per address, and who a credential makes the client. One per node, held by
/// both fronts, so a client spreading its requests over REST and WebSockets meets one budget.
public final class ClientPolicy: Sendable {
    let config: NodeConfiguration
    /// The node's clock (ms since the epoch): token expiry, request budgets, push IDs.
    public let clock: @Sendable () -> Int64
    /// WebSocket connections and SSE streams per client address.
    public let connectionsPerAddress: ConnectionsPerAddress
    /// The request budget of each REST keep-alive connection (a wire session keeps its own:
    /// `RealtimeSession.Limits.requestRate`).
    let requestRate: RequestRateByConnection
    /// REST requests and wire messages per client address.
    public let addressRequestRate: RequestRateByAddress

    public init(config: NodeConfiguration, clock: @escaping @Sendable () -> Int64 = ClientPolicy.wallClockMillis) {
        self.config = config
        self.clock = clock
        connectionsPerAddress = ConnectionsPerAddress(limit: config.maxConnectionsPerAddress)
        requestRate = RequestRateByConnection(rate: config.restRequestRate)
        addressRequestRate = RequestRateByAddress(rate: config.addressRequestRate, maxAddresses: config.maxTrackedAddresses)
    }

    public static let wallClockMillis: @Sendable () -> Int64 = {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    // MARK: - Request budgets

    /// One REST request on `channel`: its connection's budget, then its address's.
    func admitREST(_ channel: (any Channel)?, now: Int64) -> Bool {
        requestRate.admit(channel, now: now) && addressRequestRate.admit(ClientCredentials.address(of: channel), now: now)
    }

    /// One wire request from `address` (the session's own budget is the session's).
    func admitWire(from address: String?, now: Int64) -> Bool {
        addressRequestRate.admit(address, now: now)
    }

    // MARK: - Identity

    /// A REST request's identity: `auth=` / `access_token=` or `Authorization: Bearer`, through the
    /// node's verifier; no credential is anonymous. An admin client certificate (`base`) outranks
    /// any token (the CLI sends `Bearer owner` by default), so its requests are admin whatever they
    /// carry. An admin's `auth_variable_override` replaces the identity (null: anonymous); others'
    /// is ignored, so it can never raise privileges.
    func restIdentity(_ req: RestRequest, headers: HTTPFields, channel: (any Channel)?, base: Identity = .anonymous) throws -> Identity {
        let token = ClientCredentials.token(query: req.authToken, headers: headers)
        var identity = base
        if token != nil && !base.isAdmin {
            do { identity = try config.identity(token: token, address: ClientCredentials.address(of: channel), now: clock()) } catch {
                throw error.restError
            }
        }
        if identity.isAdmin, let override = req.authOverride {
            identity = override.map { .user(claims: $0, expiresAt: nil) } ?? .anonymous
        }
        return identity
    }

    /// The identity a wire `auth`/`gauth` credential gives a connection from `address`.
    func verify(credential: String, address: String?, now: Int64) throws(AuthError) -> Identity {
        try config.tokenVerifier.identity(for: credential, address: address, now: now)
    }
}
