import EmberCore
import EmberSyncTree
import Foundation
import Synchronization

/// One observer: the query it watches, the event type it wants and where its callbacks go.
struct Registration: Sendable {
    let handle: UInt
    let query: SyncQuery
    let eventType: DataEventType
    let onEvent: @Sendable (DataSnapshot, String?) -> Void
    let onCancel: (@Sendable (any Error) -> Void)?
    /// `.info` paths live in the local info tree, never on the server.
    var isInfo: Bool { query.path.first == ".info" }
}

/// Handles that are still registered, readable from any thread: a callback already queued for a
/// removed observer checks here and is dropped (the SDK guarantees no calls after removal).
final class HandleRegistry: Sendable {
    private let state = Mutex<(next: UInt, active: Set<UInt>)>((1, []))

    func allocate() -> UInt {
        state.withLock { s in
            let h = s.next
            s.next += 1
            s.active.insert(h)
            return h
        }
    }

    func isActive(_ h: UInt) -> Bool { state.withLock { $0.active.contains(h) } }
    func deactivate(_ h: UInt) { _ = state.withLock { $0.active.remove(h) } }
}

/// The sync tree's listen requests, forwarded to the connection. A separate object because the
/// sync tree needs its provider before the Repo is fully initialised.
final class ListenForwarder: ListenProvider {
    weak var repo: Repo?

    func startListening(_ query: SyncQuery, tag: Int?) { repo?.startServerListen(query, tag: tag) }
    func stopListening(_ query: SyncQuery, tag: Int?) { repo?.stopServerListen(query, tag: tag) }
}

/// The `.info` tree never talks to the server: data is pushed into it by the Repo.
final class NoListens: ListenProvider {
    func startListening(_ query: SyncQuery, tag: Int?) {}
    func stopListening(_ query: SyncQuery, tag: Int?) {}
}
