import CLMDB
import Foundation

/// What the writer thread handed to the kernel: LMDB's commits write their dirty pages from
/// that thread (`pwrite`/`writev`, then the meta page), so its `wchar` over a run divided by the
/// commits is the pages a commit writes, measured rather than inferred from the process's
/// total (which counts the archive's segments and everything else too). Linux only
/// (`/proc/<pid>/task/<tid>/io`); nil elsewhere.
public struct ThreadIO: Sendable, Equatable {
    /// Bytes passed to write calls (`wchar`).
    public var bytesHandedToWrites: UInt64
    /// Write calls (`syscw`).
    public var writeCalls: UInt64
    /// Bytes this thread caused to be sent to storage (`write_bytes`: page-cache pages it
    /// dirtied).
    public var storageBytes: UInt64

    /// Parses a `/proc/.../io` text; nil when a field is missing.
    public init?(procText: String) {
        var fields: [Substring: UInt64] = [:]
        for line in procText.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon]] = UInt64(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        guard let w = fields["wchar"], let c = fields["syscw"], let b = fields["write_bytes"] else { return nil }
        bytesHandedToWrites = w
        writeCalls = c
        storageBytes = b
    }

    /// The path of the calling thread's counters (`/proc/thread-self` resolved, so another
    /// thread can read them later).
    static func callingThreadPath() -> String? {
        #if os(Linux)
        var buf = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return "/proc/" + String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/io"
        #else
        return nil
        #endif
    }
}

/// One log table's B-tree (`mdb_stat`): a batch's appends copy one page per level of the
/// table's right edge besides the rows' own pages, so its depth is part of what the archive's
/// log rows cost per commit.
public struct LogTableShape: Sendable, Equatable {
    public let name: String
    public let rows: Int
    public let depth: Int
    public let branchPages: Int
    public let leafPages: Int
    public let overflowPages: Int
}

extension EmberStore {
    /// The writer thread's write counters so far (nil before its thread started, or off Linux).
    public func writerThreadIO() -> ThreadIO? {
        guard let path = core.writerIOPath.withLock({ $0 }),
              let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return ThreadIO(procText: text)
    }

    /// The log tables that hold rows, in reading order.
    public func logTableShapes() throws -> [LogTableShape] {
        try withRead { t in
            try LogRing.readOrder(tables, t, ring: options.alternatingLog).compactMap { dbi -> LogTableShape? in
                var s = MDB_stat()
                try check(mdb_stat(t.ptr, dbi, &s))
                guard s.ms_entries > 0 else { return nil }
                return LogTableShape(name: LogRing.name(tables, dbi), rows: s.ms_entries, depth: Int(s.ms_depth),
                                     branchPages: s.ms_branch_pages, leafPages: s.ms_leaf_pages, overflowPages: s.ms_overflow_pages)
            }
        }
    }
}
