import EmberNodeStore
import EmberRaft
import EmberRaftHost
import EmberStorage
import Foundation

/// The host side of snapshot transfers; nothing here holds the whole state in memory.
///
/// Leader: when Raft asks (`.prepareSnapshot`), one snapshot file is written off the loop from a
/// single LMDB read transaction (`EmberStore.writeSnapshotFile`), then Raft learns its applied
/// index and size (`Event.snapshotReady`) and asks for byte ranges of it (`.sendSnapshotChunk`,
/// `RaftConfig.maxInflightSnapshotChunks` per follower), read from the file one chunk at a time.
/// Every follower that needs a snapshot shares the file; it is deleted after
/// `snapshotFileIdleSeconds` without requests.
///
/// Follower: each chunk is appended to a staging file as it arrives (`.stageSnapshotChunk`); the
/// complete file is installed in one store transaction reading one frame at a time (a crash
/// before its commit leaves the old state; the staging file is then discarded and the leader
/// restarts the transfer).
struct OutgoingSnapshot {
    let info: SnapshotFileInfo
    let handle: FileHandle
    var lastUse: ContinuousClock.Instant
}

extension RaftHost {
    /// An unused snapshot file is deleted after this long (a new one is written on demand).
    static let snapshotFileIdleSeconds: Int64 = 60

    static func snapshotPath(_ store: EmberStore, _ name: String) -> String {
        store.directory + "/raft-snapshot-\(name)"
    }

    static func removeSnapshotFiles(_ store: EmberStore) {
        for name in ["incoming", "outgoing", "outgoing.tmp"] {
            try? FileManager.default.removeItem(atPath: snapshotPath(store, name))
        }
    }

    // MARK: Leader

    /// Writes a snapshot file off the loop (the core asks for at most one at a time).
    func prepareSnapshot() {
        let store = self.store, logger = self.logger
        let path = Self.snapshotPath(store, "outgoing")
        // While a member of 0.6.0 (peer level 3) is in the cluster, the file carries trigger state
        // in the layout it reads (this build installs that layout too): it may be the one to ask.
        let legacy = !transport.peersSpeak(4, node.membership.members.filter { $0 != config.nodeID })
        snapshots.task = Task.detached {
            let started = ContinuousClock.now
            do {
                let info = try store.writeSnapshotFile(path: path, maxChunkBytes: RaftConfig.defaultSnapshotChunkSize,
                                                       legacyTriggers: legacy)
                logger.info("snapshot file written for followers", metadata: [
                    "index": "\(info.index)", "bytes": "\(info.size)", "seconds": "\(ContinuousClock.now - started)",
                    "triggerLayout": "\(legacy ? "0.6.0" : "current")"])
                self.enqueue(.snapshotPrepared(info), force: true)
            } catch {
                logger.error("writing the snapshot file failed", metadata: ["error": "\(error)"])
                self.enqueue(.snapshotPrepared(nil), force: true)
            }
        }
    }

    /// The file is ready: serve it from now on (an older one stays readable through its open
    /// handle until replaced here) and tell Raft what it holds.
    func snapshotPrepared(_ info: SnapshotFileInfo?) {
        guard let info, let handle = FileHandle(forReadingAtPath: Self.snapshotPath(store, "outgoing")) else {
            if info != nil { logger.error("snapshot file vanished") }
            _ = core.handle(.snapshotPrepareFailed)  // Raft asks again on the next heartbeat round
            return
        }
        try? snapshots.outgoing?.handle.close()
        snapshots.outgoing = OutgoingSnapshot(info: info, handle: handle, lastUse: .now)
        _ = core.handle(.snapshotPrepared(index: info.index, size: info.size))
    }

