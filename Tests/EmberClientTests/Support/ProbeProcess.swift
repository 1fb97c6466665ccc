import EmberTestSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The `ember-persistence-probe` executable, run as a separate process so a test can SIGKILL it
/// the way an app is killed. Its stdout lines (`WORD payload`) and stderr are collected.
final class ProbeProcess: @unchecked Sendable {
    static let binary = ChildProcess.built("ember-persistence-probe")

    /// Output gathered from the pipes' handlers (any thread).
    final class Output: Sendable {
        let out = Mutex<(lines: [String], partial: String)>(([], ""))
        let err = Mutex<String>("")
    }

    private let process: ChildProcess
    private let output: Output

    init(_ command: String, url: String, cacheDir: String, _ args: [String] = []) throws {
        let output = Output()
        self.output = output
        let stdout = Pipe(), stderr = Pipe()
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
        // If the test process dies first, the watchdog ends the probe the hard way.
        process = try ChildProcess(Self.binary, [command, url, cacheDir] + args, stdout: stdout, stderr: stderr,
                                   watchdogSignal: SIGKILL)
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
    func kill() { process.kill9() }

    deinit { kill() }
}
