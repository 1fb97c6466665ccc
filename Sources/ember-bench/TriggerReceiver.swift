import Crypto
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The trigger bench's local HTTP receiver: a listening socket on loopback, one blocking thread
/// per connection (a trigger lane keeps one keep-alive connection per POST in flight), every
/// POST answered `200` with an empty body right after its bytes are in. Each event of the
/// latency probe's trigger is recorded with the wall-clock time (µs) its last byte arrived: its
/// log index, the entry's timestamp (`time`, ms) and the value written (`after`: the writer's
/// send time in µs); the other triggers' events are counted (each by its `sequence` member)
/// with the highest index seen. The body is searched for those fields (memchr), not parsed:
/// the receiver shares the 2 cores with the cluster it measures, and a JSON parse of 200,000
/// events/s would cost more than the node's delivery. The signature (`X-Ember-Signature`) is
/// checked on every POST of the latency probe's trigger (whose events the latency and
/// duplicate checks use) and on one POST in `verifyEvery` of the others; a bad one is counted.
final class TriggerReceiver: @unchecked Sendable {
    struct Event: Sendable {
        var index: UInt64
        var timeMillis: Int64
        var after: Int64?
        var arrivedMicros: Int64
    }

    struct Counts: Sendable {
        var posts = 0
        var events = 0
        var highestIndex: UInt64 = 0
    }

    private struct State {
        var counts: [String: Counts] = [:]
        var detailed: [String: [Event]] = [:]
        var malformed = 0
        var verified = 0
        var badSignatures = 0
    }

    let port: Int
    private let listener: Int32
    private let state = Mutex(State())
    /// Triggers whose every event is kept (the latency probe's); the others are counted.
    private let detailedTriggers: Mutex<Set<String>> = Mutex([])

    /// Named limits: events kept per detailed trigger, one POST's body, one request head.
    static let maxDetailedEvents = 2_000_000
    static let maxBodyBytes = 64 << 20
    static let maxHeadBytes = 16 * 1024
    /// The secret every bench trigger signs with, and how often a counted trigger's POST is verified.
    static let secret = "ember-bench-trigger-secret"
    static let verifyEvery = 16
    private let key = SymmetricKey(data: Array(TriggerReceiver.secret.utf8))

