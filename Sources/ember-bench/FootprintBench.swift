import EmberCore
import EmberStorage
import Foundation

/// `ember-bench storage --footprint`: the disk a data set takes. N children
/// `{"score": <int>, "name": "n"}` under /items (with `.indexOn: ["score"]` unless --no-index),
/// written as updates of 10,000 children (as 100 REST PATCHes load 1,000,000), then the data
/// file's bytes per byte of JSON and the per-table breakdown. Footprint does not depend on load.
struct FootprintRun {
    /// Children per update (a PATCH of this many).
    static let batch = 10_000

    let store: EmberStore
    let children: Int
    let index: Bool

    func run() async throws {
        if index {
            _ = try await store.submit(namespace: "bench", .setRules(text: #"{"rules": {".read": true, ".write": true, "items": {".indexOn": ["score"]}}}"#))
        }
        var jsonBytes = 0
        var start = 0
        let t0 = Date()
        while start < children {
            let end = min(children, start + Self.batch)
            var parts: [(Path, JSON)] = []
            parts.reserveCapacity(end - start)
            var body: KeyMap<JSON> = [:]
            for i in start..<end {
                let key = String(format: "c%07d", i)
                let child: JSON = .object(["score": .int(Int64(i)), "name": .string("n")])
                parts.append((try Path("/" + key), child))
                body[key] = child
            }
            // The bytes a client sends: the PATCH body.
            jsonBytes += JSON.object(body).serializedBytes(pretty: false).count
            _ = try await store.submit(namespace: "bench", .update(path: try Path("/items"), values: parts))
            start = end
        }
        let seconds = Date().timeIntervalSince(t0)
        let f = try store.footprint()
        let mb = { (b: Int) in String(format: "%.1f MB", Double(b) / 1e6) }
        print("footprint: \(children) children {score, name}\(index ? " with .indexOn score" : ", no index"), "
              + "\(children / Self.batch + (children % Self.batch > 0 ? 1 : 0)) updates in \(String(format: "%.1f", seconds)) s, "
              + "log retention \(store.options.logRetention); "
              + "load average \(loadAverage())")
        print("JSON \(mb(jsonBytes)); data.mdb \(mb(f.fileBytes)) = \(String(format: "%.2f", Double(f.fileBytes) / Double(jsonBytes))) bytes per JSON byte "
              + "(live \(mb(f.liveBytes)) = \(String(format: "%.2f", Double(f.liveBytes) / Double(jsonBytes))))")
        print("table          entries      pages       bytes")
        for t in f.tables {
            print(t.name.padding(toLength: 12, withPad: " ", startingAt: 0)
                  + String(format: "%10d %10d %11@", t.entries, t.pages, mb(t.bytes)))
        }
        print("free".padding(toLength: 12, withPad: " ", startingAt: 0) + String(format: "%10@ %10d %11@", "-", f.freePages, mb(f.freeBytes)))
        try queryLatency()
    }

    /// Queries the issue compares before and after: orderByChild("score") (or by key without the
    /// index) + limitToLast(100) on the loaded /items, in process (no HTTP), one read transaction each.
    func queryLatency(runs: Int = 200) throws {
        let spec = QuerySpec(index: index ? .child(try Path("/score")) : .key, limit: 100, limitFromStart: false)
        var ms: [Double] = []
        for _ in 0..<runs {
            let t = Date()
            let r = try store.query(namespace: "bench", path: try Path("/items"), spec: spec)
            ms.append(Date().timeIntervalSince(t) * 1000)
            precondition(r.count == min(100, children), "query answered \(r.count) children")
        }
        ms.sort()
        print("query \(index ? "orderByChild(score)" : "orderByKey") limitToLast(100), \(runs) runs in process: "
              + String(format: "median %.3f ms, p90 %.3f ms, max %.3f ms", ms[runs / 2], ms[runs * 9 / 10], ms[runs - 1])
              + "; load average \(loadAverage())")
    }
}
