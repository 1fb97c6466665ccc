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
    }

    static func be32(_ n: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: n >> (24 - 8 * $0)) } }
    static func be64(_ n: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: n >> (56 - 8 * UInt64($0))) } }
    static func readBE(_ b: ArraySlice<UInt8>) -> UInt64 { b.reduce(0) { ($0 << 8) | UInt64($1) } }

    /// Reads and verifies a whole backup file; returns its chunks (in memory: installing a
    /// snapshot takes them all in one write transaction) and its summary.
    public static func read(path: String) throws -> (chunks: [[UInt8]], summary: Summary) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BackupError("cannot open backup file \(path)")
        }
        defer { try? handle.close() }
        func take(_ n: Int) throws -> [UInt8] {
            guard let d = try handle.read(upToCount: n), d.count == n else {
                throw BackupError("backup file \(path) is truncated")
            }
            return Array(d)
        }
        guard try take(magic.count) == magic else { throw BackupError("\(path) is not an Ember backup file") }
        var chunks: [[UInt8]] = []
        var digests: [UInt8] = []
        var total: UInt64 = 0
        while true {
            let n = Int(readBE(try take(4)[...]))
            if n == 0 { break }
            guard n <= maxFrameBytes else { throw BackupError("backup frame of \(n) bytes exceeds \(maxFrameBytes)") }
            let chunk = try take(n)
            digests += SHA1.digest(chunk)
            total += UInt64(n)
            chunks.append(chunk)
        }
        let trailer = try take(36)
        guard readBE(trailer[0..<8]) == UInt64(chunks.count), readBE(trailer[8..<16]) == total,
              Array(trailer[16..<36]) == SHA1.digest(digests) else {
            throw BackupError("backup file \(path) fails its checksum")
        }
        guard let first = chunks.first else { throw BackupError("backup file \(path) holds no snapshot") }
        return (chunks, Summary(appliedIndex: try headerAppliedIndex(first), frames: UInt64(chunks.count), bytes: total))
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
        // A backup holds every write already answered on this node.
        core.visibility.waitForReleased()
        do {
            defer { try? handle.close() }
            try handle.write(contentsOf: BackupFormat.magic)
            try snapshot { chunk in
                if frames == 0 { applied = try BackupFormat.headerAppliedIndex(chunk) }
                try handle.write(contentsOf: BackupFormat.be32(chunk.count) + chunk)
                digests += SHA1.digest(chunk)
                frames += 1
                total += UInt64(chunk.count)
            }
            try handle.write(contentsOf: BackupFormat.be32(0) + BackupFormat.be64(frames) + BackupFormat.be64(total)
                             + SHA1.digest(digests))
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(atPath: tmp)
            throw error
        }
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: tmp, toPath: path)
        return BackupFormat.Summary(appliedIndex: applied, frames: frames, bytes: total)
    }

    /// Replaces the whole state with a verified backup file (offline restore of a node's data).
    @discardableResult
    public func restoreBackup(from path: String) async throws -> BackupFormat.Summary {
        let (chunks, summary) = try BackupFormat.read(path: path)
        try await installSnapshot(chunks: chunks)
        return summary
    }
}
