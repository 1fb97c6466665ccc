/// Cuts a JSON document read as events (`JSONEventReader`, with their spans) into parts an
/// import writes one multi-path update at a time: a subtree whose text is at most
/// `maxPartBytes` is one part (its path and the span of its text in the document); a larger one
/// is split into its members, recursively. Parts come in document order; their paths are
/// disjoint, so writing them all into an emptied location gives the document.
///
/// A part is a span of the document, not a value: the caller sends those bytes as they are
/// (building each part's value and serializing it again was most of `ember import`'s CPU). So
/// the splitter keeps no values, only each open container's members' keys and spans, and what
/// it needs to check the document as `Node.validate` would check each part's value — as the
/// events come, with the byte offset of the first problem: keys (`Key.validate`; `.priority`
/// and `.value` where Firebase allows them), `.value` beside other members, priorities, the
/// depth of non-empty values below the import's target, string sizes. Memory: the open
/// containers' member lists, about one part's worth; the caller keeps the document's bytes
/// from `retainedFrom` on.
///
/// The priority of an object too large for one part cannot be written with its members (a
/// multi-path update cannot address `.priority`): it comes out as a `.priority` part after the
/// object's members, for the caller to set on its own.
public struct ImportSplitter: Sendable {
    public struct Part: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// The value's text: these bytes of the document (checked as a node's value).
            case value(Range<Int64>)
            /// The priority of an object sent as its members.
            case priority(JSON)
        }
        public var path: [String]
        public var kind: Kind
        /// The document's bytes up to the end of this part.
        public var end: Int64

        public init(path: [String], kind: Kind, end: Int64) {
            self.path = path
            self.kind = kind
            self.end = end
        }
    }

    /// The import's failure: what and where (byte offset in the document), as the reader's.
    public typealias Failure = JSONEventReader.Failure

    public let maxPartBytes: Int64
    /// Segments of the import's target: the document's paths are below it.
    public let targetDepth: Int

    private struct Frame {
        var key: String?
        var isArray: Bool
        var nextIndex = 0
        /// Offset of its opening bracket.
        var start: Int64
        /// Its depth as `Node.validate` counts it: the target's, plus one per key or index
        /// above it (`.value` adds none: it stands for its object).
        var depth: Int
        /// Members finished while buffered (elements keyed by index), with their text; emptied
        /// once split (its members went out as parts).
        var members: [(key: String, span: Range<Int64>)] = []
        var split = false
        var pendingKey: String?
        var priority: JSON?
        /// A `.value` member and another member (not `.priority`): both together is no node.
        var hasValue = false
        var hasMember = false
        /// Some member is non-empty (not null, or a container holding such a value).
        var nonEmpty = false
    }

    private var frames: [Frame] = []
    /// The first buffered frame (everything before it is split).
    private var bufferRoot = 0

    public init(maxPartBytes: Int64, targetDepth: Int) {
        precondition(maxPartBytes > 0, "parts need room")
        self.maxPartBytes = maxPartBytes
        self.targetDepth = targetDepth
    }

    /// The first offset of the document a part still to come may span (nil: none is open). The
    /// caller keeps the bytes from here, and those of a token the reader has open.
    public var retainedFrom: Int64? { bufferRoot < frames.count ? frames[bufferRoot].start : nil }

    /// Takes one event with its span (`JSONEventReader.SpanEmit`).
    public mutating func handle(_ event: JSONEventReader.Event, start: Int64, end offset: Int64, _ emit: (Part) throws -> Void) throws {
        switch event {
        case .beginObject, .beginArray:
            let isArray = event == .beginArray
            let key = try memberKey(offset)
            var depth = targetDepth
            if let key, let parent = frames.last {
                if key == ".priority" && !parent.isArray {
                    // A container is never a priority: the same refusal as `Priority(json:)`'s.
                    do { _ = try Priority(json: .array([])) } catch { throw Failure(offset: offset, reason: error.description) }
                }
                depth = parent.depth + (key == ".value" && !parent.isArray ? 0 : 1)
            }
            frames.append(Frame(key: key, isArray: isArray, start: start, depth: depth))
        case .key(let k):
            let i = frames.count - 1
            if k == ".value" {
                frames[i].hasValue = true
            } else if k != ".priority" {
                do { try Key.validate(k) } catch { throw Failure(offset: offset, reason: error.description) }
                frames[i].hasMember = true
            }
            if frames[i].hasValue && frames[i].hasMember {
                throw Failure(offset: offset, reason: EmberError.invalidValueKey.description)
            }
            frames[i].pendingKey = k
        case .value(let v):
            if case .string(let s) = v, s.utf8.count > Limits.maxStringBytes {
                throw Failure(offset: offset, reason: EmberError.stringTooLong(bytes: s.utf8.count).description)
            }
            guard !frames.isEmpty else { return try emitPart([], start..<offset, offset, emit) }
            let key = try memberKey(offset)!
            let i = frames.count - 1
            if key == ".priority" && !frames[i].isArray {
                do { _ = try Priority(json: v) } catch { throw Failure(offset: offset, reason: error.description) }
                frames[i].priority = v
            } else {
                try finished(key, start..<offset, nonEmpty: !v.isNull, offset, emit)
            }
        case .endObject, .endArray:
            let f = frames.removeLast()
            let i = frames.count
            if !f.split {
                // The first buffered frame is a part; a deeper one a member of its parent.
                if i == bufferRoot {
                    try emitPart(frames.compactMap(\.key) + (f.key.map { [$0] } ?? []), f.start..<offset, offset, emit)
                } else {
                    try finished(f.key!, f.start..<offset, nonEmpty: f.nonEmpty, offset, emit)
                }
            } else {
                bufferRoot = i
                if let p = f.priority {
                    let path = frames.compactMap(\.key) + (f.key.map { [$0] } ?? [])
                    try checkDepth(path, offset)
                    try emit(Part(path: path, kind: .priority(p), end: offset))
                }
            }
        }
        try splitIfLarge(offset, emit)
    }

    /// The key the next member of the innermost frame goes under (nil at the top level).
    private mutating func memberKey(_ offset: Int64) throws -> String? {
        guard !frames.isEmpty else { return nil }
        let i = frames.count - 1
        if frames[i].isArray {
            // `Node.validate`: an array with elements puts them one level down.
            if frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            defer { frames[i].nextIndex += 1 }
            return String(frames[i].nextIndex)
        }
        guard let k = frames[i].pendingKey else { throw Failure(offset: offset, reason: "a member without its key") }
        frames[i].pendingKey = nil
        return k
    }

    /// A finished member (not a priority) of the innermost frame: kept while it is buffered,
    /// else a part. A non-empty member below the deepest path is refused as the node refuses it.
    private mutating func finished(_ key: String, _ span: Range<Int64>, nonEmpty: Bool, _ offset: Int64,
                                   _ emit: (Part) throws -> Void) throws {
        let i = frames.count - 1
        if nonEmpty {
            let isValue = key == ".value" && !frames[i].isArray
            if !isValue && frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            frames[i].nonEmpty = true
        }
        if !frames[i].split {
            frames[i].members.append((key, span))
            return
        }
        let path = frames.compactMap(\.key)
        try emitPart(key == ".value" && !frames[i].isArray ? path : path + [key], span, offset, emit)
    }

    /// Splits the buffered frames whose text passed `maxPartBytes`: their members so far go out
    /// as parts (an object's in key order, a repeated key's last value) and later ones will too.
    private mutating func splitIfLarge(_ offset: Int64, _ emit: (Part) throws -> Void) throws {
        while bufferRoot < frames.count, offset - frames[bufferRoot].start > maxPartBytes {
            let i = bufferRoot
            let path = frames[0...i].compactMap(\.key)
            let members = frames[i].members
            frames[i].members = []
            frames[i].split = true
            bufferRoot = i + 1
            if frames[i].isArray {
                for (k, span) in members { try emitPart(path + [k], span, offset, emit) }
                continue
            }
            var last: [ExactKey: Int] = [:]
            for (n, m) in members.enumerated() { last[ExactKey(m.key)] = n }
            let kept = members.indices.filter { last[ExactKey(members[$0].key)] == $0 }.sorted { KeyOrder.less(members[$0].key, members[$1].key) }
            for n in kept {
                let (k, span) = members[n]
                try emitPart(k == ".value" ? path : path + [k], span, offset, emit)
            }
        }
    }

    private func emitPart(_ path: [String], _ span: Range<Int64>, _ offset: Int64, _ emit: (Part) throws -> Void) throws {
        try checkDepth(path, offset)
        try emit(Part(path: path, kind: .value(span), end: offset))
    }

    /// A part's path (a value's or a priority's) lies within the deepest path below the target.
    private func checkDepth(_ path: [String], _ offset: Int64) throws {
        guard path.count + targetDepth <= Limits.maxPathDepth else {
            throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: path.count + targetDepth).description)
        }
    }
}
