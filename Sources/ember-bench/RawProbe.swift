import Foundation
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The latency probe's client on plain blocking sockets, one thread per socket: the open-loop
/// writer stamps each write right before its bytes go to the kernel, and the listener stamps what
/// it reads right after `recv` returns. Measured with AsyncHTTPClient instead (a task, a pooled
/// connection and several event-loop hops per write, ~150 µs of CPU each on the bench box), the
/// client's own overhead was most of the figure: ~4.9 ms p50 at 1,000 writes/s for a path this
/// probe times at under 2 ms. Ember and etcd get the same client.
enum RawProbe {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A connected TCP socket (loopback, `TCP_NODELAY`).
    final class Socket: @unchecked Sendable {
        let fd: Int32
        let host: String

        init(url: String) throws {
            guard let u = URL(string: url), let h = u.host, let port = u.port else { throw Failure(description: "bad URL \(url)") }
            host = "\(h):\(port)"
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = inet_addr(h)
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard ok == 0 else {
                Glibc.close(fd)
                throw Failure(description: "connect \(url): errno \(errno)")
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }

        func send(_ request: RawHTTPRequest) throws {
            var out = ByteBuffer()
            request.write(host: host, into: &out)
            try out.withUnsafeReadableBytes { raw in
                var sent = 0
                while sent < raw.count {
                    let n = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                    guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
                    sent += n
                }
            }
        }

        /// Appends what arrives to `buffer`; 0 when the peer closed (or the socket was shut down).
        func receive(into buffer: inout ByteBuffer) -> Int {
            buffer.reserveCapacity(minimumWritableBytes: Self.readBytes)
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.readBytes) { raw in
                max(0, recv(fd, raw.baseAddress, Self.readBytes, 0))
            }
            return n
        }

        /// Ends a blocked `receive` on another thread.
        func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        deinit { Glibc.close(fd) }

        /// Bytes asked of the kernel per `recv`.
        static let readBytes = 64 * 1024
    }

    static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func sleep(untilNanos due: UInt64) {
        var ts = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// Connections the open-loop writer spreads its writes over (each pipelines its share).
    static let writerConnections = 4
    /// How long the writer waits for the last answers after its last send.
    static let drainSeconds = 10.0

    /// Sends `rate` writes/s for `seconds` over `writerConnections` pipelined keep-alive
    /// connections (write i on connection i mod n), then `stop`; `request(i, micros)` makes write i
    /// stamped with the wall clock in µs. At most `maxInFlight` unanswered at once (the sender
    /// waits beyond that). Blocking: run it off the cooperative pool.
    static func openLoopWrites(url: String, rate: Int, seconds: Double, maxInFlight: Int,
                               request: (Int, Int64) -> RawHTTPRequest, stop: RawHTTPRequest) throws
        -> (acked: Int, errors: Int, late: Int) {
        let sockets = try (0..<writerConnections).map { _ in try Socket(url: url) }
        let acked = Atomic<Int>(0), errors = Atomic<Int>(0)
        // One reader thread per socket counts its answers; it ends when the socket is shut down.
        for s in sockets {
            Thread {
                var reader = RawHTTPResponseReader()
                var buffer = ByteBuffer()
                while s.receive(into: &buffer) > 0 {
                    do {
                        while let r = try reader.next(&buffer) {
                            if r.status / 100 == 2 { acked.add(1, ordering: .relaxed) } else { errors.add(1, ordering: .relaxed) }
                        }
                    } catch {
                        errors.add(1, ordering: .relaxed)
                        return
                    }
                }
            }.start()
        }
        let answered = { acked.load(ordering: .relaxed) + errors.load(ordering: .relaxed) }
        let total = Int(Double(rate) * seconds)
        let interval = UInt64(1e9 / Double(rate))
        let start = monotonicNanos()
        var late = 0, sendErrors = 0
        for i in 0..<total {
            let due = start + UInt64(i) * interval
            if monotonicNanos() < due { sleep(untilNanos: due) }
            if monotonicNanos() > due + 1_000_000 { late += 1 }
            while i - answered() >= maxInFlight { usleep(50) }
            do { try sockets[i % sockets.count].send(request(i, ClusterProbe.micros())) } catch { sendErrors += 1 }
        }
        // The stop write goes out once every write is answered: sent at once over another
        // connection it could reach the server first, and the listener would end before the
        // last writes' events (one "missing" event per run, seen at 1,000 writes/s).
        let deadline = monotonicNanos() + UInt64(drainSeconds * 1e9)
        while answered() + sendErrors < total && monotonicNanos() < deadline { usleep(200) }
        do { try sockets[0].send(stop) } catch { sendErrors += 1 }
        while answered() + sendErrors < total + 1 && monotonicNanos() < deadline { usleep(1_000) }
        for s in sockets { s.shutdown() }
        // The stop write's answer is not a probe write.
        return (max(0, acked.load(ordering: .relaxed) - 1), errors.load(ordering: .relaxed) + sendErrors, late)
    }

    /// Reads a streamed HTTP response (identity or chunked body) from `socket` and hands each
    /// complete body line to `line` with the time (µs, wall clock) its bytes were received, until
    /// `line` returns false or the stream ends. Blocking. The framing is `RawHTTPResponseReader`'s,
    /// with the body handed over instead of skipped.
    static func streamLines(_ socket: Socket, line: (Substring, Int64) -> Bool) throws {
        var buffer = ByteBuffer()
        let body = BodyBytes()
        var reader = RawHTTPResponseReader()
        reader.maxBody = .max  // a stream lasts the run
        reader.onBody = { body.bytes.writeImmutableBuffer($0) }
        while socket.receive(into: &buffer) > 0 {
            let now = ClusterProbe.micros()
            let ended = try reader.next(&buffer)
            if reader.status != 0 && !(200..<300).contains(reader.status) {
                throw Failure(description: "stream refused: HTTP \(reader.status)")
            }
            buffer.discardReadBytes()
            // Complete lines of the body so far.
            let view = body.bytes.readableBytesView
            if let lastNewline = view.lastIndex(of: UInt8(ascii: "\n")) {
                let text = String(decoding: view[view.startIndex..<lastNewline], as: UTF8.self)
                body.bytes.moveReaderIndex(forwardBy: lastNewline + 1 - view.startIndex)
                body.bytes.discardReadBytes()
                for l in text.split(separator: "\n", omittingEmptySubsequences: true) where !line(l, now) { return }
            }
            if ended != nil { return }
        }
    }

    /// The body a streamed response has delivered and `streamLines` has not yet split.
    private final class BodyBytes {
        var bytes = ByteBuffer()
    }

    /// Runs blocking `work` on a thread of its own and awaits its result.
    static func onThread<T: Sendable>(_ name: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let t = Thread { c.resume(with: Result { try work() }) }
            t.name = name
            t.start()
        }
    }
}
