import EmberCore

/// Settings of one node's front. Every limit is named here, with its default.
public struct NodeConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9000
    public var dataDirectory = "./ember-data"
    /// Namespace used when a request names none (`ns` absent).
    public var defaultNamespace = "default"
    public var rules: RulesDocument = .open
    /// HTTPS/WSS for clients (`--tls-cert/--tls-key`); nil serves plain HTTP/WS.
    public var clientTLS: ClientTLS?
    /// Turns presented tokens into identities. The default is protected mode's emulator rules.
    public var tokenVerifier: any TokenVerifier = EmulatorTokenVerifier()
    /// Largest request body accepted; bigger ones are refused before parsing (413).
    public var maxRequestBytes = 32 * 1024 * 1024
    /// Most nodes one write may contain.
    public var maxWriteNodes = 2_000_000
    /// Most parts in one multi-path update.
    public var maxUpdateParts = 10_000
    /// Interval of SSE keep-alive events.
    public var keepAliveSeconds: Double = 30
    /// WebSocket connections plus SSE streams one client address may hold open (0: no limit).
    public var maxConnectionsPerAddress = 1_000
    /// REST requests per second on one keep-alive connection (WebSocket requests:
    /// `realtimeLimits.session.requestRate`).
    public var restRequestRate = RequestRateLimit()
    /// REST requests plus wire messages per second from one client address, over all its
    /// connections. Off by default (`perSecond` 0): benchmarks and proxies send from one address.
    public var addressRequestRate: RequestRateLimit = {
        var r = RequestRateLimit()
        r.perSecond = 0
        return r
    }()
    /// Client addresses whose request budget is tracked at once.
    public var maxTrackedAddresses = RequestRateByAddress.defaultMaxAddresses
    public var streamLimits = StreamHub.Limits()
    public var realtimeLimits = RealtimeHub.Limits()
    /// Threads reading stored data for clients, and reads that may wait for one (`ReadPool`).
    public var readPool = ReadPool.Limits()
    /// Health, readiness, metrics, status and backup endpoints (Admin/).
    public var operations = OperationsConfiguration()
    /// Durable onDisconnect: the lease after which the leader runs a silent node's sessions' writes.
    public var onDisconnect = OnDisconnectKeeper.Settings()

    public init() {}
}
