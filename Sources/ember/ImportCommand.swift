import ArgumentParser
import EmberCore
import Foundation
import NIOHTTP1

/// `ember import FILE [PATH]`: replaces the tree at PATH with FILE's JSON, reading the file as a
/// stream (`JSONEventReader`) and cutting it into parts (`ImportSplitter`, `ImportStream`) sent
/// as multi-path PATCHes of at most --max-request-bytes and --max-children, in the file's order.
/// A part goes as its text in the file (checked, never parsed into a value and serialized
/// again). Memory stays about one request whatever the file's size. A file that fits one part
/// goes as one PUT (atomic, as before).
///
/// Resumable: the first request replaces PATH with just a progress record, `PATH/__ember_import__`
/// (`ImportMarker`), and every PATCH writes the record's new count in the same atomic update as
/// its parts, so the node itself says how far the import got — nothing to lose locally, exact
/// after a kill, a Ctrl-C or a node restart. `--resume` re-reads the file, skips the parts the
/// record counts and goes on; the last request removes the record. Parts are plain sets of
/// disjoint paths (no pushes are generated), so a PATCH repeated after a lost answer writes the
/// same data again: nothing duplicated, nothing lost.
///
/// `--in-flight N` requests are sent at once (they may commit in any order). The count a request
/// records is the prefix of requests already answered when it was sent: a lower bound of what
/// the node holds, so a resume re-sends at most the requests that were in flight (idempotent).
/// A clean stop (the end, or a malformed file) waits for them and records the exact count.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "import", abstract: "Replace the tree at PATH with FILE's JSON (streamed, resumable).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "JSON file.") var file: String
    @Argument(help: "Database path (default /).") var path: String = "/"
    @Option(help: "Largest request sent (keep below the node's --max-body-bytes).") var maxRequestBytes = 8 << 20
    @Option(help: "Most parts (paths) per request; the node's update limit is 10000.") var maxChildren = 5_000
    @Option(help: "A subtree of the file larger than this (bytes) is sent as its children.") var maxPartBytes = 1 << 20
    @Option(help: "Requests sent at once (1...\(ImportCommand.maxInFlight)).") var inFlight = 4
    @Flag(help: "Only validate the whole file (keys, depth, sizes); send nothing.") var dryRun = false
    @Flag(help: "Continue an interrupted import of the same file into PATH.") var resume = false
    @Flag(help: "No progress line.") var quiet = false

    /// Bytes read from the file at a time.
    static let readBytes = 1 << 20
    /// Most requests in flight: each holds a request body (up to --max-request-bytes) in memory.
    static let maxInFlight = 16

    func validate() throws {
        guard maxRequestBytes >= 1024, (1...ImportMarker.maxPartsPerRequest).contains(maxChildren), maxPartBytes >= 64 else {
            throw ValidationError("--max-request-bytes must be at least 1024, --max-children 1...\(ImportMarker.maxPartsPerRequest), --max-part-bytes at least 64")
        }
        guard !(dryRun && resume) else { throw ValidationError("--dry-run and --resume exclude each other") }
        guard (1...Self.maxInFlight).contains(inFlight) else { throw ValidationError("--in-flight must be 1...\(Self.maxInFlight)") }
    }

    func run() async throws {
        try await runCLI {
            guard let handle = FileHandle(forReadingAtPath: file) else { throw CLIError("cannot read \(file)") }
            defer { try? handle.close() }
            let size = Int64((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.int64Value ?? 0)
            let target: Path
            do { target = try Path(path) } catch { throw CLIError("bad path \(path): \(error)") }
            // A part is at most a quarter of a request (so requests carry several).
            let partBytes = Int64(min(maxPartBytes, maxRequestBytes / 4))
            if dryRun {
                var parser = ImportParser(file: file, handle: handle, partBytes: partBytes, targetDepth: target.count)
                let progress = ImportProgress(total: size, enabled: !quiet)
                do {
                    while let parts = try parser.next() { for p in parts { progress.part(end: p.end) } }
                } catch let e as ImportFailure {
                    progress.abandon()
                    throw CLIError("\(e)")
                }
                progress.finish()
                emit("\(file) is valid: \(TransferProgress.size(parser.offset)), \(parser.parts) part(s); nothing sent")
                return
            }
            let fileID = try ImportMarker.fileID(path: file, size: size)
            try await NodeClient.with(connection) { c in
                var sender = ImportSender(client: c, path: path, fileID: fileID, maxRequestBytes: maxRequestBytes,
                                          maxParts: maxChildren, partBytes: partBytes, inFlight: inFlight,
                                          progress: ImportProgress(total: size, enabled: !quiet))
                if resume { try await sender.resumeFromNode() }
                var parser = ImportParser(file: file, handle: handle, partBytes: sender.partBytes, targetDepth: target.count)
                try await sender.send(&parser)
                note("imported \(TransferProgress.size(size)) into \(path) in \(sender.requests) request(s)"
                     + (resume ? " (resumed after \(sender.skipped) part(s) the node had)" : ""))
            }
        }
    }
}

