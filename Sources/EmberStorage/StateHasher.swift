import Crypto

/// SHA-1 at machine speed (swift-crypto: BoringSSL, SHA-NI where the CPU has it). Bit for bit
/// `EmberCore.SHA1` (kept there so the pure model has no dependencies); storage hashes whole
/// trees with it (the state hash, backups, archive segments), where the portable one was most
/// of a hash's time.
enum FastSHA1 {
    static func digest(_ bytes: [UInt8]) -> [UInt8] { Array(Insecure.SHA1.hash(data: bytes)) }
}

/// The state hash (`EmberStore.stateHash`) fed record by record: SHA-1 over runs of
/// `varint(key length), key, varint(value length), value` that end at the first record boundary
/// at or past 1 MiB, then SHA-1 over those runs' digests. Streams into the digest instead of
/// building each 1 MiB run in memory first (same bytes, same hash).
struct StateHasher {
    /// A run ends at the first record boundary at or past this many bytes.
    static let runBytes = 1 << 20
    /// Bytes staged before they go to the digest (one call per many small records).
    static let stageBytes = 64 << 10

    private var run = Insecure.SHA1()
    private var runCount = 0
    private var stage: [UInt8] = []
    private var digests: [UInt8] = []
    /// Record bytes fed so far (the state's logical size: what a full hash of it scans).
    private(set) var totalBytes = 0

    init() { stage.reserveCapacity(Self.stageBytes + 64) }

    /// Adds one record; `head` is a byte that stands before `value` (counted in its length).
    mutating func add<K: Collection<UInt8>, V: Collection<UInt8>>(_ key: K, head: UInt8? = nil, _ value: V) {
        varint(key.count)
        stage.append(contentsOf: key)
        varint(value.count + (head == nil ? 0 : 1))
        if let head { stage.append(head) }
        stage.append(contentsOf: value)
        if runCount + stage.count >= Self.runBytes {
            flush()
            digests += Array(run.finalize())
            run = Insecure.SHA1()
            runCount = 0
        } else if stage.count >= Self.stageBytes {
            flush()
        }
    }

    /// The hash, as 40 lowercase hex digits (the last run's digest is taken even when empty).
    mutating func finish() -> String {
        flush()
        digests += Array(run.finalize())
        return FastSHA1.digest(digests).map { String(format2: $0) }.joined()
    }

    private mutating func flush() {
        guard !stage.isEmpty else { return }
        stage.withUnsafeBytes { run.update(bufferPointer: $0) }
        runCount += stage.count
        totalBytes += stage.count
        stage.removeAll(keepingCapacity: true)
    }

    private mutating func varint(_ v: Int) {
        var x = UInt64(v)
        while x >= 0x80 { stage.append(UInt8(x & 0x7F) | 0x80); x >>= 7 }
        stage.append(UInt8(x))
    }
}
