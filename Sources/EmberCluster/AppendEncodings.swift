import EmberRaft
import NIOCore

/// The leader's encoded append entries (issue 38). A turn sends the same new entries to every
/// voter in steady replication, and a learner flush (`Event.flushLearners`) sends the same
/// committed entries to every learner; each was encoded once per member (~5 % of a saturated
/// leader's CPU went to encoding appends). Two reuses:
///
/// - the last encoding, for the next member sent the same entries (equal first and last index
///   and term and count: Raft's Log Matching makes them the same entries);
/// - a window of the entries encoded for voters, entry by entry, of at most `keptBytes`: a
///   learner's batch (hundreds of entries, committed a few turns ago) spans several voter appends
///   already encoded, so its encoding is copied from those (one copy of each run of bytes) instead
///   of encoding every entry again. An entry is taken from the window only when its index and term
///   are the kept entry's (one entry per index and term: the same data, so the same bytes).
///
/// Owned by the Raft loop (`RaftHost.sendRaft`), like the core it serves.
struct AppendEncodings {
    /// Appends with fewer entries are encoded per member: their frame costs less than a lookup.
    /// (While learners are members, voter appends of any size are kept for their batches.)
    static let minEntries = 2
    /// Longest encoding kept as the last one (bytes): an append is bounded by
    /// `RaftConfig.maxBytesPerMessage` (or the learner's own bound) plus the entries' headers.
    static let maxBytes = PeerFrameCodec.maxFrameBytes
    /// Entry bytes the voters' window keeps (the oldest entries leave first): a learner's batch
    /// is committed entries at most a few turns behind the voters' appends (~2 s of log at 20k
    /// writes/s of ~100-byte entries), and a memory bound the leader can afford.
    static let keptBytes = 4 << 20

    private struct Range: Equatable {
        let firstIndex, firstTerm, lastIndex, lastTerm: UInt64
        let count: Int
    }
    private var last: (range: Range, bytes: ByteBuffer)?

    /// One kept entry: its term and where its encoding lies in the voter append that made it.
    private struct Kept {
        let term: UInt64
        let buffer: ByteBuffer
        /// Which append encoded it: entries of one append lie side by side in one buffer.
        let chunk: UInt64
        let start: Int
        let end: Int
    }
    /// `window[k]`: the entry at index `windowFirst + k` (contiguous).
    private var window: [Kept] = []
    private var windowStart = 0  // entries before it have left (dropped in bulk: no shift per entry)
    private var windowFirst: UInt64 = 0
    private var windowBytes = 0
    private var chunks: UInt64 = 0
    private let keptLimit: Int

    /// Encodings reused whole, made, and copied from the window (tests, and what the cache saves).
    private(set) var reused = 0
    private(set) var encoded = 0
    private(set) var copied = 0

    init(keptBytes: Int = Self.keptBytes) { keptLimit = keptBytes }

    /// `entries` encoded as an append frame carries them (`PeerFrameCodec.encodedEntries`),
    /// reused when the last encoding was of the same entries, copied from the window for a
    /// learner (`toLearner`) when it holds them all; nil for an append too small to share (the
    /// frame encodes it itself). `keep`: a voter's append while learners are members, kept in
    /// the window for their batches.
    mutating func bytes(for entries: [EmberRaft.LogEntry], toLearner: Bool = false, keep: Bool = false) -> ByteBuffer? {
        guard let first = entries.first, let lastEntry = entries.last else { return nil }
        let keeping = keep && !toLearner
        guard entries.count >= Self.minEntries || keeping || toLearner else { return nil }
        let range = Range(firstIndex: first.index, firstTerm: first.term, lastIndex: lastEntry.index, lastTerm: lastEntry.term,
                          count: entries.count)
        if let last, last.range == range {
            reused += 1
            return last.bytes
        }
        var bytes: ByteBuffer
        if toLearner, let fromWindow = copyFromWindow(entries) {
            copied += 1
            bytes = fromWindow
        } else if toLearner && entries.count < Self.minEntries {
            return nil
        } else {
            bytes = keeping ? encodeKeeping(entries) : PeerFrameCodec.encodedEntries(entries)
            encoded += 1
        }
        last = bytes.readableBytes <= Self.maxBytes ? (range, bytes) : nil
        return bytes
    }

