// storage-bench: CPU cost of the storage layer alone (no HTTP), for short paths and for paths
// whose keys overflow LMDB's key limit. Not durable (MDB_NOSYNC): it measures CPU, not fsync.
//
//   swift build -c release --product storage-bench && .build/release/storage-bench [writes] [--long]
import EmberCore
import EmberStorage
import Foundation

let args = CommandLine.arguments.dropFirst()
let writes = args.compactMap { Int($0) }.first ?? 100_000
let long = args.contains("--long")
let inFlight = 256

let dir = NSTemporaryDirectory() + "storage-bench-\(UUID().uuidString)"
var options = StoreOptions()
options.mapSize = 8 << 30
options.durable = false
let store = try EmberStore(directory: dir, options: options)
defer { store.close(); try? FileManager.default.removeItem(atPath: dir) }

/// Short: `/bench/w<i%64>/k<i>` (tree keys of ~20 bytes). Long: the same under a 768-byte key
/// and a 500-byte key (every key overflows: ~1.3 KB).
let prefix = long ? [String(repeating: "L", count: 768), String(repeating: "m", count: 500)] : []
func path(_ i: Int) -> Path { Path(validated: prefix + ["bench", "w\(i % 64)", "k\(i)"]) }
let value = JSON.string("0123456789abcdef")

/// Process CPU time (user + system), which is steadier than wall time on a shared machine.
func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// Wall and CPU seconds of `body`.
func seconds(_ body: () async throws -> Void) async rethrows -> (wall: Double, cpu: Double) {
    let t0 = DispatchTime.now().uptimeNanoseconds
    let c0 = cpuSeconds()
    try await body()
    return (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9, cpuSeconds() - c0)
}

let writeTime = try await seconds {
    try await withThrowingTaskGroup(of: Void.self) { g in
        for i in 0..<writes {
            if i >= inFlight { try await g.next() }
            g.addTask { _ = try await store.submit(namespace: "b", .set(path: path(i), value: value, condition: nil)) }
        }
        try await g.waitForAll()
    }
}

var rng = SystemRandomNumberGenerator()
let reads = writes
var found = 0
let readTime = try await seconds {
    for _ in 0..<reads {
        let r = try store.read(namespace: "b", path: path(Int.random(in: 0..<writes, using: &rng)))
        if !r.node.isEmpty { found += 1 }
    }
}
precondition(found == reads, "every read finds its value")

let queries = 20_000
let queryTime = try await seconds {
    for q in 0..<queries {
        let parent = Path(validated: prefix + ["bench", "w\(q % 64)"])
        let r = try store.query(namespace: "b", path: parent, spec: QuerySpec(index: .key).limited(toFirst: 10))
        precondition(r.count == 10)
    }
}

func rate(_ n: Int, _ t: (wall: Double, cpu: Double)) -> String {
    String(format: "%.0f/s, %.2f µs CPU/op", Double(n) / t.wall, t.cpu / Double(n) * 1e6)
}
print("storage-bench \(long ? "long (~1.3 KB tree keys, overflow tables)" : "short") paths, \(writes) writes, \(inFlight) in flight, not durable")
print("  writes:  \(rate(writes, writeTime))")
print("  reads:   \(rate(reads, readTime))  (point read of a leaf + its version)")
print("  queries: \(rate(queries, queryTime))  (\"$key\" limitToFirst 10 of ~\(writes / 64) children)")
