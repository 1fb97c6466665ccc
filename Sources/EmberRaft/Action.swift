// Outputs of the state machine and the contract the host must follow.
//
// HOST CONTRACT (persist-before-send):
//  1. Perform actions of one `step` in the order given, and steps in the order they happened.
//  2. Every `persist*` action must be durable (fsynced) before the host performs any *later*
//     `.send`, `.restoreSnapshot`, `.apply` or `.readReady` action — from this step or any later
//     one. Hosts typically buffer writes and fsync once before the first externally visible action.
//     One exception (thesis 10.2.1): a `.send` of `.appendEntries` or `.heartbeat` — a leader
//     replicating — may go out before the persists that precede it are durable, so the leader
//     writes its own new entries in parallel with sending them. It is safe because the state
//     machine counts its own log towards commitment only through `.persisted(through:term:)`.
//     Likewise a `.send` of `.heartbeatResponse`: it echoes the leader's read round and claims
//     nothing stored (a term learned with it and lost in a crash carries no vote), so a follower
//     whose write is slow still keeps its leader's lease (etcd sends its MsgHeartbeatResp alike).
//  2b. Once entries from `.persistEntries` are durable, step `.persisted(through:term:)` with the
//     last durable entry's index and term (every role; a leader cannot commit without it unless a
//     majority of the others hold the entries).
//  3. If the node crashes, un-synced writes may be lost; restart from what is durable.
//  4. `.apply` entries are committed; apply them to the host state machine in order. `.readReady`
//     is emitted after the `.apply` that brings the node to the read index, so serving the read
//     right when it is encountered is linearizable.

public enum Action: Sendable, Hashable {
    /// Durably store the hard state (term, vote, commit), replacing the previous one.
    case persistHardState(HardState)
    /// Durably store entries: delete every stored entry with index >= entries[0].index, then append.
    case persistEntries([LogEntry])
    /// Durably record the compaction point: stored entries with index <= its index may go.
    /// When `discardLog` is true a snapshot received from the leader is complete: atomically
    /// replace the state machine with the staged bytes (`.stageSnapshotChunk`) and delete every
    /// stored entry. A crash before that is durable must leave the previous state intact.
    case persistSnapshot(SnapshotMetadata, discardLog: Bool)
    /// Follower: write `chunk.data` at `chunk.offset` of the staging area for `chunk.metadata`
    /// (offset 0 starts over, discarding any earlier staging). Chunks arrive in order without
    /// gaps. Staging need not be durable: a restarted node has the transfer restarted from 0.
    case stageSnapshotChunk(SnapshotChunk)
    /// Send a message to a peer (best-effort; loss is fine).
    case send(Message)
    /// Leader: read `length` bytes at `offset` of the prepared snapshot (`Event.snapshotReady`)
    /// and send `request.message(data:)`. A send for the contract. If the host no longer has that
    /// snapshot it drops the request and prepares a new one (Raft restarts the transfer).
    case sendSnapshotChunk(SnapshotChunkRequest)
    /// Leader: a follower needs a snapshot newer than any prepared one. Prepare a readable image
    /// of the state machine at its applied index and answer with `Event.snapshotReady` (ignore
    /// this while one is being prepared; Raft repeats it while followers wait).
    case prepareSnapshot
    /// The state machine now is the snapshot installed by the preceding `.persistSnapshot`.
    case restoreSnapshot(SnapshotMetadata)
    /// Apply committed entries, in index order. `.noop`/`.configChange` entries are informational.
    case apply([LogEntry])
    /// The read `id` may be served from local state now (applied index >= `index`).
    case readReady(id: UInt64, index: UInt64)
    /// The read `id` cannot be served here (no leader, lost leadership, ...). Retry elsewhere/later.
    case readFailed(id: UInt64)
    /// A proposal was appended at `index` in `term`; it succeeded iff the entry applied at
    /// `index` has this `term`.
    case proposalAccepted(index: UInt64, term: UInt64)
    case proposalRejected(ProposalRejection)
}
