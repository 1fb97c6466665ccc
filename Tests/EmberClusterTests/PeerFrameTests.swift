import EmberRaft
import EmberTestSupport
import Foundation
import NIOCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore

@Suite(.printsSeedOnFailure) struct PeerFrameTests {
    static let meta = SnapshotMetadata(index: 40, term: 3, membership: Membership(voters: ["n1", "n2", "n3"]))

    static let payloads: [Message.Payload] = [
        .preVote(lastIndex: 7, lastTerm: 2),
        .preVoteResponse(granted: true),
        .requestVote(lastIndex: 1 << 40, lastTerm: 9, leadershipTransfer: true),
        .requestVoteResponse(granted: false),
        .appendEntries(AppendEntries(prevIndex: 10, prevTerm: 2, entries: [
            LogEntry(index: 11, term: 3, kind: .noop),
            LogEntry(index: 12, term: 3, kind: .normal, data: [0, 1, 2, 255]),
            LogEntry(index: 13, term: 3, kind: .configChange, data: Membership(voters: ["a"]).encoded()),
        ], commit: 11)),
        .appendEntries(AppendEntries(prevIndex: 0, prevTerm: 0, entries: [], commit: 0)),
        .appendEntriesResponse(AppendEntriesResponse(success: false, index: 5, conflictTerm: 2, conflictIndex: 3)),
        .heartbeat(commit: 99, readContext: 4),
        .heartbeatResponse(readContext: 4),
        .installSnapshot(SnapshotChunk(metadata: meta, offset: 1 << 20, totalSize: 3 << 20, data: [9, 9], done: false)),
        // Snapshots are many frames long: offsets and sizes far beyond one frame travel.
        .installSnapshot(SnapshotChunk(metadata: meta, offset: 300 << 20, totalSize: 5 << 30, data: [1], done: false)),
        // With learners: tag 14, a level-3 frame.
        .installSnapshot(SnapshotChunk(metadata: SnapshotMetadata(index: 40, term: 3, membership: Membership(voters: ["n1", "n2"], learners: ["n4", "n5"])),
                                       offset: 0, totalSize: 2, data: [1, 2], done: true)),
        .installSnapshotResponse(snapshotIndex: 40, receivedBytes: 12, done: true),
        .installSnapshotResponse(snapshotIndex: 40, receivedBytes: 4 << 30, done: false),
        .timeoutNow,
        .readIndexRequest(id: .max),
        .readIndexResponse(id: 3, index: 17),
        .readIndexResponse(id: 3, index: nil),
        .leaderDurable(index: 1 << 35),
    ]

