import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the archive's objects live: named, immutable once put, listed by name. The archiver
/// and restore use only these five calls, so an object store (S3-compatible: PUT, a multipart
/// upload for `putFile`, LIST with pagination, GET, DELETE) can stand in for a directory
/// (deploy/OPERATIONS.md, "Point-in-time recovery").
public protocol ArchiveStore: Sendable {
    /// Stores `bytes` under `name`, durably and atomically (a reader never sees part of it).
    func put(_ name: String, bytes: [UInt8]) throws
    /// Stores the file at `path` under `name` (a base snapshot: too large to hold in memory).
    /// The file may be moved away (consumed).
    func putFile(_ name: String, from path: String) throws
    /// Every object's name (any order).
    func list() throws -> [String]
    func get(_ name: String) throws -> [UInt8]
    /// Copies the object to a local file (a base, restored frame by frame from there).
    func getFile(_ name: String, to path: String) throws
    func delete(_ name: String) throws
    /// Where the archive is, for messages.
    var location: String { get }
}

/// The archive as a directory (a local disk or a volume every member mounts). Writes go to a
/// temporary file that is fsynced, renamed into place, and the directory fsynced.
public struct DirectoryArchiveStore: ArchiveStore {
    public let directory: String
    /// Temporary files start with this; listings skip them.
    static let temporaryPrefix = ".partial-"

    public init(directory: String, create: Bool = true) throws {
        self.directory = directory
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDir) {
            guard isDir.boolValue else { throw ArchiveError("\(directory) is not a directory") }
        } else if create {
            do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
                throw ArchiveError("cannot create archive directory \(directory): \(error.localizedDescription)")
            }
        } else {
            throw ArchiveError("archive directory \(directory) does not exist")
        }
    }

    public var location: String { directory }

    func path(_ name: String) throws -> String {
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else { throw ArchiveError("bad archive object name \(name)") }
        return directory + "/" + name
    }

    public func put(_ name: String, bytes: [UInt8]) throws {
        let target = try path(name)
        let tmp = directory + "/" + Self.temporaryPrefix + UUID().uuidString
        guard FileManager.default.createFile(atPath: tmp, contents: nil), let h = FileHandle(forWritingAtPath: tmp) else {
            throw ArchiveError("cannot create \(tmp)")
        }
        do {
            defer { try? h.close() }
            try h.write(contentsOf: bytes)
            try h.synchronize()
        } catch {
            try? FileManager.default.removeItem(atPath: tmp)
            throw ArchiveError("cannot write \(target): \(error.localizedDescription)")
        }
        try publish(tmp, as: target)
    }

    public func putFile(_ name: String, from source: String) throws {
        let target = try path(name)
        let tmp = directory + "/" + Self.temporaryPrefix + UUID().uuidString
        // Moved when on the same filesystem (a base can be large), copied otherwise.
        if rename(source, tmp) == 0 { return try publish(tmp, as: target) }
        do {
            try FileManager.default.copyItem(atPath: source, toPath: tmp)
            let h = try FileHandle(forUpdating: URL(fileURLWithPath: tmp))
            defer { try? h.close() }
            try h.synchronize()
        } catch {
            try? FileManager.default.removeItem(atPath: tmp)
            throw ArchiveError("cannot write \(target): \(error.localizedDescription)")
        }
        try publish(tmp, as: target)
    }

    /// Renames the synced temporary file into place (atomic), then syncs the directory entry.
    func publish(_ tmp: String, as target: String) throws {
        if rename(tmp, target) != 0 {
            let e = errno
            try? FileManager.default.removeItem(atPath: tmp)
            throw ArchiveError("cannot rename into \(target): errno \(e)")
        }
        let fd = open(directory, O_RDONLY)
        if fd >= 0 { _ = fsync(fd); close(fd) }
    }

    public func list() throws -> [String] {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: directory).filter { !$0.hasPrefix(".") }
        } catch {
            throw ArchiveError("cannot list archive directory \(directory): \(error.localizedDescription)")
        }
    }

    public func get(_ name: String) throws -> [UInt8] {
        let p = try path(name)
        guard let d = FileManager.default.contents(atPath: p) else { throw ArchiveError("cannot read \(p)") }
        return Array(d)
    }

    public func getFile(_ name: String, to target: String) throws {
        let p = try path(name)
        try? FileManager.default.removeItem(atPath: target)
        do { try FileManager.default.copyItem(atPath: p, toPath: target) } catch {
            throw ArchiveError("cannot copy \(p): \(error.localizedDescription)")
        }
    }

    public func delete(_ name: String) throws {
        let p = try path(name)
        do { try FileManager.default.removeItem(atPath: p) } catch {
            throw ArchiveError("cannot delete \(p): \(error.localizedDescription)")
        }
    }

    /// Temporary files a crashed writer left (older than `seconds`): removed by the archiver.
    public func removeStaleTemporaries(olderThan seconds: Double) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for n in names where n.hasPrefix(Self.temporaryPrefix) {
            let p = directory + "/" + n
            if let m = (try? FileManager.default.attributesOfItem(atPath: p))?[.modificationDate] as? Date,
               Date().timeIntervalSince(m) > seconds {
                try? FileManager.default.removeItem(atPath: p)
            }
        }
    }
}