    init() throws {
        (listener, port) = try Self.listen()
        let fd = listener
        let t = Thread { [weak self] in
            while true {
                let c = accept(fd, nil, nil)
                guard c >= 0 else { return }
                var one: Int32 = 1
                setsockopt(c, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                guard let self else { Glibc.close(c); return }
                let conn = Thread { self.serve(c) }
                conn.name = "trigger-receiver-conn"
                conn.start()
            }
        }
        t.name = "trigger-receiver"
        t.start()
    }

    /// A listening socket on 127.0.0.1 at a port the kernel picks: (fd, port).
    static func listen() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawProbe.Failure(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 128) == 0 else {
            Glibc.close(fd)
            throw RawProbe.Failure(description: "bind/listen: errno \(errno)")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return (fd, Int(UInt16(bigEndian: addr.sin_port)))
    }

    /// The receiver's URL with `path` (any path reaches it; triggers get their own in the bench).
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Stops accepting (connections end when their peer closes them).
    func stop() { _ = Glibc.shutdown(listener, Int32(SHUT_RDWR)) }

    func keepEvents(of trigger: String) { _ = detailedTriggers.withLock { $0.insert(trigger) } }

    func counts(_ trigger: String) -> Counts { state.withLock { $0.counts[trigger] ?? Counts() } }

    func events(_ trigger: String) -> [Event] { state.withLock { $0.detailed[trigger] ?? [] } }

    var malformed: Int { state.withLock { $0.malformed } }

    /// POSTs whose signature was checked, and those whose signature was wrong.
    var signatures: (verified: Int, bad: Int) { state.withLock { ($0.verified, $0.badSignatures) } }

    // MARK: - One connection

    private func serve(_ fd: Int32) {
        defer { Glibc.close(fd) }
        // Bytes received go straight into `buffer` (no chunk copied in), filled through `end`;
        // those before `start` are consumed. The unconsumed rest moves to the front only when
        // the room behind it is short of one read (a pipelined window of POSTs is parsed in
        // place, not moved once per POST or per read).
        var buffer = [UInt8](repeating: 0, count: Self.readBytes * 4)
        var start = 0, end = 0
        var posts = 0
        func fill() -> Bool {
            if buffer.count - end < Self.readBytes {
                if start > 0 {
                    buffer.withUnsafeMutableBytes { b in _ = memmove(b.baseAddress!, b.baseAddress! + start, end - start) }
                    end -= start
                    start = 0
                }
                if buffer.count - end < Self.readBytes { buffer += [UInt8](repeating: 0, count: buffer.count) }
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, $0.count - end, 0) }
            guard n > 0 else { return false }
            end += n
            return true
        }
        while true {
            let head: Head? = buffer.withUnsafeBytes { b in
                Self.find(UnsafeRawBufferPointer(rebasing: b[start..<end]), Self.crlfcrlf, from: 0).map {
                    Self.parseHead(UnsafeRawBufferPointer(rebasing: b[start..<(start + $0)]))
                }
            }
            guard let head else {
                guard end - start <= Self.maxHeadBytes, fill() else { return }
                continue
            }
            guard head.length >= 0, head.length <= Self.maxBodyBytes else {
                respond(fd, Self.lengthRequired)
                return
            }
            let total = head.headLength + 4 + head.length
            while end - start < total { guard fill() else { return } }
            let arrived = ClusterProbe.micros()
            posts += 1
            buffer.withUnsafeBytes { b in
                record(head, sampled: posts % Self.verifyEvery == 1,
                       body: UnsafeRawBufferPointer(rebasing: b[(start + head.headLength + 4)..<(start + total)]), arrived: arrived)
            }
            start += total
            if start == end { start = 0; end = 0 }
            guard respond(fd, Self.ok) else { return }
        }
    }

    /// Named limit: bytes asked of one `recv` (the buffer grows past 4 of them only for a POST
    /// larger than that, up to `maxBodyBytes`).
    static let readBytes = 256 * 1024

    /// What the receiver uses of a request head: read as bytes (a String of the head, split
    /// into lines, each name lowercased and each value trimmed, was a tenth of the bench
    /// process's CPU with ten busy triggers).
    struct Head {
        /// Bytes before the blank line.
        var headLength = 0
        var length = -1
        var trigger = ""
        var signature: [UInt8] = []
    }

    static let contentLength = Array("content-length".utf8)
    static let triggerHeader = Array("x-ember-trigger".utf8)
    static let signatureHeader = Array("x-ember-signature".utf8)

    /// The head's header lines (after the request line) by name, ASCII case-insensitively.
    static func parseHead(_ h: UnsafeRawBufferPointer) -> Head {
        var head = Head(headLength: h.count)
        var at = 0
        // Past the request line.
        while at < h.count && h[at] != 0x0A { at += 1 }
        at += 1
        while at < h.count {
            var lineEnd = at
            while lineEnd < h.count && h[lineEnd] != 0x0A { lineEnd += 1 }
            var colon = at
            while colon < lineEnd && h[colon] != 0x3A { colon += 1 }
            if colon < lineEnd {
                var v = colon + 1, ve = lineEnd
                while v < ve && (h[v] == 0x20 || h[v] == 0x09) { v += 1 }
                while ve > v && (h[ve - 1] == 0x0D || h[ve - 1] == 0x20 || h[ve - 1] == 0x09) { ve -= 1 }
                let name = UnsafeRawBufferPointer(rebasing: h[at..<colon]), value = UnsafeRawBufferPointer(rebasing: h[v..<ve])
                if equalsLowercased(name, contentLength) {
                    var n = 0
                    for c in value {
                        guard c >= 48 && c <= 57, n < maxBodyBytes else { n = -1; break }
                        n = n * 10 + Int(c - 48)
                    }
                    head.length = value.isEmpty ? -1 : n
                } else if equalsLowercased(name, triggerHeader) {
                    head.trigger = String(decoding: value, as: UTF8.self)
                } else if equalsLowercased(name, signatureHeader) {
                    head.signature = Array(value)
                }
            }
            at = lineEnd + 1
        }
        return head
    }

