import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The `ember-persistence-probe` executable, run as a separate process so a test can SIGKILL it
/// the way an app is killed. Its stdout lines (`WORD payload`) and stderr are collected.
final class ProbeProcess: @unchecked Sendable {
    static let binary = EmberServerProcess.packageRoot.appendingPathComponent(".build/debug/ember-persistence-probe").path

    /// Output gathered from the pipes' handlers (any thread).
    final class Output: Sendable {
        let out = Mutex<(lines: [String], partial: String)>(([], ""))
        let err = Mutex<String>("")
    }

    private let process = Process()
    private let output = Output()

    init(_ command: String, url: String, cacheDir: String, _ args: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = [command, url, cacheDir] + args
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        stdout.fileHandleForReading.readabilityHandler = { [output] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.out.withLock { s in
                s.partial += text
                while let nl = s.partial.firstIndex(of: "\n") {
                    s.lines.append(String(s.partial[..<nl]))
                    s.partial = String(s.partial[s.partial.index(after: nl)...])
                }
            }
        }
        stderr.fileHandleForReading.readabilityHandler = { [output] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.err.withLock { $0 += text }
        }
        try process.run()
        // If the test process dies first, a watchdog ends the probe.
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        let me = ProcessInfo.processInfo.processIdentifier, child = process.processIdentifier
        watchdog.arguments = ["-c", "while kill -0 \(me) 2>/dev/null && kill -0 \(child) 2>/dev/null; do sleep 0.5; done; kill -9 \(child) 2>/dev/null"]
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
    }

    var lines: [String] { output.out.withLock { $0.lines } }
    var stderr: String { output.err.withLock { $0 } }

    /// Waits for a stdout line starting with `prefix`; returns it.
    @discardableResult
    func waitForLine(_ prefix: String, timeout: Duration = .seconds(20)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = lines.first(where: { $0.hasPrefix(prefix) }) { return line }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("probe printed no \(prefix) line; stdout: \(lines); stderr: \(stderr)")
    }

    /// Waits until stderr (read through its own pipe, so it may lag stdout) satisfies `condition`.
    func waitForStderr(timeout: Duration = .seconds(10), _ condition: (String) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(stderr) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("probe stderr never matched: \(stderr)")
    }

    /// Kills the probe the hard way (no cleanup runs in it) and waits for it to be gone.
    func kill() {
        guard process.isRunning else { return }
        #if canImport(Glibc)
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        #else
        _ = Darwin.kill(process.processIdentifier, SIGKILL)
        #endif
        process.waitUntilExit()
    }

    deinit { kill() }
}
