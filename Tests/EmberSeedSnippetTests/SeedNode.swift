import Foundation
import EmberTestSupport
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One emberd for the seed snippets, and the process-wide setup the snippets' unchanged
/// `Database.database()` needs: `EMBER_DATABASE_URL` names this node and a namespace of its own.
enum SeedNode {
    struct Node: Sendable {
        let port: Int
        let ns: String
        var baseURL: String { "http://127.0.0.1:\(port)" }
    }

    private static let node = Task { () throws -> Node in
        let dataDir = TestDirectory.root + "ember-seed-snippets-" + UUID().uuidString
        // Port 0: emberd binds a port the kernel picks and reports it in the port file. The
        // node runs for the life of the test process; its watchdog stops it when that ends.
        let portFile = dataDir + ".port"
        let p = try ChildProcess(ChildProcess.built("emberd"),
                                 ["--data", dataDir, "--port", "0", "--port-file", portFile, "--log-level", "error"])
        let port = try await PortFile.wait(portFile, of: p)
        let node = Node(port: port, ns: "seeds\(UInt32.random(in: 0...UInt32.max))")
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if (try? await http("GET", "\(node.baseURL)/.json"))?.0 == 200 {
                setenv("EMBER_DATABASE_URL", "\(node.baseURL)?ns=\(node.ns)", 1)
                return node
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SeedFailure("emberd did not start on port \(port)")
    }

    static func get() async throws -> Node { try await node.value }

    /// The stored data at `path` as JSON text (`null` when none).
    static func rest(_ path: String) async throws -> Any? {
        let n = try await get()
        let (status, body) = try await http("GET", "\(n.baseURL)/\(path).json?ns=\(n.ns)")
        guard status == 200 else { throw SeedFailure("GET \(path) → \(status)") }
        let value = try JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed])
        return value is NSNull ? nil : value
    }

    /// Writes JSON text at `path` of namespace `ns` (REST PUT; `null` deletes).
    static func put(_ path: String, ns: String, json: String) async throws {
        let n = try await get()
        let (status, body) = try await http("PUT", "\(n.baseURL)/\(path).json?ns=\(ns)", body: json)
        guard status == 200 else { throw SeedFailure("PUT \(path) → \(status) \(body)") }
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

struct SeedFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// What the snippets printed: this module's `print` shadows the standard library's, so the
/// snippets' own `print` calls can be checked without changing them.
enum Printed {
    static let lines = Mutex<[String]>([])
    static var all: [String] { lines.withLock { $0 } }
    static func clear() { lines.withLock { $0.removeAll() } }

    /// Waits until exactly `expected` was printed (in order); true if it was.
    static func wait(for expected: [String], timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if all == expected { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Waits until a line satisfying `match` was printed.
    static func wait(timeout: Duration = .seconds(10), _ match: (String) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if all.contains(where: match) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    let line = items.map { "\($0)" }.joined(separator: separator)
    Printed.lines.withLock { $0.append(line) }
    Swift.print(line, terminator: terminator)
}

/// Polls until `condition` holds (10 s).
func eventually(_ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return false
}
