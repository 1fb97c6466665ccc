import Foundation

/// The port a server started on port 0 reports (`emberd --port 0 --port-file PATH`): the kernel
/// picks it when the server binds, so no other process can take it between a pick and the bind.
public enum PortFile {
    /// Waits until `process` wrote `path` (a port number and a newline). Throws if the process
    /// exits first or `timeout` passes.
    public static func wait(_ path: String, of process: ChildProcess, timeout: Duration = .seconds(20)) async throws -> Int {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOfFile: path, encoding: .utf8),
               let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), port > 0 {
                return port
            }
            guard process.isRunning else { throw ChildProcess.Failure(description: "exited before writing \(path)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ChildProcess.Failure(description: "no port in \(path) within \(timeout)")
    }
}
