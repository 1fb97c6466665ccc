import Foundation
@testable import EmberClient

/// A fresh namespace on the shared server, and clients for it that are shut down at the end.
struct TestNamespace {
    let server: EmberServerProcess
    let ns: String

    static func make(_ name: String = #function) async throws -> TestNamespace {
        let server = try await SharedServer.get()
        let clean = String(name.filter { $0.isLetter || $0.isNumber }.prefix(40))
        return TestNamespace(server: server, ns: "\(clean)\(UInt32.random(in: 0...UInt32.max))")
    }

    var url: String { server.databaseURL(ns: ns) }

    func client() -> Database { Database(url: url, configuration: .fastReconnect) }
}

extension DatabaseConfiguration {
    /// Reconnects within ~0.2 s so tests that restart servers stay short.
    static var fastReconnect: DatabaseConfiguration {
        DatabaseConfiguration(reconnectPolicy: ReconnectPolicy(initial: .milliseconds(100), maximum: .milliseconds(300)))
    }
}