    /// `a` ASCII-lowercased equals `lower`.
    static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lower: [UInt8]) -> Bool {
        guard a.count == lower.count else { return false }
        for k in 0..<a.count {
            let c = a[k]
            if (c >= 65 && c <= 90 ? c + 32 : c) != lower[k] { return false }
        }
        return true
    }

    static let ok = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
    static let lengthRequired = Array("HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\n\r\n".utf8)

    @discardableResult
    private func respond(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) == $0.count }
    }

    private func record(_ head: Head, sampled: Bool, body: UnsafeRawBufferPointer, arrived: Int64) {
        let trigger = head.trigger
        let detailed = detailedTriggers.withLock { $0.contains(trigger) }
        // The latency probe's POSTs are verified and parsed whole; the others are counted by
        // their `sequence` members, and one in `verifyEvery` is verified.
        let verify = detailed || sampled
        let signed = verify ? head.signature == Self.signature(body, key: key) : true
        let counted = detailed ? nil : Self.count(body)
        let scanned = detailed ? Self.scan(body, arrived: arrived) : nil
        state.withLock { s in
            if verify {
                s.verified += 1
                if !signed { s.badSignatures += 1 }
            }
            let n: Int, highest: UInt64
            if let counted, counted.events > 0 {
                (n, highest) = (counted.events, counted.highest)
            } else if let events = scanned, !events.isEmpty {
                (n, highest) = (events.count, events.map(\.index).max() ?? 0)
            } else {
                s.malformed += 1
                return
            }
            var c = s.counts[trigger] ?? Counts()
            c.posts += 1
            c.events += n
            c.highestIndex = max(c.highestIndex, highest)
            s.counts[trigger] = c
            if detailed, let events = scanned {
                let room = Self.maxDetailedEvents - (s.detailed[trigger]?.count ?? 0)
                if room > 0 { s.detailed[trigger, default: []].append(contentsOf: events.prefix(room)) }
            }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `sha256=<hex>` of the body's HMAC-SHA256 with the bench's secret (the header emberd sends), as bytes.
    static func signature(_ body: UnsafeRawBufferPointer, key: SymmetricKey) -> [UInt8] {
        var out = Array("sha256=".utf8)
        for b in HMAC<SHA256>.authenticationCode(for: body, using: key) {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 15)])
        }
        return out
    }

    // MARK: - Scanning a CloudEvent (or an array of them)

    /// A needle and where in it to look first: its byte least common in CloudEvents JSON (by
    /// this ranking), chosen once (looked up per search, hashing the needle was a twentieth of
    /// the bench process's CPU).
    struct Needle {
        let bytes: [UInt8]
        let anchor: Int
        init(_ s: String) {
            bytes = Array(s.utf8)
            let rank = Array("qzxjkvbpygfwmucldrhsnioate".utf8)
            let b = bytes
            anchor = b.indices.min { (rank.firstIndex(of: b[$0]) ?? rank.count) < (rank.firstIndex(of: b[$1]) ?? rank.count) } ?? 0
        }
        var count: Int { bytes.count }
    }

    static let crlfcrlf = Needle("\r\n\r\n")
    static let sequenceKey = Needle(#""sequence":""#)
    static let timeKey = Needle(#""time":""#)
    static let afterKey = Needle(#""after":"#)

    /// The first `needle` in `h` at or after `from`: memchr (vectorized) for the needle's
    /// rarest byte, then a compare. The receiver searches every byte of every POST, 10
    /// triggers' worth of events per write in the throughput run.
    static func find(_ h: UnsafeRawBufferPointer, _ needle: Needle, from: Int) -> Int? {
        guard let base = h.baseAddress, needle.count > 0 else { return nil }
        let anchor = needle.anchor, byte = Int32(needle.bytes[anchor])
        var at = max(0, from) + anchor
        return needle.bytes.withUnsafeBytes { n -> Int? in
            while at <= h.count - (needle.count - anchor) {
                guard let p = memchr(base + at, byte, h.count - (needle.count - anchor) - at + 1) else { return nil }
                let i = base.distance(to: UnsafeRawPointer(p)) - anchor
                if memcmp(base + i, n.baseAddress!, n.count) == 0 { return i }
                at = i + anchor + 1
            }
            return nil
        }
    }

    /// Events in a POST body and the highest log index among them, without keeping them: one
    /// `sequence` member per event (one pass; the values the bench writes never contain the
    /// key); nil when one has no index.
    static func count(_ h: UnsafeRawBufferPointer) -> (events: Int, highest: UInt64)? {
        var events = 0, highest: UInt64 = 0, at = 0
        while let i = find(h, sequenceKey, from: at) {
            var j = i + sequenceKey.count, v: UInt64 = 0
            let digitsStart = j
            while j < h.count, h[j] >= 48, h[j] <= 57 { v = v &* 10 &+ UInt64(h[j] - 48); j += 1 }
            guard j > digitsStart else { return nil }
            highest = max(highest, v)
            events += 1
            at = j
        }
        return (events, highest)
    }

    /// Events in a POST body, in order: each has exactly one `sequence`, `time` and `after` (the
    /// bench's values are numbers or strings without those keys), so the k-th of each belongs to
    /// the k-th event whatever order the keys are written in. nil when they do not line up.
    static func scan(_ h: UnsafeRawBufferPointer, arrived: Int64) -> [Event]? {
        let b = Array(h)
        func all(_ key: Needle) -> [Int] {
            var out: [Int] = [], at = 0
            while let i = find(h, key, from: at) {
                out.append(i + key.count)
                at = i + key.count
            }
            return out
        }
        let seqs = all(sequenceKey), times = all(timeKey), afters = all(afterKey)
        guard seqs.count == times.count, seqs.count == afters.count else { return nil }
        var out: [Event] = []
        out.reserveCapacity(seqs.count)
        for k in seqs.indices {
            guard let index = digits(b, seqs[k]).0, let millis = rfc3339Millis(b, times[k]) else { return nil }
            out.append(Event(index: UInt64(max(0, index)), timeMillis: millis, after: digits(b, afters[k]).0, arrivedMicros: arrived))
        }
        return out
    }

    /// A decimal integer at `i` (an optional minus sign), and where it ends.
    static func digits(_ b: [UInt8], _ i: Int) -> (Int64?, Int) {
        var j = i, v: Int64 = 0, neg = false
        if j < b.count && b[j] == UInt8(ascii: "-") { neg = true; j += 1 }
        let start = j
        while j < b.count, b[j] >= 48, b[j] <= 57 { v = v &* 10 &+ Int64(b[j] - 48); j += 1 }
        return (j > start ? (neg ? -v : v) : nil, j)
    }

    /// `2026-11-28T20:42:57.123Z` at `i`, in ms since 1970 (civil date to days: H. Hinnant's
    /// published method).
    static func rfc3339Millis(_ b: [UInt8], _ i: Int) -> Int64? {
        guard i + 24 <= b.count else { return nil }
        func n(_ from: Int, _ count: Int) -> Int64? {
            var v: Int64 = 0
            for k in from..<(from + count) {
                guard b[k] >= 48 && b[k] <= 57 else { return nil }
                v = v * 10 + Int64(b[k] - 48)
            }
            return v
        }
        guard let y0 = n(i, 4), let m = n(i + 5, 2), let d = n(i + 8, 2), let hh = n(i + 11, 2), let mm = n(i + 14, 2),
              let ss = n(i + 17, 2), let ms = n(i + 20, 3) else { return nil }
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms
    }
}
