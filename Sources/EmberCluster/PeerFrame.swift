import EmberNodeStore
import EmberRaft
import NIOCore

// The peer channel's messages and their compact binary encoding.
//
// On the wire every frame is `[u32 big-endian body length][body]`; the body starts with a
// version byte and a kind byte. Integers are LEB128 varints (most are small: terms, indexes,
// counts), byte strings are a varint length then the bytes. The decoder trusts nothing: every
// length is checked against what is left, so a hostile or corrupt frame throws instead of
// allocating or trapping.

/// What one node sends another.
public enum PeerFrame: Sendable, Hashable {
    /// A Raft message (the state machine's traffic).
    case raft(Message)
    /// A follower hands a client write to the node it believes is the leader. `payload` is an
    /// encoded EmberStorage `LogEntry` (namespace + operation); the leader fixes the timestamp.
    case forward(ForwardRequest)
    /// The leader's answer to a forwarded write.
    case forwardReply(ForwardReply)
    /// A follower hands the leader a batch of client writes, in the order they reached it.
    case forwardBatch(ForwardBatch)
    /// The leader's answer to a batch: one result per write, in order.
    case forwardBatchReply(ForwardBatchReply)
    /// A follower hands an operator's membership / leadership request to the leader.
    case admin(AdminForward)
    /// The leader's answer to `admin`.
    case adminReply(AdminReply)
    /// "You are not a member": written back on a refused peer connection (the only frame that
    /// travels from the accepting side to the dialer). See `NotMemberNotice`.
    case notMember(NotMemberNotice)
    /// A member's state hash at an applied index (`CorruptionCheck`).
    case hashCheck(HashCheck)
}

public struct ForwardRequest: Sendable, Hashable {
    public var from: NodeID
    /// Chosen by the sender, unique among its outstanding forwards.
    public var requestID: UInt64
    public var payload: [UInt8]

    public init(from: NodeID, requestID: UInt64, payload: [UInt8]) {
        self.from = from
        self.requestID = requestID
        self.payload = payload
    }
}

public struct ForwardReply: Sendable, Hashable {
    /// Accepted at an index and term, bounced (not the leader), or refused for good.
    public typealias Result = ForwardResult

    public var from: NodeID
    public var requestID: UInt64
    public var result: Result

    public init(from: NodeID, requestID: UInt64, result: Result) {
        self.from = from
        self.requestID = requestID
        self.result = result
    }
}

/// A member's state hash at an applied index, for the corruption check (`CorruptionCheck`).
/// Peers of a version without it close the link on this frame (unknown kind) and reconnect.
public struct HashCheck: Sendable, Hashable {
    /// Longest hash text accepted (a SHA-1 is 40 hex digits).
    public static let maxHashBytes = 128
    public var from: NodeID
    public var appliedIndex: UInt64
    public var stateHash: String
    /// The sender asks for the receiver's hash at `appliedIndex` in return.
    public var ask: Bool

    public init(from: NodeID, appliedIndex: UInt64, stateHash: String, ask: Bool) {
        self.from = from
        self.appliedIndex = appliedIndex
        self.stateHash = stateHash
        self.ask = ask
    }
}

public struct ForwardBatch: Sendable, Hashable {
    public var from: NodeID
    /// Chosen by the sender; a follower has one batch at the leader at a time.
    public var batchID: UInt64
    /// Encoded EmberStorage `LogEntry`s, proposed in this order.
    public var payloads: [[UInt8]]

    public init(from: NodeID, batchID: UInt64, payloads: [[UInt8]]) {
        self.from = from
        self.batchID = batchID
        self.payloads = payloads
    }
}

public struct ForwardBatchReply: Sendable, Hashable {
    public var from: NodeID
    public var batchID: UInt64
    /// One per payload, in order; after the first `notLeader` every result is `notLeader`.
    public var results: [ForwardReply.Result]

    public init(from: NodeID, batchID: UInt64, results: [ForwardReply.Result]) {
        self.from = from
        self.batchID = batchID
        self.results = results
    }
}

public enum PeerFrameError: Error, Sendable, Equatable {
    case truncated
    case tooLarge(bytes: Int, limit: Int)
    case unknownVersion(UInt8)
    case unknownTag(String, UInt8)
    case trailingBytes(Int)
}

