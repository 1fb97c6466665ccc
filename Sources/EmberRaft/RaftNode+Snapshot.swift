// Snapshots: host-driven compaction and chunked InstallSnapshot for lagging followers.
//
// Raft holds no snapshot bytes. Compaction records only the compaction point: the host's state
// machine is durable by itself. When a follower is behind the retained log, the leader asks the
// host to prepare a readable image of its state machine (`.prepareSnapshot` →
// `Event.snapshotReady(index:size:)`) and then asks it for byte ranges of that image
// (`.sendSnapshotChunk`), a few in flight per follower. The follower hands each in-order chunk
// to its host (`.stageSnapshotChunk`) and, after the last one, has it installed atomically
// (`.persistSnapshot(discardLog: true)`).

/// A follower's transfer in progress: from one leader in one term, for one snapshot.
struct IncomingSnapshot: Sendable, Hashable {
    var leader: NodeID
    var term: UInt64
    var metadata: SnapshotMetadata
    var totalSize: Int
    /// Bytes staged so far, in order.
    var received: Int
}

extension RaftNode {
    /// The host's state machine covers `index`; drop the log prefix it covers.
    mutating func compact(index requested: UInt64) {
        precondition(requested <= appliedIndex, "cannot compact beyond the applied index")
        var index = requested
        if role == .leader {
            // A follower installing a snapshot needs the entries after it: do not compact past a
            // snapshot being streamed to a follower that is alive (else it would need another).
            for pr in progress.values where pr.state == .snapshot && pr.snapshotIndex > 0 && pr.recentActive {
                index = min(index, pr.snapshotIndex)
            }
        }
        guard index > log.snapshotIndex else { return }  // already covered
        guard let t = log.term(at: index) else { preconditionFailure("index \(index) not in log") }
        let meta = SnapshotMetadata(index: index, term: t, membership: log.membership(at: index))
        log.compact(to: meta)
        out.persists.append(.persistSnapshot(meta, discardLog: false))
    }

    // MARK: Leader

    /// A prepared image a follower can still catch up from (entries after it are in the log).
    var usableSnapshotSource: SnapshotSource? {
        guard let s = snapshotSource, s.metadata.index >= log.snapshotIndex else { return nil }
        return s
    }

    /// The host prepared an image of its state machine at `index`.
    mutating func snapshotReady(index: UInt64, size: Int) {
        precondition(size > 0, "a snapshot image holds at least its header")
        guard index >= log.snapshotIndex, index <= appliedIndex, let t = log.term(at: index) else {
            return  // stale (compacted past it meanwhile): waiting followers ask again
        }
        let source = SnapshotSource(metadata: SnapshotMetadata(index: index, term: t, membership: log.membership(at: index)), size: size)
        snapshotSource = source
        guard role == .leader else { return }
        for peer in progress.keys.sorted() {
            guard let pr = progress[peer], pr.state == .snapshot else { continue }
            if pr.snapshotIndex != index || pr.snapshotSize != size { sendSnapshot(to: peer) }
        }
    }

    /// Starts (or restarts on the current image) streaming a snapshot to `peer`.
    mutating func sendSnapshot(to peer: NodeID) {
        guard var pr = progress[peer] else { return }
        guard let source = usableSnapshotSource else {
            if pr.state != .snapshot || pr.snapshotIndex != 0 {
                pr.becomeSnapshot(index: 0, size: 0)
                progress[peer] = pr
            }
            requestSnapshotSource()
            return
        }
        if pr.state != .snapshot || pr.snapshotIndex != source.metadata.index || pr.snapshotSize != source.size {
            pr.becomeSnapshot(index: source.metadata.index, size: source.size)
            progress[peer] = pr
        }
        sendSnapshotChunks(to: peer)
    }

    mutating func requestSnapshotSource() {
        if !out.other.contains(.prepareSnapshot) { out.other.append(.prepareSnapshot) }
    }

    /// Asks the host for the next chunks, up to `maxInflightSnapshotChunks` unacknowledged.
    mutating func sendSnapshotChunks(to peer: NodeID) {
        guard var pr = progress[peer], pr.state == .snapshot, pr.snapshotIndex > 0 else { return }
        guard let source = usableSnapshotSource, source.metadata.index == pr.snapshotIndex, source.size == pr.snapshotSize else {
            sendSnapshot(to: peer)  // the image changed or is too old: restart on a current one
            return
        }
        let chunk = config.snapshotChunkSize
        let window = config.maxInflightSnapshotChunks * chunk
        while pr.snapshotSent < pr.snapshotSize && pr.snapshotSent - pr.snapshotOffset < window {
            let length = min(chunk, pr.snapshotSize - pr.snapshotSent)
            out.other.append(.sendSnapshotChunk(SnapshotChunkRequest(
                from: id, to: peer, term: term, metadata: source.metadata, offset: pr.snapshotSent,
                length: length, totalSize: pr.snapshotSize)))
            pr.snapshotSent += length
        }
        progress[peer] = pr
    }