/// The file read as parts (`ImportStream`: each part's text is the file's own bytes), a read
/// at a time (`next`), so the caller can await between reads.
struct ImportParser {
    let file: String
    let handle: FileHandle
    private var stream: ImportStream
    private var ended = false
    private var failure: ImportFailure?
    private(set) var parts = 0

    init(file: String, handle: FileHandle, partBytes: Int64, targetDepth: Int) {
        self.file = file
        self.handle = handle
        stream = ImportStream(maxPartBytes: partBytes, targetDepth: targetDepth, reservedKey: ImportMarker.key)
    }

    /// Bytes of the file read so far.
    var offset: Int64 { stream.offset }

    /// The parts completed by the next read of the file (possibly none); nil at its end.
    mutating func next() throws -> [ImportStream.Part]? {
        if let failure { throw failure }
        if ended { return nil }
        var out: [ImportStream.Part] = []
        do {
            let data = try handle.read(upToCount: ImportCommand.readBytes) ?? Data()
            if data.isEmpty {
                try stream.finish(completed: &out)
                ended = true
            } else {
                try data.withUnsafeBytes { raw in try stream.feed(raw.bindMemory(to: UInt8.self), completed: &out) }
            }
        } catch let e as JSONEventReader.Failure {  // the splitter's failures too
            failure = ImportFailure(file: file, offset: e.offset, reason: e.reason)
        }
        // The parts completed before a failure are handed out first; the next call throws it.
        parts += out.count
        return out
    }
}

/// The file is not importable: where and why.
struct ImportFailure: Error, CustomStringConvertible {
    var file: String
    var offset: Int64
    var reason: String
    var description: String { "\(file) is not valid JSON to import: \(reason) at byte \(offset)" }
}

/// The progress record an import keeps at `PATH/__ember_import__` while it runs.
enum ImportMarker {
    static let key = "__ember_import__"
    /// The node's multi-path update limit is 10,000 paths; one is the record.
    static let maxPartsPerRequest = 9_999
    /// Bytes of the file's start hashed into its identity (with its size): enough to tell files
    /// apart without reading a multi-gigabyte file twice.
    static let identityBytes = 1 << 20

    static func fileID(path: String, size: Int64) throws -> String {
        guard let h = FileHandle(forReadingAtPath: path) else { throw CLIError("cannot read \(path)") }
        defer { try? h.close() }
        let head = try h.read(upToCount: identityBytes) ?? Data()
        return "\(size)-" + SHA1.hexDigest(Array(head))
    }

    static func record(fileID: String, parts: Int, bytes: Int64, partBytes: Int64) -> JSON {
        .object(["file": .string(fileID), "parts": .int(Int64(parts)), "bytes": .int(bytes), "partBytes": .int(partBytes)])
    }
}

/// Sends parts in bounded requests, with the progress record in each.
struct ImportSender {
    let client: NodeClient
    let path: String
    let fileID: String
    let maxRequestBytes: Int
    let maxParts: Int
    let inFlight: Int
    let progress: ImportProgress
    /// Data requests sent (this run), and parts the node had already (resume).
    private(set) var requests = 0
    private(set) var skipped = 0
    /// Parts seen in the file so far and parts the node has (the record's count).
    private var seen = 0
    private var committed = 0
    private var started = false
    /// The request being built: an object of the parts' members so far (the record is added
    /// when it is sent).
    private var body = JSONStreamWriter(pretty: false)
    private var bodyParts = 0
    private var bodyEnd: Int64 = 0
    /// The file's part count up to the last part in the body (what the record says once sent).
    private var bodySeen = 0
    /// The part size the import splits at (recorded: a resume must cut the file the same way).
    private(set) var partBytes: Int64
    /// Priorities of objects sent as their children, set once all their members are in.
    private var priorities: [(path: [String], value: JSON)] = []
    /// Requests sent and not yet answered, by number: the part count and file offset each brings
    /// the node to; and the numbers answered beyond the answered prefix.
    private var outstanding: [Int: (seen: Int, bytes: Int64)] = [:]
    private var answeredAhead: Set<Int> = []
    /// Every request below this number is answered; what they brought the node to.
    private var prefix = 0
    private var committedBytes: Int64 = 0

