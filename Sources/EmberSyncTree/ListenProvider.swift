import EmberCore

/// Receives the server listens the sync tree needs. `tag` is set for filtering queries only; the
/// host sends `SyncTree.serverHash(for:)` with the listen and routes tagged data back with it.
public protocol ListenProvider: AnyObject {
    func startListening(_ query: SyncQuery, tag: Int?)
    func stopListening(_ query: SyncQuery, tag: Int?)
}
