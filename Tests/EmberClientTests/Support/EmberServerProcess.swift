import EmberCore
import Foundation
import EmberTestPorts
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A real `emberd` on a free loopback port with its own temporary data directory.
final class EmberServerProcess: @unchecked Sendable {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let binary = packageRoot.appendingPathComponent(".build/debug/emberd").path

    let port: Int
    let dataDir: String
    let rulesFile: String?
    /// More emberd flags (auth, limits).
    let extraArgs: [String]
    private var process: Process?

    init(port: Int? = nil, dataDir: String? = nil, rules: String? = nil, extraArgs: [String] = []) throws {
        self.extraArgs = extraArgs
        self.port = try port ?? FreePorts.one()
        self.dataDir = dataDir ?? NSTemporaryDirectory() + "ember-client-test-" + UUID().uuidString
        if let rules {
            let file = self.dataDir + ".rules.json"
            try rules.write(toFile: file, atomically: true, encoding: .utf8)
            rulesFile = file
        } else {
            rulesFile = nil
        }
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func databaseURL(ns: String) -> String { "\(baseURL)?ns=\(ns)" }

    func start() async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        var args = ["--data", dataDir, "--port", String(port), "--log-level", "error"]
        if let rulesFile { args += ["--rules", rulesFile] }
        args += extraArgs
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        // If the test process dies without stopping the server, a watchdog does it.
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        let me = ProcessInfo.processInfo.processIdentifier, child = p.processIdentifier
        watchdog.arguments = ["-c", "while kill -0 \(me) 2>/dev/null && kill -0 \(child) 2>/dev/null; do sleep 0.5; done; kill \(child) 2>/dev/null"]
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
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
        guard p.isRunning else { return }
        p.terminate()
        // Bounded, then SIGKILL: emberd's graceful shutdown waits for its WebSocket clients to
        // close, and a client in this process may need the cooperative threads this wait holds
        // (two tests stopping at once held both, and the suite hung).
        let deadline = ContinuousClock.now + .seconds(5)
        while p.isRunning && ContinuousClock.now < deadline { usleep(20_000) }
        if p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
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

    static func http(_ method: String, _ url: String, body: String? = nil) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
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