    /// The encoding of `entries` built from the window's bytes, or nil when one of them is not
    /// there (or is there in another term).
    private func copyFromWindow(_ entries: [EmberRaft.LogEntry]) -> ByteBuffer? {
        guard let first = entries.first, first.index >= windowFirst,
              first.index - windowFirst + UInt64(entries.count) <= UInt64(window.count - windowStart) else { return nil }
        let base = windowStart + Int(first.index - windowFirst)
        var size = 0
        for (k, e) in entries.enumerated() {
            let kept = window[base + k]
            guard kept.term == e.term, e.index == first.index + UInt64(k) else { return nil }
            size += kept.end - kept.start
        }
        var w = FrameWriter(ByteBufferAllocator().buffer(capacity: size + 10))
        w.varint(UInt64(entries.count))
        // Entries encoded together lie side by side in one buffer: each such run is one copy.
        var k = base
        let end = base + entries.count
        while k < end {
            let run = window[k]
            var runEnd = run.end
            var next = k + 1
            while next < end, window[next].start == runEnd, window[next].chunk == run.chunk {
                runEnd = window[next].end
                next += 1
            }
            w.buffer.writeImmutableBuffer(run.buffer.getSlice(at: run.start, length: runEnd - run.start)!)
            k = next
        }
        return w.buffer
    }

    /// `PeerFrameCodec.encodedEntries(entries)` (the same count and per-entry encoding), each
    /// entry's span kept in the window.
    private mutating func encodeKeeping(_ entries: [EmberRaft.LogEntry]) -> ByteBuffer {
        var w = FrameWriter(ByteBufferAllocator().buffer(capacity: entries.reduce(8) { $0 + $1.data.count + 24 }))
        w.varint(UInt64(entries.count))
        var spans: [(start: Int, end: Int)] = []
        spans.reserveCapacity(entries.count)
        for e in entries {
            let start = w.buffer.writerIndex
            PeerFrameCodec.encodeEntry(e, &w)
            spans.append((start, w.buffer.writerIndex))
        }
        let buffer = w.buffer
        chunks &+= 1
        keep(entries, spans, in: buffer, chunk: chunks)
        return buffer
    }

    /// Adds the entries to the window: a gap before them starts a new window; an entry the
    /// window holds in another term (a new leader's log replaced it) drops it and all after it.
    private mutating func keep(_ entries: [EmberRaft.LogEntry], _ spans: [(start: Int, end: Int)], in buffer: ByteBuffer, chunk: UInt64) {
        guard let first = entries.first else { return }
        let windowEnd = windowFirst + UInt64(window.count - windowStart)
        if window.count == windowStart || first.index > windowEnd || first.index < windowFirst {
            window.removeAll(keepingCapacity: true)
            windowStart = 0
            windowFirst = first.index
            windowBytes = 0
        }
        for (k, e) in entries.enumerated() {
            let at = windowStart + Int(e.index - windowFirst)
            if at < window.count {
                if window[at].term == e.term { continue }  // already kept: the same entry
                for dropped in window[at...] { windowBytes -= dropped.end - dropped.start }
                window.removeSubrange(at...)
            }
            let kept = Kept(term: e.term, buffer: buffer, chunk: chunk, start: spans[k].start, end: spans[k].end)
            window.append(kept)
            windowBytes += kept.end - kept.start
        }
        // The oldest entries leave first; the dropped prefix is compacted once it is half the array.
        while windowBytes > keptLimit, windowStart < window.count {
            windowBytes -= window[windowStart].end - window[windowStart].start
            windowStart += 1
            windowFirst += 1
        }
        if windowStart > 0 && windowStart * 2 >= window.count {
            window.removeSubrange(0..<windowStart)
            windowStart = 0
        }
    }
}
