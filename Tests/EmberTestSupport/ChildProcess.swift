import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process a test starts (an `emberd`, a probe client, openssl), with a watchdog that ends it if
/// the test process dies first, and a bounded stop.
public final class ChildProcess: @unchecked Sendable {
    /// The package's root directory (this file is Tests/EmberTestSupport/ChildProcess.swift).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The path of an executable this package builds: beside the running test binary, so a test
    /// run of a release build (`swift test -c release`) or one with `--scratch-path` starts the
    /// executables of that same build, not whatever `.build/debug` holds.
    public static func built(_ name: String) -> String {
        if let dir = productsDirectory {
            let beside = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        }
        return packageRoot.appendingPathComponent(".build/debug/\(name)").path
    }

    /// The directory of the running test binary (SwiftPM puts the products of one build there).
    public static var productsDirectory: URL? {
        #if os(Linux)
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        guard let exe = Bundle.main.executableURL else { return nil }
        #endif
        return exe.deletingLastPathComponent()
    }

    // `@unchecked Sendable`: `Process` is thread-safe for what is used here (pid, isRunning,
    // terminate, waitUntilExit); it is not marked Sendable.
    private let process = Process()

    /// Starts `executable`. `stdout`/`stderr` take what `Process` takes (a FileHandle or a Pipe);
    /// the default discards the output. The watchdog sends `watchdogSignal` to the child when the
    /// test process is gone.
    public init(_ executable: String, _ arguments: [String], stdout: Any? = nil, stderr: Any? = nil,
                watchdogSignal: Int32 = SIGTERM) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = stdout ?? FileHandle.nullDevice
        process.standardError = stderr ?? FileHandle.nullDevice
        try process.run()
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        let me = ProcessInfo.processInfo.processIdentifier, child = process.processIdentifier
        watchdog.arguments = ["-c", "while kill -0 \(me) 2>/dev/null && kill -0 \(child) 2>/dev/null; do sleep 0.5; done; kill -\(watchdogSignal) \(child) 2>/dev/null"]
        // Not the test's output: `swift test` waits for that to close before it reaps the test
        // process, and the watchdog waits for the test process to go.
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
    }

    /// Runs `executable` to completion; throws unless it exits 0.
    public static func run(_ executable: String, _ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw Failure(description: "\(executable) \(arguments.first ?? "") exited \(p.terminationStatus)")
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// SIGTERM without waiting (`stop(grace:terminate: false)` waits after signalling several).
    public func terminate() {
        if process.isRunning { process.terminate() }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Sends SIGTERM (unless `terminate` is false: the caller already signalled), waits up to
    /// `grace`, then SIGKILLs. True when it exited within `grace`.
    @discardableResult
    public func stop(grace: Duration, terminate: Bool = true) -> Bool {
        guard process.isRunning else { return true }
        if terminate { process.terminate() }
        let deadline = ContinuousClock.now + grace
        while process.isRunning && ContinuousClock.now < deadline { usleep(20_000) }
        guard process.isRunning else { return true }
        kill9()
        return false
    }

    /// SIGKILL (no cleanup runs in the child), and waits for it to be gone.
    public func kill9() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