public enum PeerFrameCodec {
    /// Largest frame body accepted or produced. One storage entry may be 16 MiB and Raft always
    /// sends at least one entry per AppendEntries, so the limit leaves room for that plus headers.
    public static let maxFrameBytes = 32 << 20
    /// Largest snapshot (offsets and total size in InstallSnapshot chunks): 1 TiB.
    public static let maxSnapshotBytes = 1 << 40
    /// Length prefix size.
    public static let headerBytes = 4
    static let version: UInt8 = 1

    /// The frame with its length prefix, ready for the socket.
    public static func frame(_ f: PeerFrame) throws(PeerFrameError) -> [UInt8] {
        Array(try frameBuffer(f).readableBytesView)
    }

    /// The frame with its length prefix, encoded straight into the buffer the socket is handed
    /// (no body array copied behind a prefix, then into a buffer: a learner's batch is up to
    /// 2,048 entries, sent on the leader's turn).
    /// `entries`: an append's entries already encoded (`encodedEntries`, `AppendEncodings`:
    /// the same entries sent to several members are encoded once), written in place of
    /// encoding them again.
    public static func frameBuffer(_ f: PeerFrame, allocator: ByteBufferAllocator = ByteBufferAllocator(),
                                   entries: ByteBuffer? = nil) throws(PeerFrameError) -> ByteBuffer {
        let estimate = entries.map { 128 + $0.readableBytes } ?? estimatedBodyBytes(f)
        var w = FrameWriter(allocator.buffer(capacity: headerBytes + estimate))
        w.buffer.writeInteger(UInt32(0))  // the length, set once the body is written
        encode(f, &w, entries: entries)
        let body = w.buffer.readableBytes - headerBytes
        guard body <= maxFrameBytes else { throw .tooLarge(bytes: body, limit: maxFrameBytes) }
        w.buffer.setInteger(UInt32(body), at: w.buffer.readerIndex)
        return w.buffer
    }

    /// Room to reserve for `f`'s body: its entries' or chunk's bytes plus their headers, so a
    /// big append is not regrown while it is written.
    static func estimatedBodyBytes(_ f: PeerFrame) -> Int {
        guard case .raft(let m) = f else { return 128 }
        switch m.payload {
        case .appendEntries(let a): return a.entries.reduce(128) { $0 + $1.data.count + 24 }
        case .installSnapshot(let c): return 256 + c.data.count
        default: return 128
        }
    }

    /// Reads a length prefix: nil when fewer than 4 bytes are available.
    public static func bodyLength(_ header: some Collection<UInt8>) throws(PeerFrameError) -> Int? {
        guard header.count >= headerBytes else { return nil }
        let n = header.prefix(4).reduce(0) { ($0 << 8) | Int($1) }
        guard n <= maxFrameBytes else { throw .tooLarge(bytes: n, limit: maxFrameBytes) }
        return n
    }

    /// The frame's body (without the length prefix).
    public static func encode(_ f: PeerFrame) -> [UInt8] {
        var w = FrameWriter()
        encode(f, &w)
        return w.out
    }

    static func encode(_ f: PeerFrame, _ w: inout FrameWriter, entries: ByteBuffer? = nil) {
        w.u8(version)
        switch f {
        case .raft(let m):
            w.u8(1)
            w.string(m.from); w.string(m.to); w.varint(m.term)
            encodePayload(m.payload, &w, entries: entries)
        case .forward(let r):
            w.u8(2)
            w.string(r.from); w.varint(r.requestID); w.bytes(r.payload)
        case .forwardReply(let r):
            w.u8(3)
            w.string(r.from); w.varint(r.requestID)
            encodeForwardResult(r.result, &w)
        case .forwardBatch(let b):
            w.u8(7)
            w.string(b.from); w.varint(b.batchID)
            w.varint(UInt64(b.payloads.count))
            for p in b.payloads { w.bytes(p) }
        case .forwardBatchReply(let r):
            w.u8(8)
            w.string(r.from); w.varint(r.batchID)
            w.varint(UInt64(r.results.count))
            for result in r.results { encodeForwardResult(result, &w) }
        case .admin(let a):
            w.u8(4)
            w.string(a.from); w.string(a.origin); w.varint(a.requestID)
            switch a.operation {
            case .addMember(let id, let peer, let url):
                w.u8(0); w.string(id); w.string(peer.description); w.optionalString(url)
            case .removeMember(let id): w.u8(1); w.string(id)
            case .transferLeadership(let to): w.u8(2); w.string(to)
            // Learner operations (level 3, after 0.5.0): never sent to an older leader.
            case .addLearner(let id, let peer, let url):
                w.u8(3); w.string(id); w.string(peer.description); w.optionalString(url)
            case .promoteMember(let id): w.u8(4); w.string(id)
            case .demoteMember(let id): w.u8(5); w.string(id)
            }
        case .adminReply(let r):
            w.u8(5)
            w.string(r.from); w.varint(r.requestID); w.varint(UInt64(r.status)); w.string(r.body)
        case .notMember(let n):
            w.u8(6)
            w.string(n.from); w.varint(n.configIndex); w.varint(n.commitIndex)
            w.varint(UInt64(n.voters.count))
            for v in n.voters { w.string(v) }
        case .hashCheck(let h):
            w.u8(9)
            w.string(h.from); w.varint(h.appliedIndex); w.string(h.stateHash); w.bool(h.ask)
        }
    }

