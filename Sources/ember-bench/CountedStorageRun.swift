import EmberCore
import EmberStorage
import Foundation

/// `ember-bench storage --writes N`: N distinct keys `/bench/w<i%64>/k<i>` written with a fixed
/// number in flight, then `reads` point reads of random written keys and `queries` `$key`
/// limitToFirst 10 queries of the 64 parents. Each phase prints its rate and the process CPU per
/// operation (getrusage: microsecond resolution, steadier than wall time on a shared machine).
struct CountedStorageRun {
    /// Parents the keys are spread over (a query reads the first 10 of ~N/64 children).
    static let parents = 64

    let store: EmberStore
    let prefix: [String]
    let value: JSON
    let writes: Int
    let inFlight: Int
    let reads: Int
    let queries: Int

    func path(_ i: Int) -> Path { Path(validated: prefix + ["bench", "w\(i % Self.parents)", "k\(i)"]) }

    func run(describe: String) async throws {
        print("ember-bench storage: \(writes) writes, \(inFlight) in flight, \(describe), load average \(loadAverage())")
        var failed = 0
        let writeTime = await measure {
            // Submitter k writes keys k, k + inFlight, k + 2 inFlight, ...: inFlight writes in flight.
            failed = await withTaskGroup(of: Int.self) { group in
                for k in 0..<min(inFlight, writes) {
                    group.addTask {
                        var errors = 0
                        for i in stride(from: k, to: writes, by: inFlight) {
                            do {
                                _ = try await store.submit(namespace: "bench", .set(path: path(i), value: value, condition: nil))
                            } catch { errors += 1 }
                        }
                        return errors
                    }
                }
                return await group.reduce(0, +)
            }
        }
        print("  writes:  \(rate(writes, writeTime)), \(failed) errors")
        if reads > 0 {
            var rng = SystemRandomNumberGenerator()
            var found = 0
            let readTime = try await measure {
                for _ in 0..<reads {
                    let r = try store.read(namespace: "bench", path: path(Int.random(in: 0..<writes, using: &rng)))
                    if !r.node.isEmpty { found += 1 }
                }
            }
            print("  reads:   \(rate(reads, readTime))  (point read of a leaf + its version; \(found) of \(reads) found)")
        }
        if queries > 0 {
            var short = 0
            let queryTime = try await measure {
                for q in 0..<queries {
                    let parent = q % Self.parents
                    let r = try store.query(namespace: "bench", path: Path(validated: prefix + ["bench", "w\(parent)"]),
                                            spec: QuerySpec(index: .key).limited(toFirst: 10))
                    if r.count < min(10, children(of: parent)) { short += 1 }
                }
            }
            print("  queries: \(rate(queries, queryTime))  (\"$key\" limitToFirst 10 of ~\(writes / Self.parents) children; \(short) short answers)")
        }
    }

    /// Keys written under parent `p`: the i < writes with i % parents == p.
    func children(of p: Int) -> Int { p < writes ? (writes - 1 - p) / Self.parents + 1 : 0 }

    func rate(_ n: Int, _ t: (wall: Double, cpu: Double)) -> String {
        String(format: "%.0f/s, %.2f µs CPU/op", Double(n) / t.wall, t.cpu / Double(n) * 1e6)
    }
}

/// Process CPU time (user + system) so far, from getrusage.
func rusageCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// Wall and CPU seconds of `body`.
func measure(_ body: () async throws -> Void) async rethrows -> (wall: Double, cpu: Double) {
    let t0 = ContinuousClock.now
    let c0 = rusageCPUSeconds()
    try await body()
    return ((ContinuousClock.now - t0).seconds, rusageCPUSeconds() - c0)
}
