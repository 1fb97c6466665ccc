import CLMDB
import Foundation

/// Snapshot images as files, for Raft transfers that never hold the whole state in memory.
///
/// A snapshot file is the store's snapshot stream (`snapshot(maxChunkBytes:_:)`, table-tagged
/// records; its first record is the header) framed as `[u32 BE length][chunk]...`. The leader
/// writes one from a single read transaction (`writeSnapshotFile`) and serves byte ranges of it;
/// the follower appends the ranges it receives to a staging file (`SnapshotStaging`) and, once
/// complete, installs it with `installSnapshot(file:)`, one frame in memory at a time, in ONE
/// write transaction: a crash or a bad file before the commit leaves the old state intact.
public struct SnapshotFileInfo: Sendable, Equatable {
    /// Applied index and term of the state the file holds.
    public var index: UInt64
    public var term: UInt64
    public var size: Int
    /// Trigger state in 0.6.0's layout (`TriggerLegacyLayout`): a member of peer level 3 may install it.
    public var legacyTriggers = false
}

/// Largest frame accepted when reading a snapshot file (a store chunk is about
/// `maxChunkBytes` plus one record, and a record is bounded by LMDB's value size).
public let snapshotFileMaxFrameBytes = 64 << 20

extension EmberStore {
    /// Writes the whole state, read in one read transaction, to `path` (replaced atomically).
    /// `legacyTriggers`: see `snapshot`.
    public func writeSnapshotFile(path: String, maxChunkBytes: Int = 1 << 20, legacyTriggers: Bool = false) throws -> SnapshotFileInfo {
        let tmp = path + ".tmp"
        try? FileManager.default.removeItem(atPath: tmp)
        guard FileManager.default.createFile(atPath: tmp, contents: nil) else {
            throw StorageError.corrupt("cannot create \(tmp)")
        }
        var header: (UInt64, UInt64)?
        var size = 0
        do {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: tmp))
            defer { try? handle.close() }
            try snapshot(maxChunkBytes: maxChunkBytes, legacyTriggers: legacyTriggers) { chunk in
                if header == nil { header = try Self.snapshotHeader(chunk) }
                try handle.write(contentsOf: Self.be32(chunk.count) + chunk)
                size += 4 + chunk.count
            }
        } catch {
            try? FileManager.default.removeItem(atPath: tmp)
            throw error
        }
        guard let header else { throw StorageError.corrupt("snapshot without header") }
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: tmp, toPath: path)
        return SnapshotFileInfo(index: header.0, term: header.1, size: size, legacyTriggers: legacyTriggers)
    }

    /// Replaces the whole state with a complete snapshot file (see the type comment). The log is
    /// emptied and restarts after the snapshot's applied index.
    public func installSnapshot(file path: String) async throws {
        try await perform { w in
            let reader = try SnapshotFileReader(path: path)
            defer { reader.close() }
            try w.installSnapshot(next: { try reader.nextFrame() })
        }
    }

    /// The applied position and the latest entry timestamp, from one read transaction.
    public func appliedPosition() throws -> (index: UInt64, term: UInt64, lastTimestamp: Int64) {
        try withRead { t in
            (try tables.metaU64(t, "applied"), try tables.metaU64(t, "appliedTerm"),
             Int64(bitPattern: try tables.metaU64(t, "lastTimestamp")))
        }
    }

    /// The first record of a store snapshot: table 0xFF, empty key, value = applied index,
    /// applied term, last timestamp (u64 BE each); lengths are LEB128 varints.
    static func snapshotHeader(_ chunk: [UInt8]) throws -> (UInt64, UInt64) {
        // tag(1) + key length varint (0) + value length varint (24; 32 with the format) + the fields
        guard chunk.count >= 27, chunk[0] == 0xFF, chunk[1] == 0, chunk[2] >= 24, chunk[2] < 0x80 else {
            throw StorageError.corrupt("snapshot header")
        }
        func u64(_ at: Int) -> UInt64 { chunk[at..<at + 8].reduce(0) { ($0 << 8) | UInt64($1) } }
        return (u64(3), u64(11))
    }

    static func be32(_ n: Int) -> [UInt8] {
        [UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
    }
}

/// Reads a snapshot file frame by frame.
final class SnapshotFileReader {
    let handle: FileHandle

    init(path: String) throws {
        guard let h = FileHandle(forReadingAtPath: path) else { throw StorageError.corrupt("cannot open \(path)") }
        handle = h
    }

    func close() { try? handle.close() }

    /// The next frame's chunk, or nil at a clean end of file.
    func nextFrame() throws -> [UInt8]? {
        let head = try handle.read(upToCount: 4) ?? Data()
        if head.isEmpty { return nil }
        guard head.count == 4 else { throw StorageError.corrupt("snapshot file: truncated frame header") }
        let n = head.reduce(0) { ($0 << 8) | Int($1) }
        guard n > 0, n <= snapshotFileMaxFrameBytes else { throw StorageError.corrupt("snapshot file: frame of \(n) bytes") }
        let body = try handle.read(upToCount: n) ?? Data()
        guard body.count == n else { throw StorageError.corrupt("snapshot file: truncated frame") }
        return [UInt8](body)
    }
}

/// A follower's staging file for a snapshot being received: byte ranges are written in order at
/// their offsets (offset 0 starts over). Memory holds one chunk at a time.
public final class SnapshotStaging: @unchecked Sendable {
    public let path: String
    private var handle: FileHandle?
    /// Bytes written so far.
    public private(set) var size = 0

    public init(path: String) {
        self.path = path
    }

    /// Writes `bytes` at `offset`, which must be 0 (restart) or the current size.
    public func write(offset: Int, _ bytes: [UInt8]) throws {
        if offset == 0 {
            close()
            try? FileManager.default.removeItem(atPath: path)
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw StorageError.corrupt("cannot create \(path)")
            }
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            size = 0
        }
        guard let handle, offset == size else { throw StorageError.corrupt("snapshot staging: write at \(offset), have \(size)") }
        try handle.write(contentsOf: bytes)
        size += bytes.count
    }

    /// Flushes the staged bytes to disk (before installing them).
    public func finish() throws {
        try handle?.synchronize()
        close()
    }

    public func close() {
        try? handle?.close()
        handle = nil
    }

    /// Deletes the staging file.
    public func discard() {
        close()
        size = 0
        try? FileManager.default.removeItem(atPath: path)
    }
}
