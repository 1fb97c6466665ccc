import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Write → listener latency across replicas: writes carrying their send time (µs since the epoch)
/// go to one server at a fixed rate (open loop: a slow answer never delays the next send); a
/// listener on another server reads them back. Ember's listener is an SSE stream, etcd's a watch.
enum ClusterProbe {
    struct Latency {
        /// Write → event, ms, sorted.
        var samples: [Double]
        var acknowledged: Int
        var errors: Int
        /// Sends that left more than 1 ms after their scheduled time (the generator fell behind).
        var lateSends: Int
        var p50: Double { pct(0.5) }
        var p99: Double { pct(0.99) }
        func pct(_ p: Double) -> Double { samples.isEmpty ? 0 : samples[min(samples.count - 1, Int(Double(samples.count) * p))] }
    }

    /// Keys the probe cycles through (a listener sees every write: values always differ).
    static let keys = 1_000

    static func micros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    /// Sends `rate` writes/s for `seconds`, then the stop write; `send(i, micros)` says whether
    /// the write was acknowledged.
    static func openLoop(rate: Int, seconds: Double, maxInFlight: Int,
                         send: @escaping @Sendable (Int, Int64) async -> Bool,
                         stop: @escaping @Sendable () async -> Void) async -> (acked: Int, errors: Int, late: Int) {
        let start = ContinuousClock.now
        let total = Int(Double(rate) * seconds)
        let interval = Duration.nanoseconds(Int64(1e9 / Double(rate)))
        var acked = 0, errors = 0, late = 0
        await withTaskGroup(of: Bool.self) { group in
            var inFlight = 0
            for i in 0..<total {
                let due = start + interval * i
                if due > .now { try? await Task.sleep(until: due, clock: .continuous) }
                if ContinuousClock.now - due > .milliseconds(1) { late += 1 }
                while inFlight >= maxInFlight, let ok = await group.next() {
                    inFlight -= 1
                    if ok { acked += 1 } else { errors += 1 }
                }
                inFlight += 1
                group.addTask { await send(i, micros()) }
            }
            for await ok in group { if ok { acked += 1 } else { errors += 1 } }
        }
        await stop()
        return (acked, errors, late)
    }

    // MARK: - Ember: PUT at the leader, SSE on a follower

