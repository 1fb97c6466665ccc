import EmberCore

/// Server data the host knows from elsewhere (the client's disk cache), asked for when a new view
/// is created and the tree holds no complete server data for it (SDK: the persistence manager's
/// `serverCacheForQuery`). The tree itself stays pure: the host decides where the data comes from.
public protocol ServerCacheSource: AnyObject {
    /// Server data cached at `query.path`, or nil. Only complete data is used: a partial cache
    /// could raise events for children the server no longer has.
    func completeServerCache(for query: SyncQuery) -> Node?
}
