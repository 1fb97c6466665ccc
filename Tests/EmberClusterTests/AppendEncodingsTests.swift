import EmberRaft
import EmberTestSupport
import NIOCore
import Testing

@testable import EmberCluster

/// A leader encodes the entries it sends several members once (`AppendEncodings`, issue 38):
/// the frame built from the kept encoding is the plain frame byte for byte, and an encoding is
/// reused only for the same entries (same first and last index and term).
@Suite struct AppendEncodingsTests {
    static func entries(_ range: ClosedRange<UInt64>, term: UInt64 = 3) -> [LogEntry] {
        range.map { LogEntry(index: $0, term: term, kind: .normal, data: Array("{\"p\":\"w/k\($0)\",\"d\":\"v\"}".utf8)) }
    }

    static func append(_ entries: [LogEntry], to peer: String, commit: UInt64) -> PeerFrame {
        .raft(Message(from: "n1", to: peer, term: 3,
                      payload: .appendEntries(AppendEntries(prevIndex: entries[0].index - 1, prevTerm: 3, entries: entries, commit: commit))))
    }

    @Test func aFrameFromTheKeptEncodingIsThePlainFrame() throws {
        let batch = Self.entries(101...400)
        var cache = AppendEncodings()
        for (peer, commit) in [("n2", UInt64(380)), ("n3", 390), ("l1", 400), ("l2", 400)] {
            let frame = Self.append(batch, to: peer, commit: commit)
            let shared = try PeerFrameCodec.frameBuffer(frame, entries: cache.bytes(for: batch))
            #expect(shared == (try PeerFrameCodec.frameBuffer(frame)), "to \(peer)")
            let body = Array(shared.readableBytesView.dropFirst(PeerFrameCodec.headerBytes))
            guard case .raft(let m) = try PeerFrameCodec.decode(body), case .appendEntries(let a) = m.payload else {
                Issue.record("not an append")
                return
            }
            #expect(m.to == peer && a.commit == commit && a.entries == batch)
        }
        // Encoded for the first member only; the other three frames reused it.
        #expect(cache.encoded == 1 && cache.reused == 3)
    }

    @Test func onlyTheSameEntriesReuseAnEncoding() {
        var cache = AppendEncodings()
        _ = cache.bytes(for: Self.entries(1...50))
        _ = cache.bytes(for: Self.entries(1...50))
        #expect(cache.encoded == 1 && cache.reused == 1)
        // More entries, fewer, a later start, the same indexes in a later term: encoded anew.
        for other in [Self.entries(1...51), Self.entries(1...49), Self.entries(2...50), Self.entries(1...50, term: 4)] {
            let before = cache.encoded
            _ = cache.bytes(for: other)
            #expect(cache.encoded == before + 1)
        }
        #expect(cache.reused == 1)
        // One entry: the frame encodes it itself.
        #expect(cache.bytes(for: Self.entries(7...7)) == nil)
    }

    /// Voter appends of a few entries each (kept while learners are members), then learner
    /// batches spanning several of them: copied from the window, byte for byte the fresh encoding.
    @Test func aLearnerBatchIsCopiedFromTheVotersEncodings() throws {
        var cache = AppendEncodings()
        var next: UInt64 = 1
        for size in [1, 3, 7, 2, 40, 1, 1, 25] {
            let batch = Self.entries(next...(next + UInt64(size) - 1))
            let got = cache.bytes(for: batch, keep: true)
            let bytes = try #require(got)
            #expect(bytes == PeerFrameCodec.encodedEntries(batch))
            next += UInt64(size)
        }
        let made = cache.encoded
        for range: ClosedRange<UInt64> in [1...80, 2...2, 5...60, 11...12, 51...80] {
            let batch = Self.entries(range)
            let got = cache.bytes(for: batch, toLearner: true)
            let bytes = try #require(got)
            #expect(bytes == PeerFrameCodec.encodedEntries(batch), "\(range)")
            let frame = Self.append(batch, to: "l1", commit: range.upperBound)
            #expect(try PeerFrameCodec.frameBuffer(frame, entries: bytes) == PeerFrameCodec.frameBuffer(frame))
        }
        #expect(cache.encoded == made && cache.copied == 5)
        // The second learner sent the same batch reuses the first's copy.
        _ = cache.bytes(for: Self.entries(51...80), toLearner: true)
        #expect(cache.copied == 5 && cache.reused == 1)
    }

    /// Entries the window does not hold, or holds in another term, are encoded afresh.
    @Test func aLearnerBatchOutsideTheWindowIsEncoded() throws {
        var cache = AppendEncodings()
        _ = cache.bytes(for: Self.entries(10...30), keep: true)
        for batch in [Self.entries(5...20), Self.entries(20...31), Self.entries(12...18, term: 4)] {
            let before = cache.encoded
            let got = cache.bytes(for: batch, toLearner: true)
            let bytes = try #require(got)
            #expect(bytes == PeerFrameCodec.encodedEntries(batch))
            #expect(cache.encoded == before + 1)
        }
        #expect(cache.copied == 0)
        // A new leader's entries replace the window's from 20 on: 10...19 stay, 20... are the new term's.
        _ = cache.bytes(for: Self.entries(20...25, term: 4), keep: true)
        let mixed = Self.entries(10...19) + Self.entries(20...25, term: 4)
        #expect(cache.bytes(for: mixed, toLearner: true) == PeerFrameCodec.encodedEntries(mixed))
        #expect(cache.copied == 1)
        #expect(cache.bytes(for: Self.entries(20...26), toLearner: true) == PeerFrameCodec.encodedEntries(Self.entries(20...26)))
        #expect(cache.copied == 1)
    }

    /// The window keeps at most its named bytes: the oldest entries leave first; a gap starts anew.
    @Test func theWindowKeepsItsLimit() throws {
        let one = PeerFrameCodec.encodedEntries(Self.entries(200...200)).readableBytes - 1  // an entry without the count (all of 200...405 as long)
        var cache = AppendEncodings(keptBytes: one * 50)
        for start in stride(from: UInt64(200), to: 300, by: 10) { _ = cache.bytes(for: Self.entries(start...(start + 9)), keep: true) }
        // 250...299 are kept, 249 is gone.
        #expect(cache.bytes(for: Self.entries(250...299), toLearner: true) == PeerFrameCodec.encodedEntries(Self.entries(250...299)))
        #expect(cache.copied == 1)
        _ = cache.bytes(for: Self.entries(249...260), toLearner: true)
        #expect(cache.copied == 1)
        // A gap: the window restarts at 400.
        _ = cache.bytes(for: Self.entries(400...405), keep: true)
        _ = cache.bytes(for: Self.entries(290...299), toLearner: true)
        #expect(cache.copied == 1)
        #expect(cache.bytes(for: Self.entries(401...404), toLearner: true) == PeerFrameCodec.encodedEntries(Self.entries(401...404)))
        #expect(cache.copied == 2)
    }
}