    public static func decode(_ body: [UInt8]) throws(PeerFrameError) -> PeerFrame {
        let result = body.withUnsafeBytes { bytes -> Result<PeerFrame, PeerFrameError> in
            do throws(PeerFrameError) { return .success(try decode(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Decodes a frame body where it lies in the received buffer: only each entry's and
    /// chunk's bytes are copied out (into the arrays Raft keeps), not the whole body first.
    public static func decode(_ body: ByteBuffer) throws(PeerFrameError) -> PeerFrame {
        let result = body.withUnsafeReadableBytes { bytes -> Result<PeerFrame, PeerFrameError> in
            do throws(PeerFrameError) { return .success(try decode(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// `body` is read only during the call (the `FrameReader` over it never outlives it).
    static func decode(_ body: UnsafeRawBufferPointer) throws(PeerFrameError) -> PeerFrame {
        guard body.count <= maxFrameBytes else { throw .tooLarge(bytes: body.count, limit: maxFrameBytes) }
        var r = FrameReader(body)
        let v = try r.u8()
        guard v == version else { throw .unknownVersion(v) }
        let frame: PeerFrame
        switch try r.u8() {
        case 1:
            let from = try r.string(), to = try r.string(), term = try r.varint()
            frame = .raft(Message(from: from, to: to, term: term, payload: try decodePayload(&r)))
        case 2:
            frame = .forward(ForwardRequest(from: try r.string(), requestID: try r.varint(), payload: try r.bytes()))
        case 3:
            let from = try r.string(), id = try r.varint()
            frame = .forwardReply(ForwardReply(from: from, requestID: id, result: try decodeForwardResult(&r)))
        case 4:
            let from = try r.string(), origin = try r.string(), id = try r.varint()
            let operation: ClusterAdminOperation
            switch try r.u8() {
            case 0:
                let member = try r.string(), peerText = try r.string(), url = try r.optionalString()
                guard let peer = PeerAddress(peerText) else { throw .unknownTag("peer address", 0) }
                operation = .addMember(id: member, peer: peer, url: url)
            case 1: operation = .removeMember(id: try r.string())
            case 2: operation = .transferLeadership(to: try r.string())
            case 3:
                let member = try r.string(), peerText = try r.string(), url = try r.optionalString()
                guard let peer = PeerAddress(peerText) else { throw .unknownTag("peer address", 0) }
                operation = .addLearner(id: member, peer: peer, url: url)
            case 4: operation = .promoteMember(id: try r.string())
            case 5: operation = .demoteMember(id: try r.string())
            case let t: throw .unknownTag("admin operation", t)
            }
            frame = .admin(AdminForward(from: from, origin: origin, requestID: id, operation: operation))
        case 5:
            let from = try r.string(), id = try r.varint(), status = try r.varint()
            guard (100...599).contains(status) else { throw .unknownTag("admin status", 0) }
            frame = .adminReply(AdminReply(from: from, requestID: id, status: Int(status), body: try r.string()))
        case 6:
            let from = try r.string(), configIndex = try r.varint(), commitIndex = try r.varint()
            let count = try r.count(minimumBytesEach: 1)
            var voters: [NodeID] = []
            for _ in 0..<count { voters.append(try r.string()) }
            frame = .notMember(NotMemberNotice(from: from, configIndex: configIndex, commitIndex: commitIndex, voters: voters))
        case 7:
            let from = try r.string(), id = try r.varint()
            let count = try r.count(minimumBytesEach: 1)
            var payloads: [[UInt8]] = []
            payloads.reserveCapacity(count)
            for _ in 0..<count { payloads.append(try r.bytes()) }
            frame = .forwardBatch(ForwardBatch(from: from, batchID: id, payloads: payloads))
        case 8:
            let from = try r.string(), id = try r.varint()
            let count = try r.count(minimumBytesEach: 1)
            var results: [ForwardReply.Result] = []
            results.reserveCapacity(count)
            for _ in 0..<count { results.append(try decodeForwardResult(&r)) }
            frame = .forwardBatchReply(ForwardBatchReply(from: from, batchID: id, results: results))
        case 9:
            let from = try r.string(), index = try r.varint(), hash = try r.string(), ask = try r.bool()
            guard hash.utf8.count <= HashCheck.maxHashBytes else { throw .tooLarge(bytes: hash.utf8.count, limit: HashCheck.maxHashBytes) }
            frame = .hashCheck(HashCheck(from: from, appliedIndex: index, stateHash: hash, ask: ask))
        case let t: throw .unknownTag("frame kind", t)
        }
        guard r.remaining == 0 else { throw .trailingBytes(r.remaining) }
        return frame
    }

    static func encodeForwardResult(_ result: ForwardReply.Result, _ w: inout FrameWriter) {
        switch result {
        case .accepted(let index, let term): w.u8(0); w.varint(index); w.varint(term)
        case .notLeader(let hint): w.u8(1); w.optionalString(hint)
        case .refused(let why): w.u8(2); w.string(why)
        }
    }

    static func decodeForwardResult(_ r: inout FrameReader) throws(PeerFrameError) -> ForwardReply.Result {
        switch try r.u8() {
        case 0: return .accepted(index: try r.varint(), term: try r.varint())
        case 1: return .notLeader(hint: try r.optionalString())
        case 2: return .refused(try r.string())
        case let t: throw .unknownTag("forward result", t)
        }
    }

    // MARK: - Raft payloads

    /// An append's entries as its frame carries them (their count, then each one): what
    /// `frameBuffer(_:entries:)` takes to send the same entries to several members.
    public static func encodedEntries(_ entries: [EmberRaft.LogEntry], allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var w = FrameWriter(allocator.buffer(capacity: entries.reduce(8) { $0 + $1.data.count + 24 }))
        encodeEntries(entries, &w)
        return w.buffer
    }

    static func encodeEntries(_ entries: [EmberRaft.LogEntry], _ w: inout FrameWriter) {
        w.varint(UInt64(entries.count))
        for e in entries { encodeEntry(e, &w) }
    }

    /// One entry as an append carries it (`AppendEncodings` keeps each one's span).
    static func encodeEntry(_ e: EmberRaft.LogEntry, _ w: inout FrameWriter) {
        w.varint(e.index); w.varint(e.term); w.u8(e.kind.rawValue); w.bytes(e.data)
    }

    static func encodePayload(_ p: Message.Payload, _ w: inout FrameWriter, entries: ByteBuffer? = nil) {
        switch p {
        case .preVote(let li, let lt): w.u8(0); w.varint(li); w.varint(lt)
        case .preVoteResponse(let g): w.u8(1); w.bool(g)
        case .requestVote(let li, let lt, let transfer): w.u8(2); w.varint(li); w.varint(lt); w.bool(transfer)
        case .requestVoteResponse(let g): w.u8(3); w.bool(g)
        case .appendEntries(let a):
            w.u8(4); w.varint(a.prevIndex); w.varint(a.prevTerm); w.varint(a.commit)
            if let entries { w.buffer.writeImmutableBuffer(entries) } else { encodeEntries(a.entries, &w) }
        case .appendEntriesResponse(let r):
            w.u8(5); w.bool(r.success); w.varint(r.index); w.varint(r.conflictTerm); w.varint(r.conflictIndex)
        case .heartbeat(let commit, let ctx): w.u8(6); w.varint(commit); w.varint(ctx)
        case .heartbeatResponse(let ctx): w.u8(7); w.varint(ctx)
        case .installSnapshot(let c):
            // Tag 14: a snapshot whose membership has learners (level 3, after 0.5.0). Without learners the
            // frame is tag 8, byte for byte what builds before learners read.
            let learners = c.metadata.membership.learners
            w.u8(learners.isEmpty ? 8 : 14)
            w.varint(c.metadata.index); w.varint(c.metadata.term)
            w.varint(UInt64(c.metadata.membership.voters.count))
            for v in c.metadata.membership.voters { w.string(v) }
            if !learners.isEmpty {
                w.varint(UInt64(learners.count))
                for v in learners { w.string(v) }
            }
            w.varint(UInt64(c.offset)); w.varint(UInt64(c.totalSize)); w.bytes(c.data); w.bool(c.done)
        case .installSnapshotResponse(let index, let received, let done):
            w.u8(9); w.varint(index); w.varint(UInt64(received)); w.bool(done)
        case .timeoutNow: w.u8(10)
        case .readIndexRequest(let id): w.u8(11); w.varint(id)
        case .readIndexResponse(let id, let index):
            w.u8(12); w.varint(id)
            if let index { w.u8(1); w.varint(index) } else { w.u8(0) }
        case .leaderDurable(let index): w.u8(13); w.varint(index)
        }
    }

    static func decodePayload(_ r: inout FrameReader) throws(PeerFrameError) -> Message.Payload {
        switch try r.u8() {
        case 0: return .preVote(lastIndex: try r.varint(), lastTerm: try r.varint())
        case 1: return .preVoteResponse(granted: try r.bool())
        case 2: return .requestVote(lastIndex: try r.varint(), lastTerm: try r.varint(), leadershipTransfer: try r.bool())
        case 3: return .requestVoteResponse(granted: try r.bool())
        case 4:
            let prevIndex = try r.varint(), prevTerm = try r.varint(), commit = try r.varint()
            let n = try r.count(minimumBytesEach: 4)
            var entries: [LogEntry] = []
            entries.reserveCapacity(n)
            for _ in 0..<n {
                let index = try r.varint(), term = try r.varint()
                let k = try r.u8()
                guard let kind = EntryKind(rawValue: k) else { throw .unknownTag("entry kind", k) }
                entries.append(LogEntry(index: index, term: term, kind: kind, data: try r.bytes()))
            }
            return .appendEntries(AppendEntries(prevIndex: prevIndex, prevTerm: prevTerm, entries: entries, commit: commit))
        case 5:
            return .appendEntriesResponse(AppendEntriesResponse(
                success: try r.bool(), index: try r.varint(), conflictTerm: try r.varint(), conflictIndex: try r.varint()))
        case 6: return .heartbeat(commit: try r.varint(), readContext: try r.varint())
        case 7: return .heartbeatResponse(readContext: try r.varint())
        case let tag where tag == 8 || tag == 14:
            let index = try r.varint(), term = try r.varint()
            let n = try r.count(minimumBytesEach: 1)
            var voters: [NodeID] = []
            for _ in 0..<n { voters.append(try r.string()) }
            var learners: [NodeID] = []
            if tag == 14 {
                let k = try r.count(minimumBytesEach: 1)
                for _ in 0..<k { learners.append(try r.string()) }
            }
            let offset = try r.snapshotSize(), total = try r.snapshotSize()
            let data = try r.bytes()
            let done = try r.bool()
            let meta = SnapshotMetadata(index: index, term: term, membership: Membership(voters: voters, learners: learners))
            return .installSnapshot(SnapshotChunk(metadata: meta, offset: offset, totalSize: total, data: data, done: done))
        case 9: return .installSnapshotResponse(snapshotIndex: try r.varint(), receivedBytes: try r.snapshotSize(), done: try r.bool())
        case 10: return .timeoutNow
        case 11: return .readIndexRequest(id: try r.varint())
        case 12:
            let id = try r.varint()
            return .readIndexResponse(id: id, index: try r.bool() ? try r.varint() : nil)
        case 13: return .leaderDurable(index: try r.varint())
        case let t: throw .unknownTag("raft payload", t)
        }
    }
}

extension PeerFrame {
    /// The peer protocol level a build must speak to be sent this frame (1: every build):
    /// `.leaderDurable` is level 2, `HashCheck` and the frames that name learners (a snapshot
    /// whose membership has learners, the learner admin requests) level 3 (`PeerTLS`).
    var level: Int {
        switch self {
        case .raft(let m):
            if case .leaderDurable = m.payload { return 2 }
            if case .installSnapshot(let c) = m.payload, !c.metadata.membership.learners.isEmpty { return 3 }
            return 1
        case .admin(let a):
            switch a.operation {
            case .addLearner, .promoteMember, .demoteMember: return 3
            default: return 1
            }
        case .hashCheck: return 3
        default: return 1
        }
    }
}
