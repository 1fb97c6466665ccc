import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `ember-bench http-check`: evidence that `RawHTTPLoad` counts what it claims. The response
/// reader on canned answers split at every byte (and malformed ones refused), then a short live
/// run against an emberd with rules that refuse half the connections' writes: those must be all
/// errors, the others all successes, and what the others wrote must read back.
struct HTTPLoadCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-check", abstract: "Self-check of the raw HTTP load generator (reader and a live run).")

    @Option(help: "emberd binary to start.")
    var emberd = ".build/release/emberd"

    @Option(help: "Concurrent clients of the live run (even ones allowed to write, odd ones refused).")
    var clients = 4

    @Option(help: "Seconds of the live run (after the 1 s warm-up).")
    var duration = 1.0

    func validate() throws {
        guard clients >= 2 else { throw ValidationError("--clients must be at least 2 (one allowed, one refused)") }
    }

    func run() async throws {
        try Self.checkReader()
        print("reader: canned answers read right at every split, malformed ones refused")
        try await checkLive()
    }

    /// Five answers in a row: length-framed, chunked (extension, trailer), 204, 100 then 200, a 401.
    static let canned = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
        + "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n0a\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"
        + "HTTP/1.1 204 No Content\r\n\r\n"
        + "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\nConnection: close\r\n\r\n{}"
        + "HTTP/1.1 401 Unauthorized\r\nContent-Length: 25\r\n\r\n{\"error\":\"Unauthorized\"}\n"
    static let cannedStatuses = [200, 200, 204, 200, 401]

    static func checkReader() throws {
        let bytes = Array(canned.utf8)
        // Every split into two reads, and one byte per read.
        var splits = (0...bytes.count).map { [Array(bytes[..<$0]), Array(bytes[$0...])] }
        splits.append(bytes.map { [$0] })
        for pieces in splits {
            var reader = RawHTTPResponseReader()
            var buffer = ByteBuffer()
            var got: [RawHTTPResponseReader.Response] = []
            for piece in pieces {
                buffer.writeBytes(piece)
                while let r = try reader.next(&buffer) { got.append(r) }
                buffer.discardReadBytes()
            }
            guard got.map(\.status) == cannedStatuses, buffer.readableBytes == 0,
                  got.map(\.close) == [false, false, false, true, false],
                  got[4].bodyPrefix == "{\"error\":\"Unauthorized\"}\n", got[0].bodyPrefix.isEmpty else {
                throw ValidationError("reader: read \(got.map(\.status)) from pieces of \(pieces.map(\.count))")
            }
        }
        let malformed = [
            "HTTP/1.1 200 OK\r\n\r\n",  // no framing: body until close
            "HTTX/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
            "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: RawHTTPResponseReader.maxHeadBytes),
        ]
        for text in malformed {
            var reader = RawHTTPResponseReader()
            var buffer = ByteBuffer(string: text)
            // Refused means an error thrown; nil (more bytes wanted) would be a hang on the wire.
            let refused: Bool
            do { _ = try reader.next(&buffer); refused = false } catch { refused = true }
            guard refused else { throw ValidationError("reader accepted malformed \(text.prefix(60).debugDescription)") }
        }
    }

    func checkLive() async throws {
        let dir = NSTemporaryDirectory() + "ember-http-check-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let rules = dir + "/rules.json"
        try #"{"rules": {".read": false, ".write": false, "bench": {"ok": {".write": true}}}}"#
            .write(toFile: rules, atomically: true, encoding: .utf8)
        let port = 19_000 + Int.random(in: 0..<1000)
        let process = try HTTPLoad.launch(emberd, ["--data", dir + "/data", "--port", "\(port)", "--log-level", "warning", "--rules", rules,
                                                   "--max-connections-per-address", "0", "--max-requests-per-second", "0"])
        defer { process.terminate(); process.waitUntilExit() }
        let base = "http://127.0.0.1:\(port)"
        let http = HTTPLoad(clients: 1, duration: 0).makeClient()
        do {
            try await live(http, base)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    private func live(_ http: HTTPClient, _ base: String) async throws {
        try await HTTPLoad.waitReady(http, base + "/.json?auth=owner")
        // Even connections write where the rules allow it, odd ones where they refuse it.
        let outcomes = try await RawHTTPLoad(bases: [base], clients: clients, duration: duration).runConnections { worker, i in
            RawHTTPRequest(method: "PUT", target: "/bench/\(worker % 2 == 0 ? "ok" : "no")/w\(worker)/\(benchKey(i, inserts: false)).json?print=silent",
                           body: "\"\(benchValue(i, size: 16))\"")
        }
        for (w, o) in outcomes.enumerated() {
            print("  connection \(w): \(o.ok) ok, \(o.errors) errors, \(o.latencies.count) measured, \(o.reconnects) re-opened"
                  + (o.firstError.map { ", first error \($0.debugDescription)" } ?? ""))
            let allowed = w % 2 == 0
            guard allowed ? (o.ok > 0 && o.errors == 0) : (o.ok == 0 && o.errors > 0 && o.latencies.isEmpty),
                  o.reconnects == 0 else {
                throw ValidationError("connection \(w) (\(allowed ? "allowed" : "refused")) counted wrong")
            }
            guard allowed else { continue }
            // Connection w rewrites keys k0...k999 in turn: min(ok, 1000) of them exist.
            let r = try await http.execute(HTTPClientRequest(url: "\(base)/bench/ok/w\(w).json?auth=owner"), timeout: .seconds(10))
            let body = try await r.body.collect(upTo: 1 << 24)
            let keys = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])?.count ?? 0
            guard keys == min(o.ok, 1000) else {
                throw ValidationError("connection \(w): \(o.ok) writes acknowledged, \(keys) keys read back")
            }
        }
        print("live: refused writes counted as errors, acknowledged writes read back")
    }
}
