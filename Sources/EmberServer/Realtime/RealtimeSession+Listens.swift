import EmberCore

/// A session's listens: the fan-out of committed changes to them, and their life (begun once the
/// rules allowed them, resynced after a snapshot install, revoked when the rules no longer allow them).
extension RealtimeSession {
    // MARK: - Fan-out

    /// Called in commit order for every change in this session's namespace.
    func deliver(_ change: CommittedChange) {
        deliver(SharedFrames(change: change))
    }

    /// As `deliver(_:)`, with untagged listens' frames shared with the other sessions of the
    /// same publish.
    func deliver(_ shared: SharedFrames) {
        state.withLock { s in
            guard !s.wire.isClosed else { return }
            var frames: [String] = []
            s.wire.forEachListen { l in frames += l.applyFrames(shared.change, shared: shared) }
            for frame in frames { enqueue(&s, frame: frame) }
        }
    }

    /// The change for the listen `key` only (one the hub's index found at `frames.path`); a
    /// listen ended meanwhile is skipped. An untagged listen on a socket queues the location's
    /// shared, already encoded buffer; its flush joins `batch` (one task per event loop).
    func deliver(_ frames: SharedPathFrames, key: String, batch: FlushBatch) {
        state.withLock { s in
            guard !s.wire.isClosed, let delivery = s.wire.withListen(key, { $0.delivery(of: frames.change, matched: true) }) else { return }
            switch delivery {
            case .nothing:
                return
            case .shared:
                if s.outbox != nil {
                    enqueueToSocket(&s, encoded: frames.encoded(for: s.outbox!.channel.eventLoop), batch: batch)
                } else {
                    for frame in frames.untagged {
                        enqueue(&s, frame: frame)
                        if s.wire.isClosed { return }
                    }
                }
            case .own(let messages):
                for frame in messages.flatMap({ WireFraming.split($0.serialized()) }) {
                    enqueue(&s, frame: frame, batch: batch)
                    if s.wire.isClosed { return }
                }
            }
        }
    }

    // MARK: - Listens

    /// The rules allowed listen `l` of request `r`: it joins the session (or is answered at once:
    /// a duplicate, one too many); the handler then reads its data (`.readListen`).
    func beginListen(r: Int64, _ l: Wire.ListenRequest) -> [Op] {
        drive { $0.beginListen(r: r, l) { WireListen(path: l.path, query: l.query, queryWire: l.queryWire, tag: l.tag) } }
    }

    /// Sends the initial data, then the `ok` (clients mark their cache complete on `ok`).
    func listenRead(r: Int64, _ l: Wire.ListenRequest, indexed: Bool, read: ReadResult) {
        drive { $0.listenRead(r: r, l, indexed: indexed) { $0.activate(with: read) } }
    }

    func endListen(_ l: Wire.ListenRequest) {
        drive { $0.endListen(l) }
    }

    /// Called under the state lock, so the hub's index sees a session's listens in order.
    func notifyIndex(_ s: inout State, _ path: Path, _ key: String, _ added: Bool) {
        guard s.indexed else { return }
        if let hook = listenIndexChanged.withLock({ $0 }) { hook(self, path, key, added) }
    }

    /// The hub forgets the session: its listens leave the index, and later ones stay out of it.
    func removeFromIndex() {
        state.withLock { s in
            for (path, key) in s.wire.indexedListens { notifyIndex(&s, path, key, false) }
            s.indexed = false
        }
    }

    /// The listened locations (for `resync`, which reads them outside the state lock).
    var listenedPaths: [Path] {
        state.withLock { s in s.wire.isClosed ? [] : s.wire.indexedListens.map(\.path) }
    }

    /// The node's state was replaced from a snapshot: listens the rules no longer allow are
    /// cancelled (`c`), the others get their complete data again (`WireListen.resync`), queued
    /// ahead of every later push. `reads` holds the new data by path; a listen begun after they
    /// were taken has none here and reads the new state itself.
    func resync(reads: [Path: ReadResult], stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        revokeListens(stillAllowed: stillAllowed)
        state.withLock { s in
            guard !s.wire.isClosed else { return }
            var messages: [JSON] = []
            s.wire.forEachListenSorted { l in
                if let read = reads[l.path] { messages += l.resync(with: read) }
            }
            for m in messages { enqueue(&s, m) }
        }
    }

    /// Cancels the listens the rules no longer let this connection read: each gets a `c` push,
    /// which clients surface as permission_denied.
    func revokeListens(stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        drive { $0.revokeListens { l, identity in stillAllowed(l.path, l.query, identity) } }
    }
}