    static func emberLatency(_ http: HTTPClient, writeTo: String, listenOn: String, rate: Int, seconds: Double,
                             maxInFlight: Int) async throws -> Latency {
        var request = HTTPClientRequest(url: listenOn + "/probe.json")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let stream = try await http.execute(request, timeout: .seconds(Int64(seconds) + 30))
        let writer = Task {
            await openLoop(rate: rate, seconds: seconds, maxInFlight: maxInFlight, send: { i, sent in
                var put = HTTPClientRequest(url: "\(writeTo)/probe/p\(i % keys).json?print=silent")
                put.method = .PUT
                put.body = .bytes(ByteBuffer(string: "\(sent)"))
                guard let r = try? await http.execute(put, timeout: .seconds(10)) else { return false }
                _ = try? await r.body.collect(upTo: 1 << 16)
                return r.status.code / 100 == 2
            }, stop: {
                // Ends the reader (the stream is otherwise quiet until its next keep-alive).
                var stop = HTTPClientRequest(url: "\(writeTo)/probe/stop.json?print=silent")
                stop.method = .PUT
                stop.body = .bytes(ByteBuffer(string: "0"))
                _ = try? await http.execute(stop, timeout: .seconds(10))
            })
        }
        var samples: [Double] = []
        var lines = LineSplitter()
        reading: for try await chunk in stream.body {
            let now = micros()
            for line in lines.feed(chunk) {
                // `data: {"path":"/p7","data":1732260000000000}` (the initial put is the whole map)
                guard line.hasPrefix("data: "),
                      let obj = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any],
                      let path = obj["path"] as? String else { continue }
                if path == "/stop" { break reading }
                guard path.hasPrefix("/p"), let sent = (obj["data"] as? NSNumber)?.int64Value else { continue }
                samples.append(Double(now - sent) / 1000)
            }
        }
        let w = await writer.value
        return Latency(samples: samples.sorted(), acknowledged: w.acked, errors: w.errors, lateSends: w.late)
    }

    // MARK: - etcd: put at the leader, watch on a follower (HTTP gateway)

    /// The client URL of the member that leads.
    static func etcdLeader(_ http: HTTPClient, _ urls: [String]) async throws -> String {
        for _ in 0..<100 {
            for url in urls {
                var r = HTTPClientRequest(url: url + "/v3/maintenance/status")
                r.method = .POST
                r.body = .bytes(ByteBuffer(string: "{}"))
                guard let resp = try? await http.execute(r, timeout: .seconds(2)),
                      let body = try? await resp.body.collect(upTo: 1 << 20),
                      let obj = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                      let header = obj["header"] as? [String: Any] else { continue }
                let me = "\(header["member_id"] ?? "")", leader = "\(obj["leader"] ?? "-")"
                if me == leader { return url }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("no etcd member says it leads")
    }

    static func etcdLatency(_ http: HTTPClient, writeTo: String, listenOn: String, rate: Int, seconds: Double,
                            maxInFlight: Int) async throws -> Latency {
        func b64(_ s: String) -> String { Data(s.utf8).base64EncodedString() }
        var watch = HTTPClientRequest(url: listenOn + "/v3/watch")
        watch.method = .POST
        watch.body = .bytes(ByteBuffer(string: #"{"create_request":{"key":"\#(b64("/probe/"))","range_end":"\#(b64("/probe0"))"}}"#))
        let stream = try await http.execute(watch, timeout: .seconds(Int64(seconds) + 30))
        let writer = Task {
            // The watch is created asynchronously: give it a moment before the first put.
            try? await Task.sleep(for: .milliseconds(200))
            return await openLoop(rate: rate, seconds: seconds, maxInFlight: maxInFlight, send: { i, sent in
                guard let r = try? await http.execute(etcdPut(writeTo, key: "/probe/p\(i % keys)", value: "\(sent)"), timeout: .seconds(10))
                else { return false }
                _ = try? await r.body.collect(upTo: 1 << 16)
                return r.status.code / 100 == 2
            }, stop: {
                _ = try? await http.execute(etcdPut(writeTo, key: "/probe/stop", value: "0"), timeout: .seconds(10))
            })
        }
        var samples: [Double] = []
        var lines = LineSplitter()
        reading: for try await chunk in stream.body {
            let now = micros()
            // The gateway streams one JSON object per watch response, newline-separated.
            for line in lines.feed(chunk) {
                guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      let result = obj["result"] as? [String: Any], let events = result["events"] as? [[String: Any]] else { continue }
                for e in events {
                    guard let kv = e["kv"] as? [String: Any], let k = kv["key"] as? String, let v = kv["value"] as? String,
                          let key = Data(base64Encoded: k).flatMap({ String(data: $0, encoding: .utf8) }),
                          let value = Data(base64Encoded: v).flatMap({ String(data: $0, encoding: .utf8) }) else { continue }
                    if key == "/probe/stop" { break reading }
                    if let sent = Int64(value) { samples.append(Double(now - sent) / 1000) }
                }
            }
        }
        let w = await writer.value
        return Latency(samples: samples.sorted(), acknowledged: w.acked, errors: w.errors, lateSends: w.late)
    }
}

/// Complete lines of a streamed body (SSE events, the etcd gateway's watch responses).
struct LineSplitter {
    private var pending = ""

    mutating func feed(_ chunk: ByteBuffer) -> [Substring] {
        pending += String(buffer: chunk)
        guard let last = pending.lastIndex(of: "\n") else { return [] }
        let complete = pending[..<last]
        pending = String(pending[pending.index(after: last)...])
        return complete.split(separator: "\n", omittingEmptySubsequences: false)
    }
}
