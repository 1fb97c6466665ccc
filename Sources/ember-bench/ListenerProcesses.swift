import ArgumentParser
import Foundation

/// Idle listeners spread over child processes (this binary, `realtime-listeners`): one process
/// holds at most `--connections-per-process` sockets (its open-file limit, and ~28,000 ports per
/// source address toward one server port), so 100,000 connections take several, each
/// connecting from its own source address 127.0.0.N.
///
/// Protocol with a child: it prints `ready OPENED FAILED` once its connections are open, then
/// holds them until its stdin closes, closes them and exits.
final class ListenerProcesses: @unchecked Sendable {
    struct Child {
        let process: Process
        let input: Pipe
        let output: Pipe
        let count: Int
        let source: String
    }

    private var children: [Child] = []

    static func start(url: String, total: Int, perProcess: Int, window: Int) throws -> ListenerProcesses {
        let set = ListenerProcesses()
        let n = (total + perProcess - 1) / perProcess
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).path
        for k in 0..<n {
            let count = min(perProcess, total - k * perProcess)
            let source = "127.0.0.\(k + 2)"
            let p = Process()
            p.executableURL = URL(fileURLWithPath: me)
            p.arguments = ["realtime-listeners", "--url", url, "--count", "\(count)", "--path-prefix", "rt/idle/p\(k)/c",
                           "--source", source, "--connect-window", "\(max(1, window / n))"]
            let input = Pipe(), output = Pipe()
            p.standardInput = input
            p.standardOutput = output
            p.standardError = FileHandle.standardError
            do { try p.run() } catch {
                set.children.forEach { $0.process.terminate() }
                throw error
            }
            set.children.append(Child(process: p, input: input, output: output, count: count, source: source))
        }
        return set
    }

    /// Waits until every child reported; returns the connections opened in all.
    func waitReady() async -> Int {
        var opened = 0
        for (k, c) in children.enumerated() {
            // Lines before `ready` are the child's notes (failed connections): passed on.
            var line = ""
            while let l = await Self.readLine(c.output.fileHandleForReading) {
                if l.hasPrefix("ready ") {
                    line = l
                    break
                }
                print("  listener process \(k + 1): \(l)")
            }
            let f = line.split(separator: " ")
            guard f.count == 3, f[0] == "ready", let ok = Int(f[1]) else {
                print("  listener process \(k + 1): no report")
                continue
            }
            opened += ok
            if ok < c.count { print("  listener process \(k + 1): \(ok) of \(c.count) connections ready, \(f[2]) failed") }
        }
        return opened
    }

    /// Each child's CPU so far (it opened its connections and answered the server's pings).
    func printCPU() {
        let parts = children.enumerated().map { k, c in
            String(format: "#%d (%@, %d connections) %.2f s", k + 1, c.source, c.count, processCPUSeconds(c.process.processIdentifier))
        }
        print("  listener processes' CPU: " + parts.joined(separator: ", "))
    }

    /// Closes the children's stdin (they close their connections and exit) and waits for them.
    func stop() async {
        for c in children { try? c.input.fileHandleForWriting.close() }
        for c in children {
            let p = c.process
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread {
                    p.waitUntilExit()
                    done.resume()
                }.start()
            }
        }
        children = []
    }

    /// One line from `pipe` (blocking reads on a thread of its own); nil at its end.
    static func readLine(_ h: FileHandle) async -> String? {
        await withCheckedContinuation { (c: CheckedContinuation<String?, Never>) in
            Thread {
                var bytes: [UInt8] = []
                while true {
                    let d = h.readData(ofLength: 1)
                    guard let b = d.first else {
                        c.resume(returning: bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self))
                        return
                    }
                    if b == UInt8(ascii: "\n") { break }
                    bytes.append(b)
                }
                c.resume(returning: String(decoding: bytes, as: UTF8.self))
            }.start()
        }
    }
}

/// A child of `ListenerProcesses`: opens idle listeners, reports, holds them until stdin closes.
struct RealtimeListenersChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "realtime-listeners", abstract: "(internal) idle listeners for `realtime`'s memory phase.",
        shouldDisplay: false)

    @Option var url: String
    @Option var count: Int
    @Option var pathPrefix: String
    @Option var source: String
    @Option var connectWindow = 100

    func run() async throws {
        raiseOpenFileLimit()
        let stats = Stats()
        let set = ConnectionSet(url: url, stats: stats, source: source)
        let opened = try await set.open(count: count, window: connectWindow) { "\(pathPrefix)\($0)" }
        let failed = stats.lock.withLock { $0.failed }
        // Straight to the pipe (unbuffered): the parent waits for this line.
        FileHandle.standardOutput.write(Data("ready \(opened) \(failed)\n".utf8))
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            Thread {
                _ = FileHandle.standardInput.readDataToEndOfFile()
                c.resume()
            }.start()
        }
        await set.close()
    }
}
