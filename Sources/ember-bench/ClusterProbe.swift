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

    // MARK: - Ember: PUT at the leader, SSE on a follower

    static func emberLatency(_ http: HTTPClient, writeTo: String, listenOn: String, rate: Int, seconds: Double,
                             maxInFlight: Int) async throws -> Latency {
        let stream = try RawProbe.Socket(url: listenOn)
        try stream.send(RawHTTPRequest(method: "GET", target: "/probe.json", body: "", accept: "text/event-stream"))
        let listener = Task {
            try await RawProbe.onThread("probe-listener") {
                var samples: [Double] = []
                // With EMBER_LATENCY_MARKS set (emberd's timed marks, scripts/latency-marks.py):
                // each event's send and receive time, in order, for the marks to be matched with.
                var pairs = ""
                let marks = ProcessInfo.processInfo.environment["EMBER_LATENCY_MARKS"].flatMap { $0.isEmpty ? nil : $0 }
                try RawProbe.streamLines(stream) { line, now in
                    // `data: {"path":"/p7","data":1732260000000000}` (the initial put is the whole map)
                    guard line.hasPrefix("data: "),
                          let obj = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any],
                          let path = obj["path"] as? String else { return true }
                    if path == "/stop" { return false }
                    if path.hasPrefix("/p"), let sent = (obj["data"] as? NSNumber)?.int64Value {
                        samples.append(Double(now - sent) / 1000)
                        if marks != nil { pairs += "\(sent) \(now)\n" }
                    }
                    return true
                }
                if let marks {
                    FileManager.default.createFile(atPath: "\(marks)/probe-\(getpid())-\(micros()).samples", contents: Data(pairs.utf8))
                }
                return samples
            }
        }
        // The stream is open once its first event (the initial state) can arrive: give it a moment.
        try await Task.sleep(for: .milliseconds(200))
        let w = try await RawProbe.onThread("probe-writer") {
            try RawProbe.openLoopWrites(url: writeTo, rate: rate, seconds: seconds, maxInFlight: maxInFlight,
                                        request: { i, sent in
                                            RawHTTPRequest(method: "PUT", target: "/probe/p\(i % keys).json?print=silent", body: "\(sent)")
                                        },
                                        stop: RawHTTPRequest(method: "PUT", target: "/probe/stop.json?print=silent", body: "0"))
        }
        let samples = try await listenerResult(listener, stream)
        return Latency(samples: samples.sorted(), acknowledged: w.acked, errors: w.errors, lateSends: w.late)
    }

    /// The listener's samples; it ends at the stop write, or is cut off `drainSeconds` after the
    /// writer finished (a lost stop write must not hang the bench).
    static func listenerResult(_ listener: Task<[Double], any Error>, _ stream: RawProbe.Socket) async throws -> [Double] {
        let cutoff = Task {
            try await Task.sleep(for: .seconds(RawProbe.drainSeconds))
            stream.shutdown()
        }
        defer { cutoff.cancel() }
        return try await listener.value
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
        let stream = try RawProbe.Socket(url: listenOn)
        try stream.send(RawHTTPRequest(method: "POST", target: "/v3/watch",
                                       body: #"{"create_request":{"key":"\#(b64("/probe/"))","range_end":"\#(b64("/probe0"))"}}"#,
                                       json: true))
        let listener = Task {
            try await RawProbe.onThread("probe-listener") {
                var samples: [Double] = []
                // The gateway streams one JSON object per watch response, newline-separated.
                try RawProbe.streamLines(stream) { line, now in
                    guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                          let result = obj["result"] as? [String: Any], let events = result["events"] as? [[String: Any]] else { return true }
                    for e in events {
                        guard let kv = e["kv"] as? [String: Any], let k = kv["key"] as? String, let v = kv["value"] as? String,
                              let key = Data(base64Encoded: k).flatMap({ String(data: $0, encoding: .utf8) }),
                              let value = Data(base64Encoded: v).flatMap({ String(data: $0, encoding: .utf8) }) else { continue }
                        if key == "/probe/stop" { return false }
                        if let sent = Int64(value) { samples.append(Double(now - sent) / 1000) }
                    }
                    return true
                }
                return samples
            }
        }
        // The watch is created asynchronously: give it a moment before the first put.
        try await Task.sleep(for: .milliseconds(200))
        let w = try await RawProbe.onThread("probe-writer") {
            try RawProbe.openLoopWrites(url: writeTo, rate: rate, seconds: seconds, maxInFlight: maxInFlight,
                                        request: { i, sent in etcdPutRequest(key: "/probe/p\(i % keys)", value: "\(sent)") },
                                        stop: etcdPutRequest(key: "/probe/stop", value: "0"))
        }
        let samples = try await listenerResult(listener, stream)
        return Latency(samples: samples.sorted(), acknowledged: w.acked, errors: w.errors, lateSends: w.late)
    }
}
