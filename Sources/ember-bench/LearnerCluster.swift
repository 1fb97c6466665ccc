import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// A 3-voter Ember cluster on loopback (mutual TLS between peers) that learners join one at a
/// time, for `ember-bench learners`: voters started with `--peers`, each learner started empty
/// with `--join` and added through the leader (`POST /.ember/members`, `"learner": true`).
final class LearnerCluster: @unchecked Sendable {
    let http: HTTPClient
    let emberd: String
    let dir: String
    /// Client ports base+0..2, voter peers base+5..7, learner clients base+50+i, peers base+60+i.
    let base: Int
    let voterPeers: String
    private(set) var voters: [ServerProcess] = []
    private(set) var learners: [ServerProcess] = []
    private(set) var leaderURL = ""
    private var processes: [Process] = []
    /// Niceness learners start with (`nice -n`): 0 shares the CPU evenly; 19 gives the voters
    /// priority. It does not make the learners free: they still take the idle time the voters
    /// leave while they wait on fsync and the network (measured: 8-9 µs per write each).
    var learnerNice = 0
    /// Extra emberd options every node starts with (`ember-bench learners --node-args`).
    var nodeArgs: [String] = []
    static let nice = "/usr/bin/nice"

    static let voterIDs = ["n1", "n2", "n3"]
    /// Learners one cluster may be given (`RaftConfig.defaultMaxLearners`).
    static let maxLearners = 8
    /// How long a learner may take to catch up before the bench gives up on it.
    static let catchUpLimitSeconds = 600.0

    var all: [ServerProcess] { voters + learners }
    var voterWSURLs: [String] { voters.map { Self.ws($0.url) } }
    static func ws(_ url: String) -> String { url.replacingOccurrences(of: "http://", with: "ws://") + "/.ws?v=5&ns=bench" }

    /// Certificates for the voters and `maxLearners` learners are made in `dir` once.
    private init(http: HTTPClient, emberd: String, dir: String) {
        self.http = http
        self.emberd = emberd
        self.dir = dir
        let base = 20_000 + Int.random(in: 0..<1000) * 10
        self.base = base
        voterPeers = Self.voterIDs.enumerated().map { "\($1)=127.0.0.1:\(base + 5 + $0)" }.joined(separator: ",")
    }

    /// Starts the voters in a fresh directory under `parent` and waits for a leader.
    static func start(http: HTTPClient, emberd: String, openssl: String, parent: String, nodeArgs: [String] = []) async throws -> LearnerCluster {
        let dir = parent + "/c\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try makePeerCertificates(openssl: openssl, dir: dir, ids: voterIDs + ClusterBench.learnerIDs(maxLearners))
        let c = LearnerCluster(http: http, emberd: emberd, dir: dir)
        c.nodeArgs = nodeArgs
        do {
            for (i, id) in voterIDs.enumerated() {
                let port = c.base + i
                let p = try c.launch(id: id, port: port, peers: c.voterPeers, extra: [])
                c.voters.append(ServerProcess(name: id, url: "http://127.0.0.1:\(port)", process: p))
            }
            for v in c.voters { try await HTTPLoad.waitReady(http, v.url + "/.json") }
            c.leaderURL = try await c.waitForLeader()
            for i in c.voters.indices where c.voters[i].url == c.leaderURL { c.voters[i].name += " (leader)" }
        } catch {
            c.stop()
            throw error
        }
        return c
    }

    private func launch(id: String, port: Int, peers: String, extra: [String], nice: Int = 0) throws -> Process {
        // Under `nice` every thread emberd starts inherits the niceness (it is per thread on Linux).
        let prefix = nice == 0 ? [] : ["-n", "\(nice)", emberd]
        let p = try HTTPLoad.launch(nice == 0 ? emberd : Self.nice, prefix + [
            "--data", "\(dir)/\(id)", "--port", "\(port)", "--log-level", "warning", "--node-id", id, "--peers", peers,
            "--peer-tls-cert", "\(dir)/\(id).pem", "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem",
            // One machine plays every client: per-address limits off.
            "--max-connections-per-address", "0", "--max-requests-per-second", "0",
        ] + extra + nodeArgs)
        processes.append(p)
        return p
    }

