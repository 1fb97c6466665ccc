import EmberCore
import Foundation
import EmberTestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A real `emberd` on a loopback port with its own temporary data directory.
///
/// Without a `port`, the first start binds port 0 and reads the port emberd bound
/// (`--port-file`); later starts (a restart) use that port again, so clients keep their URL.
final class EmberServerProcess: @unchecked Sendable {
    static let packageRoot = ChildProcess.packageRoot
    static let binary = ChildProcess.built("emberd")

    let dataDir: String
    let rulesFile: String?
    /// More emberd flags (auth, limits).
    let extraArgs: [String]
    /// The port given, or the one the first start bound.
    private var knownPort: Int?
    private var process: ChildProcess?

    init(port: Int? = nil, dataDir: String? = nil, rules: String? = nil, extraArgs: [String] = []) throws {
        self.extraArgs = extraArgs
        knownPort = port
        self.dataDir = dataDir ?? TestDirectory.root + "ember-client-test-" + UUID().uuidString
        if let rules {
            let file = self.dataDir + ".rules.json"
            try rules.write(toFile: file, atomically: true, encoding: .utf8)
            rulesFile = file
        } else {
            rulesFile = nil
        }
    }

    /// The client port: known once started (or given to `init`).
    var port: Int {
        guard let knownPort else { preconditionFailure("the port is known once the server started (or pass one to init)") }
        return knownPort
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func databaseURL(ns: String) -> String { "\(baseURL)?ns=\(ns)" }

    func start() async throws {
        let portFile = dataDir + ".port"
        try? FileManager.default.removeItem(atPath: portFile)
        var args = ["--data", dataDir, "--port", String(knownPort ?? 0), "--port-file", portFile, "--log-level", "error"]
        if let rulesFile { args += ["--rules", rulesFile] }
        args += extraArgs
        let p = try ChildProcess(Self.binary, args)
        process = p
        knownPort = try await PortFile.wait(portFile, of: p)
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            // 401: up, but the rules refuse anonymous reads of the root.
            if let (status, _) = try? await Self.http("GET", "\(baseURL)/.json"), status == 200 || status == 401 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("emberd did not become ready on port \(port)")
    }

    func stop() {
        guard let p = process else { return }
        process = nil
        // Bounded, then SIGKILL: emberd's graceful shutdown waits for its WebSocket clients to
        // close, and a client in this process may need the cooperative threads this wait holds
        // (two tests stopping at once held both, and the suite hung).
        p.stop(grace: .seconds(5))
    }

    deinit { stop() }

    // MARK: - REST

    func restPut(_ path: String, ns: String, json: String) async throws {
        let (status, body) = try await Self.http("PUT", "\(baseURL)/\(path).json?ns=\(ns)", body: json)
        guard status == 200 else { throw TestFailure("PUT \(path) → \(status) \(body)") }
    }

    func restGet(_ path: String, ns: String) async throws -> JSON {
        let (status, body) = try await Self.http("GET", "\(baseURL)/\(path).json?ns=\(ns)")
        guard status == 200 else { throw TestFailure("GET \(path) → \(status) \(body)") }
        return try JSON.parse(body)
    }

    static func http(_ method: String, _ url: String, body: String? = nil, headers: [String: String] = [:]) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.timeoutInterval = 5
        if let body { request.httpBody = Data(body.utf8) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// One emberd shared by the tests that only need a server: each test uses its own namespace.
enum SharedServer {
    private static let task = Task { () throws -> EmberServerProcess in
        let s = try EmberServerProcess()
        try await s.start()
        return s
    }

    static func get() async throws -> EmberServerProcess { try await task.value }
}
