import EmberNodeStore
import EmberRaft
import EmberRaftHost
import EmberStorage
import Foundation

/// How the driver turns each input into events for the core (whose actions join the turn) and
/// keeps its request bookkeeping.
extension RaftHost {
    func handle(_ input: Input) {
        let now = ContinuousClock.now
        switch input {
        case .tick:
            step(.tick)
            learnerPriority.tick()
            requests.expire(now: now, noLeaderSeconds: config.noLeaderTimeoutSeconds)
            expireAdmin(now: now)
            retryAdmin()
            syncLazyCommitsIfDue(now: now)
            if node.leaderID != nil {
                for id in requests.readsDue(now: now) { issueRead(id, now: now) }
            }
        case .write(let w):
            // Queued in arrival order; `routeQueued` proposes or forwards at the end of the turn.
            requests.park(w)
        case .writes(let ws):
            for w in ws { requests.park(w) }
        case .read(let r):
            issueRead(requests.addRead(r), now: now)
        case .frame(.raft(let m)):
            guard m.to == node.id else { return }  // misaddressed: the state machine traps on those
            lastHeard.withLock { $0[m.from] = now }
            if LatencyMarks.enabled {
                if case .appendEntries(let a) = m.payload, let first = a.entries.first {
                    LatencyMarks.mark(.stepped, first.index, a.entries.last!.index, peer: m.from)
                } else if case .appendEntriesResponse(let r) = m.payload, r.success {
                    LatencyMarks.mark(.ackStepped, r.index, r.index, peer: m.from)
                }
            }
            step(.receive(m))
        case .frame(.forward(let req)):
            serveForward(req)
        case .frame(.forwardReply):
            break  // this node forwards batches only (an answer to a single forward is stale)
        case .frame(.forwardBatch(let batch)):
            // A leader proposes it with the rest of the turn's writes (`proposeTurn`).
            if node.role == .leader { requests.heldBatches.append(batch) } else { bounce(batch) }
        case .frame(.forwardBatchReply(let reply)):
            batchAnswered(reply, now: now)
        case .admin(let a):
            routeAdmin(a)
        case .frame(.admin(let f)):
            let deadline = now + .milliseconds(Int64(config.adminTimeoutSeconds * 1000))
            serveAdmin(PendingAdmin(operation: f.operation, origin: .remote(f.origin, requestID: f.requestID), deadline: deadline))
        case .frame(.adminReply(let r)):
            adminAnswered(r)
        case .frame(.notMember(let notice)):
            heard(notice)
        case .frame(.hashCheck):
            break  // the corruption check's (ReplicatedDataStore routes them there)
        case .handOver:
            let progress = node.status.progress
            guard node.role == .leader,
                  let target = progress.max(by: { ($0.value.matchIndex, $1.key) < ($1.value.matchIndex, $0.key) })?.key
            else { return }
            logger.info("handing leadership over before stopping", metadata: ["to": "\(target)"])
            step(.transferLeadership(to: target))
        case .snapshotPrepared(let info):
            snapshotPrepared(info)
        case .applyDone:
            break  // the loop takes the outcomes after the turn's inputs (`settleApplies`)
        case .persistDone:
            break  // taken after the turn's inputs (`settlePersist`)
        case .flushLearners:
            learnerFlush = nil
            step(.flushLearners)
        case .stop:
            break
        }
    }

    /// The leader fixes the entry's timestamp (what `{".sv":"timestamp"}` resolves to on every
    /// replica): its wall clock, but never below `lastStamp`, the highest timestamp in its log
    /// (derived from the log at start, raised by every entry it persists or installs), so server
    /// timestamps never go backwards across leader changes, even under a leader whose clock is
    /// behind. Equal timestamps are allowed (they are milliseconds, as Firebase's): stamping
    /// `lastStamp + 1` instead would let a busy leader run ahead of real time.
    /// Forwarded writes are validated again here (the follower that took one may run another
    /// version): this is the last check an entry gets, since every replica appends the leader's
    /// entries unchecked (`append(validated:)`).
    func stamp(_ payload: [UInt8], validate: Bool = true) throws -> [UInt8] {
        validate ? try checkedStamp(payload).bytes : try restamp(payload)
    }

    /// `stamp` with the check, also returning the entry it decoded for it (timestamp set), so the
    /// write that appends it need not decode it again (`DecodedEntries`).
    func checkedStamp(_ payload: [UInt8]) throws -> (bytes: [UInt8], entry: EmberStorage.LogEntry) {
        var entry = try EmberStorage.LogEntry(decoding: payload)
        try store.validate(entry: entry, encodedBytes: payload.count)
        let bytes = try restamp(payload)
        entry.timestamp = lastStamp
        return (bytes, entry)
    }

    private func restamp(_ payload: [UInt8]) throws -> [UInt8] {
        let wall = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        lastStamp = max(lastStamp, wall)
        // Only the header changes: the entry is encoded once, by the node the client wrote to.
        return try EmberStorage.LogEntry.restamped(payload, index: 0, term: 0, timestamp: lastStamp)
    }

    /// A follower of an earlier version forwarded one client write to us (this version forwards
    /// batches, `proposeTurn`); answered so a rolling upgrade keeps its writes flowing.
    func serveForward(_ req: ForwardRequest) {
        func reply(_ result: ForwardReply.Result) {
            transport.send(.forwardReply(ForwardReply(from: node.id, requestID: req.requestID, result: result)), to: req.from)
        }
        guard node.role == .leader else {
            reply(.notLeader(hint: node.leaderID))
            return
        }
        let stamped: [UInt8]
        do { stamped = try stamp(req.payload) } catch {
            reply(.refused("invalid write: \(error)"))
            return
        }
        for a in step(.propose(stamped)) {
            switch a {
            case .proposalAccepted(let index, let term): reply(.accepted(index: index, term: term))
            case .proposalRejected(.notLeader(let hint)): reply(.notLeader(hint: hint))
            case .proposalRejected: reply(.notLeader(hint: nil))
            default: break
            }
        }
    }

    func issueRead(_ id: UInt64, now: ContinuousClock.Instant) {
        guard requests.reads[id] != nil else { return }
        requests.readIssuedAt[id] = now
        step(.readIndex(id: id))
    }
}
