// EmberFuzz: the bodies of the fuzz targets (Sources/Fuzz/* are their libFuzzer executables).
// Must not: be linked by the node, or depend on network packages (it builds with the pure modules).

import EmberCore
import Foundation
import EmberProtocol
import EmberRules
import EmberStorage

/// The bodies of Ember's fuzz targets (issue 6). Each takes arbitrary bytes, drives one parser
/// the way the node does with input from outside, and checks properties that must hold for every
/// input; a violated property or a crash is a bug. The libFuzzer executables (`FuzzJSON`, …) call
/// these; `EmberFuzzTests` replays the committed corpus (`Tests/EmberFuzzTests/Corpus`) through
/// them in the default suite. Named limits keep one input's work bounded.
public enum FuzzHarness {
    /// Inputs longer than this are cut (libFuzzer is also run with `-max_len`).
    public static let maxInputBytes = 64 * 1024

    public static let targets: [String: @Sendable ([UInt8]) throws(FuzzViolation) -> Void] = [
        "json": json, "path": path, "rest": rest, "wire": wire, "rules": rules, "httphead": httpHead,
    ]

    // MARK: - JSON parser and the data model

    /// Parse; serializing is a fixed point; the node built from it survives export and back.
    public static func json(_ data: [UInt8]) throws(FuzzViolation) {
        let bytes = Array(data.prefix(maxInputBytes))
        try jsonStream(bytes)
        guard let j = try? JSON.parse(bytes) else { return }
        let once = j.serializedBytes()
        guard let again = try? JSON.parse(once) else { throw fail("serialized JSON does not parse: \(text(once))") }
        let twice = again.serializedBytes()
        try check(once == twice, "serialization is not a fixed point: \(text(once)) vs \(text(twice))")
        _ = j.serialized(pretty: true)
        guard let resolved = try? ServerValues.resolve(j, existing: .empty, now: 1_700_000_000_000),
              let node = try? Node(json: resolved) else { return }
        _ = node.toJSON().serializedBytes()
        _ = node.firebaseHash
        let exported = node.exportJSON()
        guard let back = try? Node(json: exported) else { throw fail("export form does not parse back: \(exported.serialized())") }
        try check(back == node, "export round trip changed the node: \(exported.serialized())")
    }