    /// Reads one chunk of the snapshot file and sends it.
    func sendSnapshotChunk(_ request: SnapshotChunkRequest) {
        // A member connected below level 4 (0.6.0) cannot read this build's trigger state: a file
        // written while every member spoke level 4 is not for it (a new one is written for it).
        let readable = snapshots.outgoing.map { $0.info.legacyTriggers || (transport.connectedLevel(request.to) ?? 4) >= 4 } ?? false
        guard readable, var out = snapshots.outgoing, out.info.index == request.metadata.index, out.info.size == request.totalSize else {
            // Not the file Raft means (deleted or replaced): Raft restarts on a new one.
            if core.handle(.snapshotUnavailable).contains(.prepareSnapshot) { prepareSnapshot() }
            return
        }
        let data: Data
        do {
            try out.handle.seek(toOffset: UInt64(request.offset))
            data = try out.handle.read(upToCount: request.length) ?? Data()
        } catch {
            logger.error("reading the snapshot file failed", metadata: ["error": "\(error)"])
            return
        }
        guard data.count == request.length else {
            logger.error("snapshot file shorter than recorded", metadata: ["offset": "\(request.offset)"])
            return
        }
        out.lastUse = .now
        snapshots.outgoing = out
        transport.send(.raft(request.message(data: [UInt8](data))), to: request.to)
    }

    /// Deletes the snapshot file once no follower has asked for it in a while.
    func expireSnapshotFile(now: ContinuousClock.Instant) {
        guard let out = snapshots.outgoing, !core.preparingSnapshot,
              now - out.lastUse > .seconds(Self.snapshotFileIdleSeconds) else { return }
        try? out.handle.close()
        snapshots.outgoing = nil
        try? FileManager.default.removeItem(atPath: Self.snapshotPath(store, "outgoing"))
    }

    func closeSnapshotFiles() {
        try? snapshots.outgoing?.handle.close()
        snapshots.outgoing = nil
        staging.close()
    }

    // MARK: Follower

    /// Appends a received chunk to the staging file (Raft hands them over in order).
    func stage(_ chunk: SnapshotChunk) {
        do { try staging.write(offset: chunk.offset, chunk.data) } catch {
            // Raft now counts the bytes as held; continuing would install a broken file.
            fatalStorage("stage snapshot chunk at \(chunk.offset)", error)
        }
    }

    /// The staged snapshot is complete: replace the store's state with it (one transaction),
    /// then store `tail`, the log Raft holds after it (installing empties the store's log; the
    /// core leaves it empty when Raft is already past this snapshot, HostCore `tail(after:)`).
    func installStaged(_ snapshot: SnapshotMetadata, tail: [EmberRaft.LogEntry]) async {
        guard snapshot.index > store.appliedIndex else { return }
        let started = ContinuousClock.now
        do {
            // The staged file's fsync can take long for a big snapshot: off the loop's event loop.
            let staging = self.staging
            try await Self.offLoop { try staging.finish() }
            try await store.installSnapshot(file: staging.path)
            guard store.appliedIndex == snapshot.index else {
                throw StorageError.corrupt("snapshot file holds index \(store.appliedIndex), expected \(snapshot.index)")
            }
            staging.discard()
            // The floor of server timestamps (`restamp`) comes with the installed state: a node
            // that caught up by snapshot and then leads never stamps below what it replaced.
            lastStamp = max(lastStamp, try store.appliedPosition().lastTimestamp)
            if !tail.isEmpty {
                let entries = try tail.map(RaftPersistence.storageEntry)
                lastStamp = max(lastStamp, entries.map(\.timestamp).max() ?? 0)
                try await store.append(entries: entries)
            }
        } catch {
            fatalStorage("install snapshot at \(snapshot.index)", error)
        }
        requests.replacedBySnapshot(through: snapshot.index)
        logger.info("installed snapshot from leader", metadata: [
            "index": "\(snapshot.index)", "seconds": "\(ContinuousClock.now - started)"])
        // The handlers block until listeners are resynchronised (the fan-out feed's `sync`): off
        // the loop's event loop, which goes on reading peers while the loop waits here (and
        // applies nothing later meanwhile).
        let handlers = stateReplacedHandlers.withLock { $0 }
        if !handlers.isEmpty { try? await Self.offLoop { for handler in handlers { handler() } } }
    }

    /// Runs blocking `work` on a thread of its own while the loop awaits it: the loop runs on the
    /// peer transport's event loop, which must go on reading peers meanwhile.
    static func offLoop(_ work: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { done.resume(with: Result { try work() }) }
        }
    }
}
