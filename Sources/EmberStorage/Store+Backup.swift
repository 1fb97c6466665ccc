import EmberCore
import Foundation

/// Backup files: the store's snapshot stream (see `snapshot`) in a self-checking envelope.
///
/// Layout: magic `EMBERBK1`, then frames `[u32 BE length][chunk]`, then a trailer frame of length
/// 0 followed by the frame count (u64 BE), the chunk byte total (u64 BE) and the SHA-1 of every
/// chunk digest in order (20 bytes). A truncated or altered file is refused before anything is
/// installed. The snapshot comes from one LMDB read transaction, so a backup is a consistent
/// point-in-time copy taken while the node keeps serving writes.
public struct BackupError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

public enum BackupFormat {
    public static let magic = Array("EMBERBK1".utf8)
    /// Largest frame accepted when reading (a snapshot chunk is ~1 MiB; this bounds memory).
    public static let maxFrameBytes = 64 << 20

    public struct Summary: Sendable, Equatable {
        public var appliedIndex: UInt64
        public var frames: UInt64
        public var bytes: UInt64
        /// The latest entry time (ms) the state holds (the snapshot header's).
        public var lastTimestamp: Int64 = 0
    }

    static func be32(_ n: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: n >> (24 - 8 * $0)) } }
    static func be64(_ n: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: n >> (56 - 8 * UInt64($0))) } }
    static func readBE(_ b: ArraySlice<UInt8>) -> UInt64 { b.reduce(0) { ($0 << 8) | UInt64($1) } }

    /// Reads a backup file's frames one at a time (a restore and a verification hold one
    /// chunk, not the file): `next` returns each chunk, then nil at the trailer, which it checks.
    public final class Reader {
        let path: String
        let handle: FileHandle
        private var digests: [UInt8] = []
        private var total: UInt64 = 0
        public private(set) var frames: UInt64 = 0
        public private(set) var appliedIndex: UInt64 = 0
        public private(set) var lastTimestamp: Int64 = 0
        private var ended = false

        public init(path: String) throws {
            guard let handle = FileHandle(forReadingAtPath: path) else { throw BackupError("cannot open backup file \(path)") }
            self.path = path
            self.handle = handle
            guard try take(magic.count) == magic else {
                try? handle.close()
                throw BackupError("\(path) is not an Ember backup file")
            }
        }

        deinit { try? handle.close() }

        private func take(_ n: Int) throws -> [UInt8] {
            guard let d = try handle.read(upToCount: n), d.count == n else { throw BackupError("backup file \(path) is truncated") }
            return Array(d)
        }

        /// The next chunk, or nil after the last one once the trailer checked out.
        public func next() throws -> [UInt8]? {
            if ended { return nil }
            let n = Int(readBE(try take(4)[...]))
            if n == 0 {
                let trailer = try take(36)
                guard readBE(trailer[0..<8]) == frames, readBE(trailer[8..<16]) == total,
                      Array(trailer[16..<36]) == FastSHA1.digest(digests) else {
                    throw BackupError("backup file \(path) fails its checksum")
                }
                guard frames > 0 else { throw BackupError("backup file \(path) holds no snapshot") }
                ended = true
                return nil
            }
            guard n <= maxFrameBytes else { throw BackupError("backup frame of \(n) bytes exceeds \(maxFrameBytes)") }
            let chunk = try take(n)
            if frames == 0 {
                appliedIndex = try headerAppliedIndex(chunk)
                lastTimestamp = headerTimestamp(chunk)
            }
            digests += FastSHA1.digest(chunk)
            total += UInt64(n)
            frames += 1
            return chunk
        }

        public var summary: Summary { Summary(appliedIndex: appliedIndex, frames: frames, bytes: total, lastTimestamp: lastTimestamp) }
    }

    /// Checks a whole backup file (frames, sizes, checksum) one frame at a time.
    public static func verify(path: String) throws -> Summary {
        let r = try Reader(path: path)
        while try r.next() != nil {}
        return r.summary
    }

    /// Reads and verifies a whole backup file; returns its chunks (all in memory: for tests and
    /// small files; restores go frame by frame, `Reader`) and its summary.
    public static func read(path: String) throws -> (chunks: [[UInt8]], summary: Summary) {
        let r = try Reader(path: path)
        var chunks: [[UInt8]] = []
        while let c = try r.next() { chunks.append(c) }
        return (chunks, r.summary)
    }

    /// The last timestamp in a snapshot's first record (after applied index and term), 0 if absent.
    static func headerTimestamp(_ chunk: [UInt8]) -> Int64 {
        guard chunk.count >= 27, chunk[2] >= 24, chunk[2] < 0x80 else { return 0 }
        return Int64(bitPattern: readBE(chunk[19..<27]))
    }

    /// The applied index in a snapshot's first record (table 0xFF, empty key, u64 BE applied...).
    static func headerAppliedIndex(_ chunk: [UInt8]) throws -> UInt64 {
        // [0xFF][varint 0][varint n >= 8][applied u64 BE ...]: all three leading bytes are single-byte varints.
        guard chunk.count >= 11, chunk[0] == 0xFF, chunk[1] == 0, chunk[2] >= 8, chunk[2] < 0x80 else {
            throw BackupError("backup snapshot header")
        }
        return readBE(chunk[3..<11])
    }
}

extension EmberStore {
    /// Writes a consistent backup of the whole state to `path` (replaced atomically).
    @discardableResult
    public func writeBackup(to path: String) throws -> BackupFormat.Summary {
        let tmp = path + ".partial"
        guard FileManager.default.createFile(atPath: tmp, contents: nil),
              let handle = FileHandle(forWritingAtPath: tmp) else {
            throw BackupError("cannot create backup file \(tmp)")
        }
        var frames: UInt64 = 0, total: UInt64 = 0
        var digests: [UInt8] = []
        var applied: UInt64 = 0
        var lastTimestamp: Int64 = 0
        // A backup holds every write already answered on this node.
        core.visibility.waitForReleased()
        do {
            defer { try? handle.close() }
            try handle.write(contentsOf: BackupFormat.magic)
            try snapshot { chunk in
                if frames == 0 {
                    applied = try BackupFormat.headerAppliedIndex(chunk)
                    lastTimestamp = BackupFormat.headerTimestamp(chunk)
                }
                try handle.write(contentsOf: BackupFormat.be32(chunk.count) + chunk)
                digests += FastSHA1.digest(chunk)
                frames += 1
                total += UInt64(chunk.count)
            }
            try handle.write(contentsOf: BackupFormat.be32(0) + BackupFormat.be64(frames) + BackupFormat.be64(total)
                             + FastSHA1.digest(digests))
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(atPath: tmp)
            throw error
        }
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: tmp, toPath: path)
        return BackupFormat.Summary(appliedIndex: applied, frames: frames, bytes: total, lastTimestamp: lastTimestamp)
    }

    /// Replaces the whole state with a verified backup file (offline restore of a node's data).
    @discardableResult
    /// Verified first (a bad file installs nothing), then installed frame by frame: memory
    /// holds one chunk, not the backup.
    public func restoreBackup(from path: String) async throws -> BackupFormat.Summary {
        let summary = try BackupFormat.verify(path: path)
        let installed = try await perform { w -> BackupFormat.Summary in
            let reader = try BackupFormat.Reader(path: path)
            try w.installSnapshot(next: { try reader.next() })
            return reader.summary
        }
        // A file changed since it was verified fails its checksum before the commit; this
        // catches one replaced by another valid backup.
        guard installed == summary else { throw BackupError("backup file \(path) changed while it was restored") }
        return summary
    }
}