    /// The streaming reader (`JSONEventReader`, `ember import`) accepts exactly what the parser
    /// accepts, in any split of the input, and its events build the same value; the import's
    /// parts (`ImportSplitter`, split small so most inputs split) written into an empty tree
    /// give the node the whole document makes.
    static func jsonStream(_ bytes: [UInt8]) throws(FuzzViolation) {
        let whole = try? JSON.parse(bytes)
        let split = 1 + Int(bytes.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFF } % 13)
        let streamed = try? JSONEventReader.parseInPieces(bytes, split: split)
        try check((whole == nil) == (streamed == nil),
                  "stream reader \(streamed == nil ? "refused" : "accepted") what the parser \(whole == nil ? "refused" : "accepted"): \(text(bytes))")
        guard let whole, let streamed else { return }
        try check(whole.serializedBytes() == streamed.serializedBytes(), "stream reader built another value: \(text(bytes))")
        // Repeated keys: the parser keeps the last; split parts may merge them (documented).
        guard case .object = whole, let node = try? Node(json: whole), !hasRepeatedKeys(bytes) else { return }
        var built = Node.empty
        var priorities: [(Path, JSON)] = []
        do {
            try ImportSplitter.split(bytes, maxPartBytes: 16, targetDepth: 0) { part in
                let path = Path(validated: part.path)
                switch part.kind {
                case .value(let span):
                    // A part is the document's text there, parsed as the node parses it.
                    let text = bytes[Int(span.lowerBound)..<Int(span.upperBound)]
                    built = built.setting(try Node(json: try JSON.parse(text)), at: path)
                case .priority(let p): priorities.append((path, p))
                }
            }
        } catch {
            throw fail("import split refused a document the node takes (\(error)): \(text(bytes))")
        }
        for (path, p) in priorities {
            guard let pr = try? Priority(json: p) else { throw fail("a priority part that is no priority: \(text(bytes))") }
            built = built.setting(built.child(at: path).withPriority(pr), at: path)
        }
        try check(built == node, "import parts rebuild another node: \(built.exportJSON().serialized()) vs \(node.exportJSON().serialized()) from \(text(bytes))")
    }

    /// Whether some object of the (valid) document repeats a key.
    static func hasRepeatedKeys(_ bytes: [UInt8]) -> Bool {
        var reader = JSONEventReader()
        var seen: [Set<String>?] = []
        var repeated = false
        let look: (JSONEventReader.Event, Int64) -> Void = { e, _ in
            switch e {
            case .beginObject: seen.append([])
            case .beginArray: seen.append(nil)
            case .endObject, .endArray: seen.removeLast()
            case .key(let k): if seen[seen.count - 1]?.insert(k).inserted == false { repeated = true }
            case .value: break
            }
        }
        do {
            try reader.feed(bytes, look)
            try reader.finish(look)
        } catch { return false }
        return repeated
    }

    // MARK: - Paths and keys

    /// Parse a path; its text parses to the same path; its storage key encoding decodes back and
    /// orders like the paths (checked against the next line of the input as a second path).
    public static func path(_ data: [UInt8]) throws(FuzzViolation) {
        let s = String(decoding: data.prefix(maxInputBytes), as: UTF8.self)
        let lines = s.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        var parsed: [Path] = []
        for line in lines {
            _ = Key.isValid(line)
            guard let p = try? Path(line) else { continue }
            guard let q = try? Path(p.description) else { throw fail("path text does not parse back: \(p)") }
            try check(p == q, "path round trip: \(p) vs \(q)")
            let enc = KeyCodec.encode(p)
            try check(KeyCodec.decodeSegments(enc) == p.segments, "key encoding does not decode back: \(p)")
            parsed.append(p)
        }
        if parsed.count == 2 {
            let (a, b) = (parsed[0], parsed[1])
            let byBytes = KeyCodec.encode(a).lexicographicallyPrecedes(KeyCodec.encode(b))
            try check(byBytes == pathLess(a, b), "key encoding order differs from Firebase order: \(a) vs \(b)")
        }
    }

    /// Firebase path order: segment by segment in key order, a prefix first. Segments are told
    /// apart by their bytes, as keys are everywhere (Swift's `!=` on String is canonical
    /// equivalence and would call "a\u{301}" and "a\u{341}" the same segment).
    static func pathLess(_ a: Path, _ b: Path) -> Bool {
        for (x, y) in zip(a.segments, b.segments) {
            let c = KeyOrder.compare(x, y)
            if c != 0 { return c < 0 }
        }
        return a.count < b.count
    }

    // MARK: - REST URLs

    /// Parse a request target as the REST front does; accepted requests stay within the limits.
    public static func rest(_ data: [UInt8]) throws(FuzzViolation) {
        let uri = String(decoding: data.prefix(maxInputBytes), as: UTF8.self)
        let full = try? RestRequest.parse(uri: uri)
        // The one-pass reading of common write targets answers only what the full parse answers.
        if let simple = RestRequest.simpleDataTarget(uri) {
            try check(simple == full, "simpleDataTarget differs from parse for \(uri)")
        }
        guard let req = full else { return }
        try check(req.path.count <= Limits.maxPathDepth, "accepted a path deeper than the limit: \(uri)")
        if let t = req.timeoutMillis { try check(t > 0 && t <= RestRequest.maxTimeoutMillis, "accepted timeout \(t)") }
        if let q = req.query { _ = q.wireObject.serialized() }
    }

    // MARK: - HTTP request heads (the node's byte-level REST front)

    /// Read a request head as `RawRestFastPath` does: never outside the bytes; a write it takes
    /// has a head that ends with the blank line, within both limits; no prefix cutting that head
    /// is taken (a head is taken only once whole); bytes after it change nothing.
    public static func httpHead(_ data: [UInt8]) throws(FuzzViolation) {
        let bytes = Array(data.prefix(maxInputBytes))
        guard case .write(let head) = RawWriteHead.parse(bytes) else { return }
        let n = head.headLength
        try check(n >= 4 && n <= bytes.count, "head length \(n) of \(bytes.count) bytes")
        try check(Array(bytes[(n - 4)..<n]) == Array("\r\n\r\n".utf8), "a taken head does not end with a blank line")
        try check(n - 4 <= RawWriteHead.maxHeadBytes, "took a head of \(n) bytes")
        try check(head.contentLength <= RawWriteHead.maxBodyBytes, "took a body of \(head.contentLength) bytes")
        for cut in stride(from: 0, to: n, by: max(1, n / 32)) {
            guard case .incomplete = RawWriteHead.parse(Array(bytes[..<cut])) else {
                throw fail("a head cut at \(cut) of \(n) bytes was not waited for: \(text(Array(bytes[..<n])))")
            }
        }
        guard case .write(let again) = RawWriteHead.parse(bytes + Array("PUT /x.json HTTP/1.1\r\n".utf8)),
              again.headLength == n, again.contentLength == head.contentLength, again.method == head.method,
              again.authorization == head.authorization else {
            throw fail("bytes after a head changed how it reads: \(text(Array(bytes[..<n])))")
        }
    }

    // MARK: - Wire protocol: frames and messages

    /// Lines of the input are WebSocket text frames: reassemble them under a small message limit,
    /// decode every message as the realtime handler does, and check that splitting a message into
    /// frames and reassembling it gives it back.
    public static func wire(_ data: [UInt8]) throws(FuzzViolation) {
        let s = String(decoding: data.prefix(maxInputBytes), as: UTF8.self)
        var reassembler = WireReassembler(maxMessageBytes: 4096)
        for frame in s.split(separator: "\n", omittingEmptySubsequences: false) {
            let out: WireReassembler.Output
            do { out = try reassembler.feed(String(frame)) } catch { reassembler = WireReassembler(maxMessageBytes: 4096); continue }
            if case .message(let text) = out {
                decodeMessage(text)
                try typedRoundTrip(text)
            }
        }
        // A message that is all digits (≤ 6) reads as a frame count, by the protocol's own rule;
        // real messages are JSON objects, so the round trip is checked for everything else.
        if isCountFrame(s) { return }
        var again = WireReassembler(maxMessageBytes: 4 * maxInputBytes + 64)
        var got: String? = nil
        for frame in WireFraming.split(s) {
            do {
                if case .message(let m) = try again.feed(frame) { got = m }
            } catch { throw fail("own framing refused: \(error)") }
        }
        try check(got == s, "framing round trip lost the message")
    }

    /// The shared typed messages: whatever parses as a message re-encodes to text that parses
    /// back to the same message (both directions).
    static func typedRoundTrip(_ text: String) throws(FuzzViolation) {
        if case .success(let m) = WireClientMessage.parse(text), m != .ignored {
            try check(WireClientMessage.parse(m.text) == .success(m), "client message round trip changed \(m)")
        }
        if let m = WireServerMessage.parse(text), m != .ignored {
            try check(WireServerMessage.parse(m.text) == m, "server message round trip changed \(m)")
        }
    }

    static func isCountFrame(_ s: String) -> Bool {
        s.utf8.count <= 6 && !s.isEmpty && s.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }
    }

    /// The realtime handler's decoding of one request: envelope, request number, action, path,
    /// query object, data and update parts.
    static func decodeMessage(_ text: String) {
        guard let json = try? JSON.parse(text), case .object(let envelope) = json,
              case .object(let d)? = envelope["d"] else { return }
        guard case .int = d["r"], d["a"]?.stringValue != nil else { return }
        let b = d["b"]?.objectValue ?? [:]
        if let p = b["p"]?.stringValue { _ = try? Path(p) }
        if let q = b["q"] { _ = try? QuerySpec(wire: q) }
        if let data = b["d"] {
            if let resolved = try? ServerValues.resolve(data, existing: .empty, now: 0) { _ = try? Node(json: resolved) }
            if case .object(let o) = data { for k in o.keys { _ = try? Path(k) } }
        }
    }

    // MARK: - Rules

    /// Parse a rules document; when it loads, judge reads and writes on a small tree with and
    /// without auth (the evaluator must answer, never crash or loop without bound).
    public static func rules(_ data: [UInt8]) throws(FuzzViolation) {
        let text = String(decoding: data.prefix(maxInputBytes), as: UTF8.self)
        guard let engine = try? RulesEngine(text: text) else { return }
        let root = try! Node(json: JSON.parse(#"{"users":{"alice":{"name":"Alice","age":30,"tags":{"0":"a"}},"bob":{"name":"Bob"}},"posts":{"p1":{"owner":"alice","n":1.5}},"flag":true}"#))
        let auths: [JSON?] = [nil, .object(["uid": .string("alice"), "token": .object(["admin": .bool(false), "email": .string("a@x.io")])])]
        let paths = ["", "users", "users/alice", "users/alice/name", "posts/p1", "posts/p2/owner", "flag"].map { try! Path($0) }
        let newValue = try! Node(json: JSON.parse(#"{"name":"Zed","owner":"alice","n":2}"#))
        for auth in auths {
            for p in paths {
                _ = engine.canRead(path: p, auth: auth, root: root, now: 1_700_000_000_000)
                _ = engine.canRead(path: p, auth: auth, root: root, now: 1_700_000_000_000, query: QuerySpec(index: .key).limited(toFirst: 2))
                _ = engine.canWrite(path: p, newValue: newValue, auth: auth, root: root, now: 1_700_000_000_000)
                _ = engine.canWrite(path: p, newValue: .empty, auth: auth, root: root, now: 1_700_000_000_000)
            }
            _ = engine.canUpdate(path: .root, parts: [(try! Path("users/bob/name"), Node(.string("B"))), (try! Path("flag"), .empty)],
                                 auth: auth, root: root, now: 1_700_000_000_000)
        }
    }

    // MARK: - Helpers

    static func text(_ b: [UInt8]) -> String { String(decoding: b.prefix(200), as: UTF8.self) }

    static func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzViolation) {
        if !condition { throw FuzzViolation(message: message()) }
    }

    static func fail(_ message: String) -> FuzzViolation { FuzzViolation(message: message) }
}

/// A property that must hold for every input did not. The libFuzzer entry points crash on it
/// (so libFuzzer keeps the input); the corpus replay test reports it.
public struct FuzzViolation: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { "fuzz property violated: \(message)" }
}

extension FuzzHarness {
    /// Shared libFuzzer entry: runs target `name` on the input; a violated property crashes so
    /// libFuzzer saves the input as a crash artifact.
    public static func entry(_ name: String, _ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do { try targets[name]!(bytes) } catch { fatalError(error.description) }
        return 0
    }
}

extension FuzzHarness {
    /// The ordinary (non-libFuzzer) build of a fuzz executable: replays the files named on the
    /// command line, reports violations and exits non-zero if any (so it never returns).
    public static func replayMain(target: String) -> Int32 {
        var failures = 0
        let files = CommandLine.arguments.dropFirst()
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                print("\(file): cannot read")
                failures += 1
                continue
            }
            do { try targets[target]!([UInt8](data)) } catch {
                print("\(file): \(error)")
                failures += 1
            }
        }
        print("\(target): \(files.count) inputs replayed, \(failures) failures")
        exit(failures == 0 ? 0 : 1)
    }
}
