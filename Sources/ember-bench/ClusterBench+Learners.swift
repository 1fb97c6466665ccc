import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `ember-bench cluster --learners N` (issue 38): learners (non-voting members) added to the three
/// voters before the load. Writes stay on the voters (a learner forwards a write to the leader,
/// an extra hop a capacity comparison should not carry); the write → listener probe listens on a
/// learner, and `--learner-readers K` reads from the learners during the load: what learners add
/// (listeners, reads) and what they cost the voters (throughput, commit latency with 0, 2, 4).
extension ClusterBench {
    /// Most learners a run adds (`RaftConfig.defaultMaxLearners`).
    static let maxLearners = 8
    /// Most reading clients (`--learner-readers`).
    static let maxLearnerReaders = 4_096
    /// The small value the readers get.
    static let readerPath = "/readers/v.json"

    static func learnerIDs(_ count: Int) -> [String] { (0..<count).map { "l\($0 + 1)" } }

    /// Starts `learners` empty nodes (`--join`, the voters plus itself as peers), adds each as a
    /// learner through the leader (`POST /.ember/members`, its client URL included) and waits
    /// until each reports the role and has applied the leader's commit index.
    func startLearners(_ http: HTTPClient, _ processes: ProcessSet, dir: String, certs: String, base: Int,
                       voterPeers: String, leaderURL: String) async throws -> [ServerProcess] {
        var started: [ServerProcess] = []
        for (i, id) in Self.learnerIDs(learners).enumerated() {
            let port = base + 50 + i, peer = "127.0.0.1:\(base + 60 + i)"
            let p = try HTTPLoad.launch(load.emberd, [
                "--data", "\(dir)/\(id)", "--port", "\(port)", "--log-level", "warning", "--node-id", id,
                "--peers", voterPeers + ",\(id)=\(peer)", "--join",
                "--peer-tls-cert", "\(certs)/\(id).pem", "--peer-tls-key", "\(certs)/\(id).key", "--peer-tls-ca", "\(certs)/ca.pem",
                "--max-connections-per-address", "0", "--max-requests-per-second", "0",
            ])
            processes.add(p)
            let node = ServerProcess(name: id + " (learner)", url: "http://127.0.0.1:\(port)", process: p)
            started.append(node)
            try await HTTPLoad.waitReady(http, node.url + "/.ember/status")
            var request = HTTPClientRequest(url: leaderURL + "/.ember/members")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer owner")
            request.headers.add(name: "Content-Type", value: "application/json")
            let body = #"{"id":"\#(id)","address":"\#(peer)","clientURL":"\#(node.url)","learner":true}"#
            request.body = .bytes(ByteBuffer(string: body))
            let r = try await http.execute(request, timeout: .seconds(30))
            let answer = try await r.body.collect(upTo: 1 << 20)
            guard r.status == .ok else {
                throw ValidationError("adding \(id) as a learner: \(r.status) \(String(buffer: answer))")
            }
        }
        for node in started { try await waitCaughtUp(http, learner: node.url, leaderURL: leaderURL) }
        return started
    }

    /// Until the learner says it is one and has applied the leader's commit index.
    private func waitCaughtUp(_ http: HTTPClient, learner: String, leaderURL: String) async throws {
        for _ in 0..<600 {
            if let leader = try? await status(http, leaderURL), let mine = try? await status(http, learner),
               mine["role"] as? String == "learner",
               let applied = mine["appliedIndex"] as? Int, let commit = (leader["commitIndex"] as? Int) ?? (leader["appliedIndex"] as? Int),
               applied >= commit { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("\(learner) did not become a caught-up learner")
    }

    private func status(_ http: HTTPClient, _ url: String) async throws -> [String: Any] {
        let r = try await http.execute(HTTPClientRequest(url: url + "/.ember/status"), timeout: .seconds(2))
        let body = try await r.body.collect(upTo: 1 << 20)
        return (try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }

    /// `--learner-readers`: a closed loop of GETs of one small value, spread over the learners,
    /// started with the write load (nil without readers).
    func learnerReads(_ http: HTTPClient, learnerURLs: [String], leaderURL: String) async throws -> Task<HTTPLoad.Result, Error>? {
        guard learnerReaders > 0, !learnerURLs.isEmpty else { return nil }
        var put = HTTPClientRequest(url: leaderURL + Self.readerPath)
        put.method = .PUT
        put.body = .bytes(ByteBuffer(string: #""read me""#))
        let r = try await http.execute(put, timeout: .seconds(10))
        _ = try await r.body.collect(upTo: 1 << 20)
        let load = RawHTTPLoad(bases: learnerURLs, clients: learnerReaders, duration: duration)
        return Task {
            try await load.run(name: "reads from \(learnerURLs.count) learners") { _, _ in
                RawHTTPRequest(method: "GET", target: Self.readerPath, body: "")
            }
        }
    }
}
