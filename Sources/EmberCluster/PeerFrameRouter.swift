import EmberNodeStore
import EmberRaft
import EmberStorage
import Synchronization

/// Where a peer frame goes, decided on the transport's handler before the Raft driver sees it:
/// hash reports to the corruption check; and while this node has no room for writes
/// (`SpaceGuard`, the NOSPACE alarm) replication that would need room is refused here, so the
/// driver never fails an append (a storage failure under Raft stops the node):
/// - AppendEntries carrying entries and snapshot chunks are dropped, as a lossy network would:
///   the leader sends them again, and this follower catches up once space is freed. The
///   majority commits without it.
/// - A follower's forwarded writes are refused (`NOSPACE: ...`, the client gets 507).
/// Everything else (votes, heartbeats, commit notices, answers) goes on to the driver; a
/// heartbeat is also answered here while the driver is held in a write (`StalledLoopHeartbeats`).
final class PeerFrameRouter: @unchecked Sendable {
    private let host: RaftHost
    private let space: SpaceGuard
    private let selfID: NodeID
    /// Set once, before the transport starts delivering frames.
    var transport: PeerTransport?
    /// Set right after the transport starts; reports arriving before it are dropped (the
    /// sender asks again at its next round).
    var check: CorruptionCheck? {
        get { checkBox.withLock { $0 } }
        set { checkBox.withLock { $0 = newValue } }
    }
    private let checkBox = Mutex<CorruptionCheck?>(nil)

    init(host: RaftHost, space: SpaceGuard, selfID: NodeID) {
        self.host = host
        self.space = space
        self.selfID = selfID
    }

    func route(_ frame: PeerFrame) {
        switch frame {
        case .hashCheck(let report):
            check?.receive(report)
            return
        case .raft(let m) where Self.needsRoom(m.payload) && !space.hasRoom:
            return
        case .raft(let m):
            if let answer = host.stalledHeartbeats.answer(m, selfID: selfID, now: .now) {
                transport?.send(.raft(answer), to: m.from)
            }
        case .forwardBatch(let batch) where !space.hasRoom:
            let refused = ForwardResult.refused(StoreRefusal.noSpace("the leader (\(selfID)) has no room for writes").message)
            transport?.send(.forwardBatchReply(ForwardBatchReply(from: selfID, batchID: batch.batchID,
                                                                 results: Array(repeating: refused, count: batch.payloads.count))),
                            to: batch.from)
            return
        default:
            break
        }
        if LatencyMarks.enabled, case .raft(let m) = frame {
            if case .appendEntries(let a) = m.payload, let first = a.entries.first {
                LatencyMarks.mark(.received, first.index, a.entries.last!.index, peer: m.from)
            } else if case .appendEntriesResponse(let r) = m.payload, r.success {
                LatencyMarks.mark(.ackReceived, r.index, r.index, peer: m.from)
            }
        }
        _ = host.enqueue(.frame(frame))
    }

    static func needsRoom(_ payload: Message.Payload) -> Bool {
        switch payload {
        case .appendEntries(let a): return !a.entries.isEmpty
        case .installSnapshot: return true
        default: return false
        }
    }
}