    private var emptyBody: JSONStreamWriter {
        var w = JSONStreamWriter(pretty: false)
        // A request is filled to about its limit: no regrowth (copies) on the way there.
        w.reserveCapacity(maxRequestBytes)
        w.beginObject()
        return w
    }

    init(client: NodeClient, path: String, fileID: String, maxRequestBytes: Int, maxParts: Int, partBytes: Int64,
         inFlight: Int, progress: ImportProgress) {
        self.inFlight = inFlight
        self.partBytes = partBytes
        self.client = client
        self.path = path
        self.fileID = fileID
        self.maxRequestBytes = maxRequestBytes
        self.maxParts = maxParts
        self.progress = progress
        body = emptyBody
    }

    /// How a request is retried while a cluster elects a leader (502/503/504, or the connection
    /// dropped or refused, for a few seconds): attempts in all, and the first and longest wait
    /// (doubling). Safe to repeat: parts are plain sets of disjoint paths, and a repeated record
    /// count is never above what the node holds.
    static let retry = (attempts: 10, first: Duration.milliseconds(100), longest: Duration.seconds(4))

    static func callRetrying(_ client: NodeClient, _ method: HTTPMethod, _ url: String, body: [UInt8]) async throws {
        var wait = retry.first
        for attempt in 1...retry.attempts {
            let last = attempt == retry.attempts
            // Only the call itself is retried when it throws (connection dropped or refused); a
            // status that says the request is wrong ends the import at once.
            let answer: NodeResponse?
            do {
                answer = try await client.call(method, url, body: body, allowError: true)
            } catch {
                if last { throw error }
                answer = nil
            }
            if let r = answer {
                if (200..<300).contains(r.status) { return }
                guard [502, 503, 504].contains(r.status), !last else { throw NodeClient.failure(method, url, r.status, r.body) }
            }
            try await Task.sleep(for: wait)
            wait = min(wait * 2, retry.longest)
        }
    }

    /// Reads the node's progress record: the parts to skip.
    mutating func resumeFromNode() async throws {
        let r = try await client.call(.GET, client.dataURL(path + "/" + ImportMarker.key))
        guard case .object(let o) = try r.json(), case .string(let id)? = o["file"], case .int(let parts)? = o["parts"] else {
            throw CLIError("no interrupted import at \(path) (it finished, or never started): run without --resume")
        }
        guard id == fileID else { throw CLIError("the import interrupted at \(path) was of another file (\(id)); run without --resume to start over") }
        guard case .int(let pb)? = o["partBytes"], pb > 0 else { throw CLIError("the progress record at \(path) is not one this version reads") }
        skipped = Int(parts)
        committed = Int(parts)
        partBytes = pb
        started = true
    }

    mutating func send(_ parser: inout ImportParser) async throws {
        var whole: [UInt8]?
        try await withThrowingTaskGroup(of: Int.self) { group in
            do {
                while let parts = try parser.next() {
                    for part in parts {
                        seen += 1
                        switch part.payload {
                        case .priority(let p): priorities.append((part.path, p))  // resent on resume: idempotent
                        case .text(let text) where part.path.isEmpty: whole = text
                        case .text(let text):
                            if seen <= skipped { progress.part(end: part.end); continue }
                            try await add(part.path, text, end: part.end, &group)
                        }
                    }
                }
            } catch let e as ImportFailure {
                progress.abandon()
                // What was sent before the error is committed, and the record says so exactly.
                try await drain(&group)
                try await record(parts: committed, bytes: committedBytes)
                throw CLIError("\(e); \(requests) request(s) committed before it (\(committed) part(s) in \(path), "
                               + "recorded at \(path)/\(ImportMarker.key)); nothing after them was written")
            }
            if let whole, !started {
                // The file was one part: one PUT, atomic.
                try await client.call(.PUT, client.dataURL(path, query: ["print=silent"]), body: whole)
                requests += 1
                progress.part(end: parser.offset)
                return
            }
            try await flush(&group)
            try await drain(&group)
        }
        if requests == 1 && !started {
            progress.finish()
            return
        }
        for (p, v) in priorities {
            try await client.call(.PUT, client.dataURL(([path] + p).joined(separator: "/") + "/.priority", query: ["print=silent"]),
                                  body: v.serializedBytes())
        }
        try await client.call(.PATCH, client.dataURL(path, query: ["print=silent"]),
                              body: JSON.object([ImportMarker.key: .null]).serializedBytes())
        progress.finish()
    }

    /// Waits for every request in flight.
    private mutating func drain(_ group: inout ThrowingTaskGroup<Int, any Error>) async throws {
        while let done = try await group.next() { answered(done) }
    }