    static var frames: [PeerFrame] {
        payloads.map { .raft(Message(from: "n1", to: "n2", term: 3, payload: $0)) } + [
            .forward(ForwardRequest(from: "n3", requestID: 77, payload: Array(0...200))),
            .forwardReply(ForwardReply(from: "n1", requestID: 77, result: .accepted(index: 12, term: 3))),
            .forwardReply(ForwardReply(from: "n1", requestID: 78, result: .notLeader(hint: "n2"))),
            .forwardReply(ForwardReply(from: "n1", requestID: 79, result: .notLeader(hint: nil))),
            .forwardReply(ForwardReply(from: "n1", requestID: 80, result: .refused("bad path"))),
            .forwardBatch(ForwardBatch(from: "n3", batchID: 9, payloads: [Array(0...200), [], [7]])),
            .forwardBatch(ForwardBatch(from: "n3", batchID: 10, payloads: [])),
            .forwardBatchReply(ForwardBatchReply(from: "n1", batchID: 9, results: [
                .accepted(index: 12, term: 3), .refused("bad path"), .notLeader(hint: "n2"), .notLeader(hint: nil)])),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 5, operation: .addMember(
                id: "n4", peer: PeerAddress(host: "127.0.0.1", port: 7004), url: "http://127.0.0.1:9004"))),
            .admin(AdminForward(from: "n2", origin: "n3", requestID: 6, operation: .addMember(
                id: "n5", peer: PeerAddress(host: "::1", port: 7005), url: nil))),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 7, operation: .removeMember(id: "n1"))),
            .admin(AdminForward(from: "n2", origin: "n1", requestID: 8, operation: .transferLeadership(to: "n3"))),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 9, operation: .addLearner(
                id: "n6", peer: PeerAddress(host: "127.0.0.1", port: 7006), url: "http://127.0.0.1:9006"))),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 10, operation: .addLearner(
                id: "n7", peer: PeerAddress(host: "::1", port: 7007), url: nil))),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 11, operation: .promoteMember(id: "n6"))),
            .admin(AdminForward(from: "n2", origin: "n2", requestID: 12, operation: .demoteMember(id: "n1"))),
            .adminReply(AdminReply(from: "n1", requestID: 8, status: 409, body: "{\"error\":\"pending\"}")),
            .notMember(NotMemberNotice(from: "n1", configIndex: 1 << 33, commitIndex: 1 << 34, voters: ["n1", "n2"])),
            .notMember(NotMemberNotice(from: "n1", configIndex: 0, commitIndex: 0, voters: [])),
            .hashCheck(HashCheck(from: "n2", appliedIndex: 1 << 40, stateHash: String(repeating: "ab", count: 20), ask: true)),
            .hashCheck(HashCheck(from: "n3", appliedIndex: 0, stateHash: "", ask: false)),
        ]
    }

    /// Frames that name learners go only to members that speak level 3; a snapshot of a
    /// membership without learners is the frame every build reads (tag 8).
    @Test func learnerFramesAreLevelThree() throws {
        func snapshot(_ m: Membership) -> PeerFrame {
            .raft(Message(from: "n1", to: "n2", term: 3, payload: .installSnapshot(SnapshotChunk(
                metadata: SnapshotMetadata(index: 9, term: 3, membership: m), offset: 0, totalSize: 1, data: [1], done: true))))
        }
        let plain = snapshot(Membership(voters: ["n1", "n2"]))
        #expect(plain.level == 1 && snapshot(Membership(voters: ["n1"], learners: ["n2"])).level == 3)
        for op: ClusterAdminOperation in [.promoteMember(id: "n2"), .demoteMember(id: "n2"),
                                          .addLearner(id: "n2", peer: PeerAddress(host: "h", port: 1), url: nil)] {
            #expect(PeerFrame.admin(AdminForward(from: "n2", origin: "n2", requestID: 1, operation: op)).level == 3)
        }
        #expect(PeerFrame.admin(AdminForward(from: "n2", origin: "n2", requestID: 1, operation: .removeMember(id: "n3"))).level == 1)
    }

    @Test func everyFrameRoundTrips() throws {
        for f in Self.frames {
            let wire = try PeerFrameCodec.frame(f)
            let n = try #require(try PeerFrameCodec.bodyLength(wire))
            #expect(n == wire.count - PeerFrameCodec.headerBytes)
            #expect(try PeerFrameCodec.decode(Array(wire.dropFirst(PeerFrameCodec.headerBytes))) == f)
        }
    }

    /// Frames go out as the buffer they were encoded into (`frameBuffer`, the length set after
    /// the body) and are decoded where they lie in the received stream, as `PeerFrameDecoder`
    /// hands them on: slices not at offset 0, a learner-sized batch among them.
    @Test func framesAreDecodedInPlaceFromTheReceivedStream() throws {
        let entries = (1...2_048).map { i in
            LogEntry(index: UInt64(i), term: 4, kind: .normal, data: [UInt8](repeating: UInt8(i & 0xFF), count: i % 300))
        }
        let batch = PeerFrame.raft(Message(from: "n1", to: "l1", term: 4,
                                           payload: .appendEntries(AppendEntries(prevIndex: 0, prevTerm: 0, entries: entries, commit: 2_048))))
        let all = Self.frames + [batch] + Self.frames
        var stream = ByteBufferAllocator().buffer(capacity: 0)
        for f in all {
            var b = try PeerFrameCodec.frameBuffer(f)
            let array = try PeerFrameCodec.frame(f)
            #expect(Array(b.readableBytesView) == array)
            #expect(try PeerFrameCodec.bodyLength(b.readableBytesView) == b.readableBytes - PeerFrameCodec.headerBytes)
            stream.writeBuffer(&b)
        }
        var decoded: [PeerFrame] = []
        while let n = try PeerFrameCodec.bodyLength(stream.readableBytesView), stream.readableBytes >= PeerFrameCodec.headerBytes + n {
            stream.moveReaderIndex(forwardBy: PeerFrameCodec.headerBytes)
            decoded.append(try PeerFrameCodec.decode(stream.readSlice(length: n)!))
        }
        #expect(stream.readableBytes == 0)
        #expect(decoded == all)
        // A body cut short in a buffer is refused as one in an array is.
        let body = try PeerFrameCodec.frameBuffer(batch).getSlice(at: PeerFrameCodec.headerBytes, length: PeerFrameCodec.encode(batch).count)!
        for cut in stride(from: 0, to: body.readableBytes, by: 4_099) {
            #expect(throws: PeerFrameError.self) { try PeerFrameCodec.decode(body.getSlice(at: body.readerIndex, length: cut)!) }
        }
        #expect(try PeerFrameCodec.decode(body) == batch)
    }

    @Test func everyTruncationIsRejected() throws {
        for f in Self.frames {
            let body = PeerFrameCodec.encode(f)
            for cut in 0..<body.count {
                #expect(throws: PeerFrameError.self) { try PeerFrameCodec.decode(Array(body.prefix(cut))) }
            }
        }
    }

    @Test func garbageIsRejected() {
        #expect(throws: PeerFrameError.unknownVersion(9)) { try PeerFrameCodec.decode([9, 1]) }
        #expect(throws: PeerFrameError.unknownTag("frame kind", 99)) { try PeerFrameCodec.decode([1, 99]) }
        var body = PeerFrameCodec.encode(Self.frames[0])
        body.append(0)
        #expect(throws: PeerFrameError.trailingBytes(1)) { try PeerFrameCodec.decode(body) }
        // A count larger than the bytes left must not allocate or trap.
        var w = FrameWriter()
        w.u8(1); w.u8(1); w.string("a"); w.string("b"); w.varint(1); w.u8(4)
        w.varint(0); w.varint(0); w.varint(0); w.varint(UInt64.max)
        #expect(throws: PeerFrameError.truncated) { try PeerFrameCodec.decode(w.out) }
    }

    @Test func randomBytesAndMutationsNeverTrap() {
        var rng = TestSeed.generator(0x9EE2_F2A3)
        for _ in 0..<2_000 {
            let n = Int.random(in: 0..<64, using: &rng)
            _ = try? PeerFrameCodec.decode((0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        for f in Self.frames {
            let body = PeerFrameCodec.encode(f)
            for _ in 0..<50 {
                var m = body
                m[Int.random(in: 0..<m.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                _ = try? PeerFrameCodec.decode(m)  // any result but a crash
            }
        }
    }

    /// A drain's frames joined into fewer writes: the byte stream (what the peer decodes) is the
    /// same, small frames share a write up to the limit, a large frame is a write of its own.
    @Test func coalescedFramesKeepTheStreamAndTheLimit() throws {
        let allocator = ByteBufferAllocator()
        let big = PeerFrame.forward(ForwardRequest(from: "n3", requestID: 1, payload: [UInt8](repeating: 7, count: PeerLink.coalesceBytes)))
        let sequence = Self.frames + [big] + Self.frames + Self.frames + [big, big] + Self.frames
        // Enough small frames to pass the limit between the large ones.
        let frames = try (sequence + Array(repeating: Self.frames, count: 400).flatMap { $0 }).map {
            allocator.buffer(bytes: try PeerFrameCodec.frame($0))
        }
        let runs = PeerLink.coalesced(frames, allocator: allocator)
        #expect(runs.count < frames.count)
        #expect(runs.flatMap { $0.readableBytesView } == frames.flatMap { $0.readableBytesView })
        for run in runs {
            // Either one frame (a large one alone) or a run within the limit.
            #expect(run.readableBytes <= PeerLink.coalesceBytes || frames.contains(run))
        }
        #expect(runs.filter { $0.readableBytes > PeerLink.coalesceBytes }.count == 3)
        // The peer's decoder reads the same frames back out of the joined stream.
        var stream = runs.flatMap { $0.readableBytesView }[...]
        var decoded: [PeerFrame] = []
        while let n = try PeerFrameCodec.bodyLength(Array(stream.prefix(PeerFrameCodec.headerBytes))) {
            let body = stream.dropFirst(PeerFrameCodec.headerBytes).prefix(n)
            decoded.append(try PeerFrameCodec.decode(Array(body)))
            stream = stream.dropFirst(PeerFrameCodec.headerBytes + n)
        }
        #expect(decoded.count == frames.count)
        #expect(decoded.first == sequence.first && decoded.last == Self.frames.last)
        // A single frame is passed through untouched.
        #expect(PeerLink.coalesced([frames[0]], allocator: allocator) == [frames[0]])
    }

    @Test func oversizedLengthPrefixIsRejected() throws {
        let n = UInt32(PeerFrameCodec.maxFrameBytes + 1)
        let header: [UInt8] = [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
        #expect(throws: PeerFrameError.tooLarge(bytes: Int(n), limit: PeerFrameCodec.maxFrameBytes)) {
            try PeerFrameCodec.bodyLength(header)
        }
        #expect(try PeerFrameCodec.bodyLength([0, 0, 1]) == nil)
    }

    @Test func peersParseAndNodeIDsAreDNSNames() throws {
        let peers = try ClusterConfiguration.parsePeers("n1=127.0.0.1:7001, n2=[::1]:7002")
        #expect(peers["n1"] == PeerAddress(host: "127.0.0.1", port: 7001))
        #expect(peers["n2"] == PeerAddress(host: "::1", port: 7002))
        #expect(throws: ClusterConfigError.self) { try ClusterConfiguration.parsePeers("n1=host") }
        #expect(throws: ClusterConfigError.self) { try ClusterConfiguration.parsePeers("n1=a:1,n1=b:2") }
        #expect(!ClusterConfiguration.isValidNodeID("n 1"))
        #expect(PeerTLS.identify(["n1", "127.0.0.1"], members: ["n1", "n2"], expected: nil) == "n1")
        #expect(PeerTLS.identify(["n1", "n2"], members: ["n1", "n2"], expected: nil) == nil)
        #expect(PeerTLS.identify(["n3"], members: ["n1", "n2"], expected: nil) == nil)
        #expect(PeerTLS.identify(["n1"], members: ["n1", "n2"], expected: "n2") == nil)
    }

    @Test func notMemberNoticeRemovesOnlyByANewerCommittedConfiguration() {
        let three = Membership(voters: ["n1", "n2", "n3"])
        let notice = NotMemberNotice(from: "n1", configIndex: 12, commitIndex: 12, voters: ["n1", "n2"])
        #expect(notice.removes("n3", configIndex: 4, voters: three))
        #expect(!notice.removes("n3", configIndex: 12, voters: three))  // not newer than ours
        #expect(!notice.removes("n3", configIndex: 4, voters: Membership(voters: [])))  // joining: nothing to learn
        #expect(!notice.removes("n2", configIndex: 4, voters: three))  // names us
        var uncommitted = notice
        uncommitted.commitIndex = 11  // the removal may still be undone
        #expect(!uncommitted.removes("n3", configIndex: 4, voters: three))
        var empty = notice
        empty.voters = []
        #expect(!empty.removes("n3", configIndex: 4, voters: three))
    }

    @Test func configFileResolvesRelativeTLSPaths() throws {
        let dir = TestDirectory.root + "ember-cfg-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/cluster.json"
        try #"""
            {"nodeId":"n1","peers":{"n1":"127.0.0.1:7001"},"peerTlsCert":"n1.pem","peerTlsKey":"/abs/n1.key",
             "peerTlsCa":"certs/ca.pem","tlsCert":"https.pem","tlsKey":"https.key","clientUrls":{"n1":"http://a:9000"}}
            """#.write(toFile: path, atomically: true, encoding: .utf8)
        let f = try ClusterConfigFile.load(path: path)
        #expect(f.nodeId == "n1" && f.peers?["n1"] == "127.0.0.1:7001")
        #expect(f.peerTlsCert == dir + "/n1.pem" && f.peerTlsKey == "/abs/n1.key" && f.peerTlsCa == dir + "/certs/ca.pem")
        // The client-facing pair is separate (etcd's naming: tls* for clients, peerTls* for peers).
        #expect(f.tlsCert == dir + "/https.pem" && f.tlsKey == dir + "/https.key" && f.tlsCa == nil)
        #expect(f.clientUrls == ["n1": "http://a:9000"])
        try "{".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ClusterConfigError.self) { try ClusterConfigFile.load(path: path) }
    }
}