    /// Starts the next learner empty, adds it through the leader and waits until it reports the
    /// role and has applied the leader's commit index as of its addition. Returns it and the
    /// seconds from the addition to caught up.
    @discardableResult
    func addLearner() async throws -> (node: ServerProcess, catchUpSeconds: Double) {
        precondition(learners.count < Self.maxLearners, "at most \(Self.maxLearners) learners")
        let i = learners.count
        let id = ClusterBench.learnerIDs(i + 1)[i]
        let port = base + 50 + i, peer = "127.0.0.1:\(base + 60 + i)"
        let p = try launch(id: id, port: port, peers: voterPeers + ",\(id)=\(peer)", extra: ["--join"], nice: learnerNice)
        let node = ServerProcess(name: id + " (learner)", url: "http://127.0.0.1:\(port)", process: p)
        learners.append(node)
        try await HTTPLoad.waitReady(http, node.url + "/.ember/status")
        let t0 = ContinuousClock.now
        var request = HTTPClientRequest(url: leaderURL + "/.ember/members")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer owner")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"id":"\#(id)","address":"\#(peer)","clientURL":"\#(node.url)","learner":true}"#))
        let r = try await http.execute(request, timeout: .seconds(30))
        let answer = try await r.body.collect(upTo: 1 << 20)
        guard r.status == .ok else { throw ValidationError("adding \(id) as a learner: \(r.status) \(String(buffer: answer))") }
        let target = try await commitIndex(leaderURL)
        let deadline = t0 + .seconds(Self.catchUpLimitSeconds)
        while ContinuousClock.now < deadline {
            if let s = try? await status(node.url), s["role"] as? String == "learner",
               let applied = s["appliedIndex"] as? Int, applied >= target {
                return (node, (ContinuousClock.now - t0).seconds)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ValidationError("\(id) did not catch up within \(Int(Self.catchUpLimitSeconds)) s")
    }

    func commitIndex(_ url: String) async throws -> Int {
        let s = try await status(url)
        guard let c = (s["commitIndex"] as? Int) ?? (s["appliedIndex"] as? Int) else { throw ValidationError("\(url): no commit index") }
        return c
    }

    func status(_ url: String) async throws -> [String: Any] {
        let r = try await http.execute(HTTPClientRequest(url: url + "/.ember/status"), timeout: .seconds(5))
        let body = try await r.body.collect(upTo: 1 << 20)
        return (try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }

    /// Until every voter names the same leader; its URL.
    private func waitForLeader() async throws -> String {
        for _ in 0..<600 {
            var named = Set<String>()
            var leader: String?
            for v in voters {
                guard let s = try? await status(v.url), let l = s["leader"] as? String else { named.insert(""); continue }
                named.insert(l)
                if s["role"] as? String == "leader" { leader = v.url }
            }
            if named.count == 1, named.first != "", let leader { return leader }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("the Ember cluster elected no leader")
    }

    /// A REST request at the leader as the owner; fails on a non-2xx answer.
    func leaderRequest(_ method: String, _ target: String, body: String?, timeout: TimeAmount = .seconds(120)) async throws {
        var r = HTTPClientRequest(url: leaderURL + target)
        r.method = .init(rawValue: method)
        r.headers.add(name: "Authorization", value: "Bearer owner")
        if let body { r.body = .bytes(ByteBuffer(string: body)) }
        let resp = try await http.execute(r, timeout: timeout)
        let answer = try await resp.body.collect(upTo: 1 << 20)
        guard (200..<300).contains(Int(resp.status.code)) else {
            throw ValidationError("\(method) \(target): \(resp.status) \(String(buffer: answer).prefix(300))")
        }
    }

    /// Stops every node (SIGTERM) and waits; removes the data.
    func stop() {
        ProcessSet.stopAndWait(processes)
        processes = []
        try? FileManager.default.removeItem(atPath: dir)
    }
}