    /// Heartbeat response from a follower in snapshot state: nudge a stalled transfer.
    mutating func snapshotHeartbeat(to peer: NodeID) {
        guard var pr = progress[peer], pr.state == .snapshot else { return }
        guard pr.snapshotIndex > 0, let source = usableSnapshotSource, source.metadata.index == pr.snapshotIndex else {
            sendSnapshot(to: peer)  // still waiting for an image, or ours went stale: ask again
            return
        }
        // Acks reset the count; a whole heartbeat interval without one means a chunk or its ack
        // was lost: go back to the last acknowledged byte and resend from there.
        pr.snapshotStalls += 1
        if pr.snapshotStalls >= 2 {
            // Resend from what the follower last said it holds, when that is below what it
            // acknowledged before: it lost part of the transfer (it restarted assembling it), and
            // resending from the higher offset would only ever be answered with the lower one.
            // (A lower answer overtaken by a higher one only costs a resent window here.)
            pr.snapshotOffset = min(pr.snapshotOffset, pr.snapshotReported)
            pr.snapshotSent = pr.snapshotOffset
            pr.snapshotStalls = 0
        }
        progress[peer] = pr
        sendSnapshotChunks(to: peer)
    }

    mutating func handleSnapshotResponse(from peer: NodeID, snapshotIndex: UInt64, received: Int, done: Bool) {
        guard var pr = progress[peer] else { return }
        pr.recentActive = true
        if done {
            // The follower holds everything up to snapshotIndex; resume normal replication, unless
            // this is a late answer about an older snapshot than the one being streamed (leaving
            // snapshot state then would restart the current transfer from its first byte).
            _ = pr.acknowledge(snapshotIndex)
            if pr.state == .snapshot && pr.matchIndex >= max(pr.snapshotIndex, log.snapshotIndex) {
                pr.nextIndex = pr.matchIndex + 1
                pr.becomeProbe()
            }
            progress[peer] = pr
            if maybeCommit() { broadcastAppend() }
            if role == .leader { sendAppend(to: peer, sendIfEmpty: true) }
            return
        }
        guard pr.state == .snapshot, pr.snapshotIndex > 0, snapshotIndex == pr.snapshotIndex else {
            progress[peer] = pr  // a stale answer about another snapshot
            return
        }
        pr.snapshotReported = received
        if received == 0 && pr.snapshotOffset > 0 {
            // The follower lost the transfer (restarted): start over.
            pr.snapshotOffset = 0
            pr.snapshotSent = 0
        } else if received > pr.snapshotOffset && received <= pr.snapshotSize {
            pr.snapshotOffset = received
            pr.snapshotSent = max(pr.snapshotSent, received)
            pr.snapshotStalls = 0
        }
        progress[peer] = pr
        sendSnapshotChunks(to: peer)
    }

    // MARK: Follower

    mutating func handleSnapshotChunk(from leader: NodeID, _ c: SnapshotChunk) {
        let meta = c.metadata
        func reply(_ received: Int, done: Bool) {
            send(leader, .installSnapshotResponse(snapshotIndex: meta.index, receivedBytes: received, done: done))
        }
        guard c.offset >= 0, c.totalSize > 0, c.offset + c.data.count <= c.totalSize else { return }  // malformed
        if meta.index <= commitIndex || log.matches(index: meta.index, term: meta.term) {
            // Nothing new for us (e.g. a duplicate after installation), or our log already has
            // the covered entries (Log Matching): just learn they are committed.
            commitIndex = max(commitIndex, meta.index)
            // Drop a transfer in progress only if this makes it useless too: a late duplicate of
            // an older snapshot's chunk must not discard the newer one being assembled.
            if let inc = incomingSnapshot, inc.metadata.index <= commitIndex || log.matches(index: inc.metadata.index, term: inc.metadata.term) {
                incomingSnapshot = nil
            }
            reply(c.totalSize, done: true)
            return
        }
        let identity = (leader, term, meta, c.totalSize)
        if let inc = incomingSnapshot, (inc.leader, inc.term, inc.metadata, inc.totalSize) == identity {
            // Continuing the transfer in progress.
        } else {
            guard c.offset == 0 else {
                reply(0, done: false)  // we are not assembling this snapshot: restart it
                return
            }
            incomingSnapshot = IncomingSnapshot(leader: leader, term: term, metadata: meta, totalSize: c.totalSize, received: 0)
        }
        var inc = incomingSnapshot!
        if c.offset == inc.received && !c.data.isEmpty {
            out.persists.append(.stageSnapshotChunk(c))
            inc.received += c.data.count
        }
        // Otherwise a duplicate or a chunk after a gap: answer what we hold so the leader resends.
        incomingSnapshot = inc
        guard inc.received == inc.totalSize else {
            reply(inc.received, done: false)
            return
        }
        incomingSnapshot = nil
        install(meta)
        reply(c.totalSize, done: true)
    }

    private mutating func install(_ meta: SnapshotMetadata) {
        assert(meta.index > commitIndex)
        log.restore(meta)
        out.persists.append(.persistSnapshot(meta, discardLog: true))
        out.restore = meta
        commitIndex = meta.index
        appliedIndex = meta.index
        membership = meta.membership
        configIndex = meta.index
    }
}