    /// Request `number` was answered: the answered prefix grows past every request answered.
    private mutating func answered(_ number: Int) {
        answeredAhead.insert(number)
        while answeredAhead.remove(prefix) != nil {
            if let o = outstanding.removeValue(forKey: prefix) { committed = o.seen; committedBytes = o.bytes }
            prefix += 1
        }
    }

    /// Writes the progress record alone (after a clean stop: the exact count).
    private func record(parts: Int, bytes: Int64) async throws {
        guard started else { return }
        let body = JSON.object([ImportMarker.key: ImportMarker.record(fileID: fileID, parts: parts, bytes: bytes, partBytes: partBytes)])
        try await client.call(.PATCH, client.dataURL(path, query: ["print=silent"]), body: body.serializedBytes())
    }

    /// Adds a part (its path and its text from the file) to the request being built, sending
    /// it first when the part would not fit.
    private mutating func add(_ partPath: [String], _ value: [UInt8], end: Int64, _ group: inout ThrowingTaskGroup<Int, any Error>) async throws {
        let key = partPath.joined(separator: "/")
        let entryBytes = JSONStreamWriter.memberSize(key: key, valueBytes: value.count)
        // Room for the record (~150 bytes) and the braces.
        if bodyParts > 0 && (body.out.count + entryBytes + 256 > maxRequestBytes || bodyParts >= maxParts) {
            try await flush(&group)
        }
        if entryBytes + 256 > maxRequestBytes {
            throw CLIError("\(key) alone is \(entryBytes) bytes, over --max-request-bytes \(maxRequestBytes)")
        }
        body.key(key)
        body.value(serialized: value)
        bodyParts += 1
        bodyEnd = end
        bodySeen = seen
        progress.part(end: end)
    }

    /// Sends the request being built, once fewer than `inFlight` are out. Its record holds the
    /// count the answered prefix brought the node to (a lower bound whatever order the requests
    /// in flight commit in).
    private mutating func flush(_ group: inout ThrowingTaskGroup<Int, any Error>) async throws {
        if !started {
            // Replace PATH with the record alone: the old data goes, the import's state comes.
            let first = JSON.object([ImportMarker.key: ImportMarker.record(fileID: fileID, parts: committed, bytes: 0, partBytes: partBytes)])
            try await Self.callRetrying(client, .PUT, client.dataURL(path, query: ["print=silent"]), body: first.serializedBytes())
            started = true
        }
        guard bodyParts > 0 else { return }
        while outstanding.count - answeredAhead.count >= inFlight, let done = try await group.next() { answered(done) }
        var request = body
        request.key(ImportMarker.key)
        request.value(ImportMarker.record(fileID: fileID, parts: committed, bytes: committedBytes, partBytes: partBytes))
        request.end()
        let b = request.take()
        let number = requests
        outstanding[number] = (bodySeen, bodyEnd)
        let client = self.client, url = client.dataURL(path, query: ["print=silent"])
        group.addTask {
            try await Self.callRetrying(client, .PATCH, url, body: b)
            return number
        }
        requests += 1
        body = emptyBody
        bodyParts = 0
    }
}

/// The progress line of an import: bytes of the file, parts (children) per second, ETA.
final class ImportProgress {
    let total: Int64
    let enabled: Bool
    private let started = Date()
    private var lastDraw = Date.distantPast
    private(set) var parts = 0
    private var end: Int64 = 0

    init(total: Int64, enabled: Bool) {
        self.total = total
        self.enabled = enabled
    }

    func part(end: Int64) {
        parts += 1
        self.end = end
        let now = Date()
        if now.timeIntervalSince(lastDraw) >= 0.2 { draw(now); lastDraw = now }
    }

    func finish() {
        guard enabled else { return }
        draw(Date())
        FileHandle.standardError.write(Data("\n".utf8))
    }

    /// Ends a line already drawn (before an error is printed under it).
    func abandon() {
        guard enabled, lastDraw != .distantPast else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }

    private func draw(_ now: Date) {
        guard enabled else { return }
        let elapsed = max(0.001, now.timeIntervalSince(started))
        let rate = Double(parts) / elapsed
        var text = "\rimport \(TransferProgress.size(end))"
        if total > 0 { text += "/\(TransferProgress.size(total)) " + String(format: "%3.0f%%", min(100, 100 * Double(end) / Double(total))) }
        text += " · \(parts) children · " + String(format: "%.0f", rate) + " children/s"
        if total > 0, end > 0 {
            let eta = max(0, elapsed * Double(total - end) / Double(end))
            text += String(format: " · ETA %d:%02d", Int(eta) / 60, Int(eta) % 60)
        }
        FileHandle.standardError.write(Data((text + "   ").utf8))
    }
}
