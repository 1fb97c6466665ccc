import Foundation
import Logging

/// `--auto-defrag free-ratio,min-bytes,quiet-window` (off by default): the node defragments its
/// own data file (the admin `DefragPort`) when at least `freeRatio` of the file and `minBytes` are
/// free pages and no write has committed for `quietWindow` (a bulk load is over; the copy's
/// catch-up then has nothing to copy and the pause is shortest).
public struct AutoDefragPolicy: Sendable, Equatable {
    public var freeRatio: Double
    public var minBytes: Int
    public var quietWindow: Duration

    /// How often the node looks (a footprint: a few `mdb_stat` calls and the free list).
    public static let checkInterval: Duration = .seconds(5)

    public init(freeRatio: Double, minBytes: Int, quietWindow: Duration) {
        self.freeRatio = freeRatio
        self.minBytes = minBytes
        self.quietWindow = quietWindow
    }

    /// "0.3,64MiB,30s": a ratio in (0, 1), bytes with an optional K/M/G(iB) suffix, seconds
    /// with an optional s/m suffix.
    public static func parse(_ text: String) throws -> AutoDefragPolicy {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        func bad(_ why: String) -> ClusterConfigError {
            ClusterConfigError("invalid --auto-defrag '\(text)': \(why) (expected free-ratio,min-bytes,quiet-window, e.g. 0.3,64MiB,30s)")
        }
        guard parts.count == 3 else { throw bad("three values") }
        guard let ratio = Double(parts[0]), ratio > 0, ratio < 1 else { throw bad("free-ratio must be between 0 and 1") }
        guard let bytes = Self.bytes(parts[1]), bytes >= 0 else { throw bad("min-bytes must be a size such as 64MiB") }
        guard let seconds = Self.seconds(parts[2]), seconds >= 0, seconds <= 86_400 else {
            throw bad("quiet-window must be 0...86400 seconds, such as 30s or 5m")
        }
        return AutoDefragPolicy(freeRatio: ratio, minBytes: bytes, quietWindow: .milliseconds(Int64(seconds * 1000)))
    }

    /// "64MiB", "2G", "4096": bytes with an optional K/M/G(iB) suffix (--auto-defrag, --max-db-size).
    public static func bytes(_ s: String) -> Int? {
        let units: [(String, Int)] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10), ("B", 1)]
        for (suffix, scale) in units where s.hasSuffix(suffix) {
            guard let n = Int(s.dropLast(suffix.count)), n <= Int.max / scale else { return nil }
            return n * scale
        }
        return Int(s)
    }

    static func seconds(_ s: String) -> Double? {
        if s.hasSuffix("m"), let n = Double(s.dropLast()) { return n * 60 }
        if s.hasSuffix("s"), let n = Double(s.dropLast()) { return n }
        return Double(s)
    }

    /// Whether a defrag is due for a file of `fileBytes` with `freeBytes` free, `quiet` after
    /// the last commit.
    public func due(freeBytes: Int, fileBytes: Int, quiet: Duration) -> Bool {
        fileBytes > 0 && freeBytes >= minBytes && Double(freeBytes) >= freeRatio * Double(fileBytes) && quiet >= quietWindow
    }
}

/// Runs the policy against the node's store until cancelled.
struct AutoDefrag {
    let policy: AutoDefragPolicy
    let stats: any StorageStatsPort
    let defrag: any DefragPort
    let logger: Logger

    func run() async {
        var lastCommits = stats.counters.commits
        var quietSince = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: AutoDefragPolicy.checkInterval)
            if Task.isCancelled { return }
            let commits = stats.counters.commits
            if commits != lastCommits {
                lastCommits = commits
                quietSince = ContinuousClock.now
                continue
            }
            guard let f = try? stats.footprint(),
                  policy.due(freeBytes: f.freeBytes, fileBytes: f.fileBytes, quiet: ContinuousClock.now - quietSince) else { continue }
            logger.info("auto-defrag starting", metadata: ["freeBytes": "\(f.freeBytes)", "fileBytes": "\(f.fileBytes)"])
            do {
                let r = try await defrag.defrag()
                logger.info("auto-defrag done", metadata: ["bytesBefore": "\(r.bytesBefore)", "bytesAfter": "\(r.bytesAfter)",
                                                           "pauseMs": "\(Double(r.pauseNanos) / 1e6)"])
            } catch {
                logger.warning("auto-defrag did not run", metadata: ["reason": "\(error)"])
            }
            // The defrag's own commits are not writes: start the quiet window again from here.
            lastCommits = stats.counters.commits
            quietSince = ContinuousClock.now
        }
    }
}
