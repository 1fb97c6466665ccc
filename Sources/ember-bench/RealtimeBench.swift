import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// Realtime (WebSocket protocol v5) benchmark: write→event latency, fan-out of one write to many
/// listeners, and emberd memory per idle WebSocket connection. Clients are raw WebSocket
/// connections with minimal JSON scanning (`ConnectionSet`: no EmberClient, no task per
/// connection), so tens of thousands of them fit in one process.
struct RealtimeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "realtime",
        abstract: "Realtime: write→event latency, fan-out time, memory per idle WebSocket connection.")

    @Option(help: "emberd binary; a fresh emberd is started for each phase.")
    var emberd = ".build/release/emberd"

    @Option(help: "Latency phase: listeners on one location (0 skips the phase).")
    var listeners = 100

    @Option(help: "Latency phase: REST PUTs per second.")
    var rate = 200.0

    @Option(help: "Latency phase: seconds of writes.")
    var duration = 10.0

    @Option(help: "Fan-out phase: listeners on one location, one run per comma-separated size (0 skips the phase).")
    var fanout = "10000"

    @Option(help: "Fan-out phase: writes (rounds) per size, each waited for at every listener.")
    var fanoutRepeats = 20

    @Option(help: "Memory phase: idle connections, each after hello and one listen (0 skips the phase).")
    var idleConnections = 10_000

    @Option(help: "Connections handshaking at once while opening connections.")
    var connectWindow = 200

    @Option(help: "Memory phase: connections per listener process. Larger sets are opened by child processes (this binary), each from its own source address 127.0.0.N (one address has ~28,000 ports toward one server port) and under its own open-file limit.")
    var connectionsPerProcess = 15_000

    @Option(help: "Namespace (ns= parameter).")
    var namespace = "bench"

    @Flag(help: "Run every phase on a 3-node local cluster: writes at the leader, listeners on a follower, the follower's CPU and memory measured.")
    var cluster = false

    @Option(help: "openssl binary (--cluster: the peers' certificates).")
    var openssl = "/usr/bin/openssl"

    func validate() throws {
        guard connectionsPerProcess >= 1 && connectionsPerProcess <= 28_000 else {
            throw ValidationError("--connections-per-process must be 1...28000 (ports per source address)")
        }
        guard idleConnections <= 250 * connectionsPerProcess else {
            throw ValidationError("--idle-connections needs at most 250 listener processes (source addresses 127.0.0.2-251)")
        }
    }

    func startNodes(_ http: HTTPClient) async throws -> RealtimeNodes {
        try await RealtimeNodes.start(cluster: cluster, emberd: emberd, openssl: openssl, http: http, namespace: namespace)
    }

    func run() async throws {
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)))
        do {
            try await runAll(http)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    func runAll(_ http: HTTPClient) async throws {
        print("ember-bench realtime: emberd \(emberd)\(cluster ? ", 3-node cluster (writes at the leader, listeners on a follower)" : ""), load average \(loadAverage())")
        // Tens of thousands of sockets in this one process.
        raiseOpenFileLimit()
        let sizes = try fanout.split(separator: ",").map { part -> Int in
            guard let n = Int(part.trimmingCharacters(in: .whitespaces)), n >= 0 else {
                throw ValidationError("--fanout takes listener counts separated by commas, got \(part)")
            }
            return n
        }
        if idleConnections > 0 { try await memoryPhase(http) }
        if listeners > 0 { try await latencyPhase(http) }
        for size in sizes where size > 0 { try await fanoutPhase(http, listeners: size) }
    }

    // MARK: phases

    func memoryPhase(_ http: HTTPClient) async throws {
        let nodes = try await startNodes(http)
        defer { nodes.stop() }
        let node = nodes.listener
        if let limit = node.openFileLimit(), idleConnections + 64 > limit {
            print("  note: \(nodes.listenerRole)'s open-file limit is \(limit) (its hard limit here: LimitNOFILE / ulimit -Hn), "
                  + "so at most about \(limit - 64) of the \(idleConnections) connections can be open")
        }
        try await Task.sleep(for: .seconds(1))
        let before = node.rssKiB()
        let t0 = ContinuousClock.now
        let opened: Int
        var children: ListenerProcesses?
        var set: ConnectionSet?
        if idleConnections <= connectionsPerProcess {
            set = ConnectionSet(url: node.wsURL, stats: Stats())
            opened = try await set!.open(count: idleConnections, window: connectWindow) { "rt/idle/c\($0)" }
        } else {
            let c = try ListenerProcesses.start(url: node.wsURL, total: idleConnections, perProcess: connectionsPerProcess,
                                                window: connectWindow)
            children = c
            opened = await c.waitReady()
        }
        let openTime = ContinuousClock.now - t0
        try await Task.sleep(for: .seconds(2))
        let after = node.rssKiB()
        print(String(format: "idle connections: %d opened (hello + listen each) in %.1f s; %@ VmRSS %.1f MiB -> %.1f MiB; %.1f KiB per connection",
                     opened, openTime.seconds, nodes.listenerRole, Double(before) / 1024, Double(after) / 1024,
                     opened > 0 ? Double(after - before) / Double(opened) : 0))
        if let children { children.printCPU() }
        await set?.close()
        await children?.stop()
    }

    func latencyPhase(_ http: HTTPClient) async throws {
        let nodes = try await startNodes(http)
        defer { nodes.stop() }
        let node = nodes.listener
        let stats = Stats()
        let set = ConnectionSet(url: node.wsURL, stats: stats)
        let opened = try await set.open(count: listeners, window: connectWindow) { _ in "rt/lat" }
        let warmup = 1.0
        let total = Int(rate * (warmup + duration))
        let measureFrom = nowMicros() + Int(warmup * 1_000_000)
        stats.lock.withLock { $0.latencyFrom = measureFrom }
        let start = ContinuousClock.now
        let cpu0 = node.cpuSeconds()
        let errors = AtomicCounter()
        let stamps = UniqueStamps()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<total {
                let due = start + .seconds(Double(i) / rate)
                try? await Task.sleep(until: due, clock: .continuous)
                group.addTask {
                    var r = HTTPClientRequest(url: "\(nodes.writer.httpBase)/rt/lat.json?ns=\(namespace)&print=silent")
                    r.method = .PUT
                    // Unique per write: two writes of the same value are one change (the second
                    // changes nothing, so Firebase semantics send no event for it).
                    r.body = .bytes(ByteBuffer(string: "\(stamps.next())"))
                    do {
                        let resp = try await http.execute(r, timeout: .seconds(30))
                        _ = try await resp.body.collect(upTo: 1 << 16)
                        if !(200..<300).contains(Int(resp.status.code)) { errors.value.add(1, ordering: .relaxed) }
                    } catch { errors.value.add(1, ordering: .relaxed) }
                }
            }
        }
        let sendTime = (ContinuousClock.now - start).seconds
        try await Task.sleep(for: .seconds(1))  // events in flight
        let cpu = node.cpuSeconds() - cpu0
        var lat = stats.lock.withLock { $0.latencies }
        lat.sort()
        let writes = Int(rate * duration)
        func pct(_ p: Double) -> Double { lat.isEmpty ? 0 : lat[min(lat.count - 1, Int(Double(lat.count) * p))] / 1000 }
        print(String(format: "latency: %d listeners, %.0f writes/s target (%d writes in %.1f s incl. %.0f s warm-up, %d errors); %d events measured of %d expected; write→event p50 %.2f ms, p99 %.2f ms, max %.2f ms; %@ CPU %.2f s (%.1f µs per event delivered)",
                     opened, rate, total, sendTime, warmup, errors.value.load(ordering: .relaxed),
                     lat.count, writes * opened, pct(0.5), pct(0.99), lat.last.map { $0 / 1000 } ?? 0,
                     nodes.listenerRole, cpu, cpu * 1e6 / Double(max(1, total * opened))))
        await set.close()
    }

    func fanoutPhase(_ http: HTTPClient, listeners fanout: Int) async throws {
        let nodes = try await startNodes(http)
        defer { nodes.stop() }
        let node = nodes.listener
        let stats = Stats()
        let set = ConnectionSet(url: node.wsURL, stats: stats)
        let t0 = ContinuousClock.now
        let opened = try await set.open(count: fanout, window: connectWindow) { _ in "rt/fan" }
        print(String(format: "fan-out: %d listeners open in %.1f s", opened, (ContinuousClock.now - t0).seconds))
        try await Task.sleep(for: .seconds(2))
        var times: [Double] = []
        var serverCPU: [Double] = []
        var benchCPU: [Double] = []
        for round in 0..<fanoutRepeats {
            let value = nowMicros()
            stats.lock.withLock { $0.round = (value: value, count: 0, last: 0) }
            var r = HTTPClientRequest(url: "\(nodes.writer.httpBase)/rt/fan.json?ns=\(namespace)&print=silent")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "\(value)"))
            let cpu0 = node.cpuSeconds()
            let own0 = ownCPUSeconds()
            let sent = nowMicros()
            let resp = try await http.execute(r, timeout: .seconds(30))
            _ = try await resp.body.collect(upTo: 1 << 16)
            let deadline = ContinuousClock.now + .seconds(60)
            var got = 0
            var last = 0
            while ContinuousClock.now < deadline {
                (got, last) = stats.lock.withLock { ($0.round.count, $0.round.last) }
                if got >= opened { break }
                try await Task.sleep(for: .milliseconds(1))
            }
            let ms = Double(last - sent) / 1000
            let cpu = node.cpuSeconds() - cpu0
            let own = ownCPUSeconds() - own0
            print(String(format: "fan-out round %d: %d/%d listeners got the event; last one %.1f ms after the PUT was sent; %@ CPU %.0f ms (%.2f µs per event); ember-bench CPU %.0f ms",
                         round + 1, got, opened, ms, nodes.listenerRole, cpu * 1000, cpu * 1e6 / Double(max(1, got)), own * 1000))
            if got >= opened { times.append(ms) }
            serverCPU.append(cpu)
            benchCPU.append(own)
            try await Task.sleep(for: .seconds(1))
        }
        times.sort()
        if times.isEmpty {
            print("fan-out: no complete round")
        } else {
            func pct(_ p: Double) -> Double { times[min(times.count - 1, Int(Double(times.count) * p))] }
            let meanCPU = serverCPU.reduce(0, +) / Double(max(1, serverCPU.count))
            let meanOwn = benchCPU.reduce(0, +) / Double(max(1, benchCPU.count))
            print(String(format: "fan-out to %d listeners: last listener has it p50 %.1f ms, p99 %.1f ms (min %.1f, max %.1f) over %d rounds; %@ CPU %.0f ms per round (%.2f µs per delivered event); ember-bench's own CPU %.0f ms per round",
                         opened, pct(0.5), pct(0.99), times[0], times[times.count - 1], times.count,
                         nodes.listenerRole, meanCPU * 1000, meanCPU * 1e6 / Double(max(1, opened)), meanOwn * 1000))
        }
        await set.close()
    }
}

