import NIOCore

// The peer codec's byte helpers (private to it; storage keeps its own format): LEB128 varints,
// length-prefixed byte strings.

/// Writes a frame body into a `ByteBuffer`, the one handed to the socket (`frameBuffer`).
struct FrameWriter {
    var buffer: ByteBuffer

    init(_ buffer: ByteBuffer = ByteBuffer()) { self.buffer = buffer }

    /// What was written, as an array (tests, and `PeerFrameCodec.encode`).
    var out: [UInt8] { Array(buffer.readableBytesView) }

    mutating func u8(_ v: UInt8) { buffer.writeInteger(v) }
    mutating func bool(_ v: Bool) { buffer.writeInteger(UInt8(v ? 1 : 0)) }
    mutating func varint(_ v: UInt64) {
        var x = v
        while x >= 0x80 { buffer.writeInteger(UInt8(x & 0x7F) | 0x80); x >>= 7 }
        buffer.writeInteger(UInt8(x))
    }
    mutating func bytes(_ b: [UInt8]) { varint(UInt64(b.count)); buffer.writeBytes(b) }
    mutating func string(_ s: String) { varint(UInt64(s.utf8.count)); buffer.writeString(s) }
    mutating func optionalString(_ s: String?) {
        if let s { u8(1); string(s) } else { u8(0) }
    }
}

/// Reads a frame body in place. Holds a pointer valid only inside the `withUnsafe…Bytes` call
/// that made it (`PeerFrameCodec.decode`): it is never stored or returned.
struct FrameReader {
    let buf: UnsafeRawBufferPointer
    var i = 0
    init(_ buf: UnsafeRawBufferPointer) { self.buf = buf }
    var remaining: Int { buf.count - i }

    mutating func u8() throws(PeerFrameError) -> UInt8 {
        guard i < buf.count else { throw .truncated }
        defer { i += 1 }
        return buf[i]
    }
    mutating func bool() throws(PeerFrameError) -> Bool {
        let b = try u8()
        guard b <= 1 else { throw .unknownTag("bool", b) }
        return b == 1
    }
    mutating func varint() throws(PeerFrameError) -> UInt64 {
        var x: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            guard shift < 64 else { throw .unknownTag("varint", b) }
            x |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return x }
            shift += 7
        }
    }
    /// A non-negative size that fits in `Int`.
    mutating func int() throws(PeerFrameError) -> Int {
        let v = try varint()
        guard v <= UInt64(PeerFrameCodec.maxFrameBytes) * 4 else { throw .tooLarge(bytes: Int(clamping: v), limit: PeerFrameCodec.maxFrameBytes) }
        return Int(v)
    }
    /// A snapshot offset or size: snapshots are streamed in chunks and may be far larger than a
    /// frame, up to `PeerFrameCodec.maxSnapshotBytes`.
    mutating func snapshotSize() throws(PeerFrameError) -> Int {
        let v = try varint()
        guard v <= UInt64(PeerFrameCodec.maxSnapshotBytes) else { throw .tooLarge(bytes: Int(clamping: v), limit: PeerFrameCodec.maxSnapshotBytes) }
        return Int(v)
    }
    /// An element count, refused when the remaining bytes cannot hold that many elements.
    mutating func count(minimumBytesEach: Int) throws(PeerFrameError) -> Int {
        let n = try varint()
        guard n <= UInt64(remaining / minimumBytesEach) else { throw .truncated }
        return Int(n)
    }
    /// The next byte string's bytes, in place (valid as long as `buf`).
    private mutating func slice() throws(PeerFrameError) -> UnsafeRawBufferPointer {
        let n = try varint()
        guard n <= UInt64(remaining) else { throw .truncated }
        defer { i += Int(n) }
        return UnsafeRawBufferPointer(rebasing: buf[i..<i + Int(n)])
    }
    /// The next byte string, copied out (the one copy an entry's bytes get on receipt).
    mutating func bytes() throws(PeerFrameError) -> [UInt8] {
        Array(try slice())
    }
    mutating func string() throws(PeerFrameError) -> String {
        String(decoding: try slice(), as: UTF8.self)
    }
    mutating func optionalString() throws(PeerFrameError) -> String? {
        try bool() ? try string() : nil
    }
}
