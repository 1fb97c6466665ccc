// Snapshots: host-driven compaction and chunked InstallSnapshot for lagging followers.

extension RaftNode {
    /// The host serialized its state machine at `index`; drop the log prefix it covers.
    mutating func compact(index: UInt64, data: [UInt8]) {
        precondition(index <= appliedIndex, "cannot snapshot beyond the applied index")
        guard index > log.snapshotIndex else { return }  // already covered by a newer snapshot
        guard let t = log.term(at: index) else { preconditionFailure("index \(index) not in log") }
        let snap = Snapshot(
            metadata: SnapshotMetadata(index: index, term: t, membership: log.membership(at: index)),
            data: data)
        log.compact(to: snap)
        out.persists.append(.persistSnapshot(snap, discardLog: false))
    }

    // MARK: Leader

    mutating func sendSnapshot(to peer: NodeID) {
        guard var pr = progress[peer] else { return }
        if pr.state != .snapshot || pr.snapshotIndex != log.snapshotIndex {
            pr.becomeSnapshot(index: log.snapshotIndex)
            progress[peer] = pr
        }
        sendSnapshotChunk(to: peer)
    }

    /// Sends the chunk starting at the follower's acknowledged offset (one chunk in flight).
    mutating func sendSnapshotChunk(to peer: NodeID) {
        guard var pr = progress[peer], pr.state == .snapshot else { return }
        if pr.snapshotIndex != log.snapshotIndex {
            // We compacted further meanwhile; stream the newer snapshot from the start.
            pr.becomeSnapshot(index: log.snapshotIndex)
            progress[peer] = pr
        }
        let data = log.snapshot.data
        let start = min(pr.snapshotOffset, data.count)
        let end = min(start + config.snapshotChunkSize, data.count)
        let chunk = SnapshotChunk(
            metadata: log.snapshot.metadata, offset: start, totalSize: data.count,
            data: Array(data[start..<end]), done: end == data.count)
        send(peer, .installSnapshot(chunk))
    }

    mutating func handleSnapshotResponse(from peer: NodeID, snapshotIndex: UInt64, received: Int, done: Bool) {
        guard var pr = progress[peer] else { return }
        pr.recentActive = true
        if done {
            // The follower holds everything up to snapshotIndex; resume normal replication.
            _ = pr.acknowledge(snapshotIndex)
            if pr.state == .snapshot {
                pr.nextIndex = pr.matchIndex + 1
                pr.becomeProbe()
            }
            progress[peer] = pr
            if maybeCommit() { broadcastAppend() }
            if role == .leader { sendAppend(to: peer, sendIfEmpty: true) }
            return
        }
        guard pr.state == .snapshot, snapshotIndex == pr.snapshotIndex else {
            progress[peer] = pr
            return
        }
        pr.snapshotOffset = received
        progress[peer] = pr
        sendSnapshotChunk(to: peer)
    }

    // MARK: Follower

    mutating func handleSnapshotChunk(from leader: NodeID, _ c: SnapshotChunk) {
        let meta = c.metadata
        func reply(_ received: Int, done: Bool) {
            send(leader, .installSnapshotResponse(snapshotIndex: meta.index, receivedBytes: received, done: done))
        }
        if meta.index <= commitIndex {
            // Nothing new for us (e.g. a duplicate after installation).
            incomingSnapshot = nil
            reply(c.totalSize, done: true)
            return
        }
        if incomingSnapshot?.metadata != meta {
            guard c.offset == 0 else {
                reply(0, done: false)  // we are not assembling this snapshot: restart it
                return
            }
            incomingSnapshot = Snapshot(metadata: meta, data: [])
        }
        var snap = incomingSnapshot!
        if c.offset == snap.data.count {
            snap.data.append(contentsOf: c.data)
        }
        incomingSnapshot = snap
        guard c.done, snap.data.count == c.totalSize else {
            reply(snap.data.count, done: false)
            return
        }
        incomingSnapshot = nil
        install(snap)
        reply(c.totalSize, done: true)
    }

    private mutating func install(_ snap: Snapshot) {
        let meta = snap.metadata
        assert(meta.index > commitIndex)
        if log.matches(index: meta.index, term: meta.term) {
            // Our log already has the covered entries; just learn they are committed.
            commitIndex = meta.index
            return
        }
        log.restore(snap)
        out.persists.append(.persistSnapshot(snap, discardLog: true))
        out.restore = snap
        commitIndex = meta.index
        appliedIndex = meta.index
        membership = meta.membership
        configIndex = meta.index
    }
}