// MARK: - emberd process

struct EmberdInstance: Sendable {
    let process: Process
    let port: Int
    let namespace: String
    var httpBase: String { "http://127.0.0.1:\(port)" }
    var wsURL: String { "ws://127.0.0.1:\(port)/.ws?v=5&ns=\(namespace)" }

    static func start(_ path: String, http: HTTPClient, namespace: String) async throws -> EmberdInstance {
        let port = 19_000 + Int.random(in: 0..<1000)
        let node = try launch(path, port: port, namespace: namespace, dir: NSTemporaryDirectory() + "ember-rtbench-\(UUID().uuidString)")
        do { try await node.waitReady(http) } catch {
            node.stop()
            throw error
        }
        return node
    }

    static func launch(_ path: String, port: Int, namespace: String, dir: String, extra: [String] = []) throws -> EmberdInstance {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["--data", dir, "--port", "\(port)", "--log-level", "warning", "--namespace", namespace,
                       // One machine plays many clients: per-client limits off.
                       "--max-connections-per-address", "0", "--max-requests-per-second", "0"] + extra
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return EmberdInstance(process: p, port: port, namespace: namespace)
    }

    func waitReady(_ http: HTTPClient) async throws {
        for _ in 0..<300 {
            if let r = try? await http.execute(HTTPClientRequest(url: httpBase + "/.json"), timeout: .seconds(1)),
               r.status == .ok { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("emberd did not become ready on port \(port)")
    }

    /// emberd's soft open-file limit (each connection holds one descriptor).
    func openFileLimit() -> Int? {
        guard let s = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8) else { return nil }
        for line in s.split(separator: "\n") where line.hasPrefix("Max open files") {
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first.flatMap { Int($0) }
        }
        return nil
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// CPU seconds (user + system) emberd has used so far.
    func cpuSeconds() -> Double {
        guard let s = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let close = s.lastIndex(of: ")") else { return 0 }
        let f = s[s.index(after: close)...].split(separator: " ")  // f[0] = state (field 3)
        guard f.count > 13, let u = Double(f[11]), let k = Double(f[12]) else { return 0 }
        return (u + k) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS of emberd in KiB.
    func rssKiB() -> Int {
        guard let s = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}

// MARK: - raw WebSocket listeners

/// Shared results of all connections; updated under one lock.
final class Stats: Sendable {
    struct State {
        var ready = 0
        var failed = 0
        var latencyFrom = Int.max
        var latencies: [Double] = []  // µs
        var round: (value: Int, count: Int, last: Int) = (-1, 0, 0)
    }
    let lock = Mutex(State())

    func received(_ value: Int, at now: Int) {
        lock.withLock { s in
            if value >= s.latencyFrom { s.latencies.append(Double(now - value)) }
            if value == s.round.value {
                s.round.count += 1
                s.round.last = max(s.round.last, now)
            }
        }
    }
}

final class AtomicCounter: Sendable { let value = Atomic<Int>(0) }

/// Send times in µs that never repeat. When the schedule falls behind under load, several write
/// tasks start together and can read the same microsecond; equal bodies would make the later
/// write a no-op with no event (this lost one write's 100 events in an earlier run).
final class UniqueStamps: Sendable {
    private let last = Atomic<Int>(0)
    func next() -> Int {
        while true {
            let prev = last.load(ordering: .relaxed)
            let v = max(nowMicros(), prev + 1)
            if last.compareExchange(expected: prev, desired: v, ordering: .relaxed).exchanged { return v }
        }
    }
}

// MARK: - minimal JSON scanning

/// Positions just after `"key"` + optional whitespace + `:` + optional whitespace.
private func valueStarts(_ b: [UInt8], key: String) -> [Int] {
    let k = Array("\"\(key)\"".utf8)
    var out: [Int] = []
    var i = 0
    while i + k.count <= b.count {
        if b[i] == k[0], Array(b[i..<(i + k.count)]) == k {
            var j = i + k.count
            while j < b.count, b[j] == 0x20 || b[j] == 0x0A || b[j] == 0x0D || b[j] == 0x09 { j += 1 }
            if j < b.count, b[j] == UInt8(ascii: ":") {
                j += 1
                while j < b.count, b[j] == 0x20 || b[j] == 0x0A || b[j] == 0x0D || b[j] == 0x09 { j += 1 }
                out.append(j)
            }
            i = j
        } else {
            i += 1
        }
    }
    return out
}

/// The response to request 1 with status "ok".
func isListenOK(_ b: [UInt8]) -> Bool {
    let ok = Array("\"ok\"".utf8)
    let hasR1 = valueStarts(b, key: "r").contains { $0 < b.count && b[$0] == UInt8(ascii: "1") && ($0 + 1 == b.count || !(0x30...0x39).contains(b[$0 + 1])) }
    let hasOK = valueStarts(b, key: "s").contains { $0 + ok.count <= b.count && Array(b[$0..<($0 + ok.count)]) == ok }
    return hasR1 && hasOK
}

/// The first integer value of a `"d"` key: the written value in a data push of a number.
func numberData(_ b: [UInt8]) -> Int? {
    for s in valueStarts(b, key: "d") where s < b.count && (0x30...0x39).contains(b[s]) {
        var v = 0
        var j = s
        while j < b.count, (0x30...0x39).contains(b[j]) {
            v = v * 10 + Int(b[j] - 0x30)
            j += 1
        }
        return v
    }
    return nil
}

func nowMicros() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// CPU seconds (user + system) this process has used so far.
func ownCPUSeconds() -> Double {
    var u = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u)
    return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6
        + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
}

/// Raises this process's open-file limit to its hard limit.
func raiseOpenFileLimit() {
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    var l = rlimit()
    guard getrlimit(resource, &l) == 0, l.rlim_cur < l.rlim_max else { return }
    l.rlim_cur = l.rlim_max
    _ = setrlimit(resource, &l)
}

/// The load average, and the host's steal since the previous call: on a shared VM a run that
/// lost cores to the host reads slower, and the figure says so instead of looking like a regression.
func loadAverage() -> String {
    let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
        .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    let now = MachineCPU.now()
    let earlier = lastLoadSample.withLock { last in
        defer { last = now }
        return last
    }
    guard let earlier, now.total > earlier.total else { return load }
    return load + String(format: " (host steal %.1f %% since the last figure)", now.steal(since: earlier) * 100)
}

private let lastLoadSample = Mutex<MachineCPU?>(nil)

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
