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
}
