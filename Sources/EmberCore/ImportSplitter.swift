/// Cuts a JSON document read as raw events (`JSONEventReader.feed(_:raw:)`) into parts an
/// import writes one multi-path update at a time: a subtree whose text is at most
/// `maxPartBytes` is one part (its path and the span of its text in the document); a larger one
/// is split into its members, recursively. Parts come in document order; their paths are
/// disjoint, so writing them all into an emptied location gives the document.
///
/// A part is a span of the document, not a value: the caller sends those bytes as they are
/// (building each part's value and serializing it again was most of `ember import`'s CPU). So
/// the splitter builds no values (nor a `String` per key: keys stay spans of the document until
/// a path needs them), only each open container's members' keys and spans, and what
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

    /// The document's bytes from `base` on, as far as read: the splitter reads the keys it kept
    /// by their span (all after `retainedFrom`) when it splits an object.
    public struct Text {
        public let bytes: UnsafeBufferPointer<UInt8>
        public let base: Int64
        public init(_ bytes: UnsafeBufferPointer<UInt8>, base: Int64) {
            self.bytes = bytes
            self.base = base
        }

        func slice(_ r: Range<Int64>) -> UnsafeBufferPointer<UInt8> {
            precondition(r.lowerBound >= base && r.upperBound - base <= Int64(bytes.count), "a kept key outside the text held")
            return UnsafeBufferPointer(rebasing: bytes[Int(r.lowerBound - base)..<Int(r.upperBound - base)])
        }
    }

    public let maxPartBytes: Int64
    /// Segments of the import's target: the document's paths are below it.
    public let targetDepth: Int

    /// A member's key as cheaply as it came: an element's index, or a plain key's content as a
    /// span of the document, made a `String` only when a part's path or a split object's order
    /// needs it (most members travel inside their part's text and never do); an escaped key as
    /// the reader decoded it.
    enum MemberKey {
        case index(Int)
        case span(Range<Int64>)
        case string(String)

        func string(_ text: Text) -> String {
            switch self {
            case .index(let i): return String(i)
            case .span(let r): return String(decoding: text.slice(r), as: UTF8.self)
            case .string(let s): return s
            }
        }

        /// Without reading the document: a key that is no span.
        var resolved: String? {
            switch self {
            case .index(let i): return String(i)
            case .span: return nil
            case .string(let s): return s
            }
        }
    }

    /// What a member's key makes it: a member, the object's `.value` or its `.priority` (an
    /// element is always a member).
    enum Role { case member, value, priority }

    private struct Frame {
        /// Nil at the top level. A split frame's, and the first buffered frame's, is never a
        /// span (read once it becomes either): the bytes before `retainedFrom` may be gone.
        var key: MemberKey?
        var role: Role
        var isArray: Bool
        var nextIndex = 0
        /// Offset of its opening bracket.
        var start: Int64
        /// Its depth as `Node.validate` counts it: the target's, plus one per key or index
        /// above it (`.value` adds none: it stands for its object).
        var depth: Int
        /// Where its members begin in `members` (they end where the next frame's begin).
        var membersFrom: Int
        var split = false
        var pendingKey: MemberKey?
        var pendingRole = Role.member
        var priority: JSON?
        /// A `.value` member and another member (not `.priority`): both together is no node.
        var hasValue = false
        var hasMember = false
        /// Some member is non-empty (not null, or a container holding such a value).
        var nonEmpty = false

        init(key: MemberKey?, role: Role, isArray: Bool, start: Int64, depth: Int, membersFrom: Int) {
            self.key = key
            self.role = role
            self.isArray = isArray
            self.start = start
            self.depth = depth
            self.membersFrom = membersFrom
        }
    }

    private var frames: [Frame] = []
    /// The members the buffered frames finished (elements keyed by index), with their text, as
    /// one stack: each frame's after its parent's (`membersFrom`), none once split (they went
    /// out as parts). One array for all, not one per container (an allocation each).
    private var members: [(key: MemberKey, span: Range<Int64>)] = []
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

    /// Takes one raw event with its span (`JSONEventReader.RawEmit`); `text` holds the document
    /// from `retainedFrom` (or this event) on.
    public mutating func handle(_ event: JSONEventReader.RawEvent, start: Int64, end offset: Int64, text: Text,
                                _ emit: (Part) throws -> Void) throws {
        switch event {
        case .beginObject, .beginArray:
            let isArray: Bool
            if case .beginArray = event { isArray = true } else { isArray = false }
            let (key, role) = try memberKey(offset)
            var depth = targetDepth
            if key != nil, !frames.isEmpty {
                if role == .priority {
                    // A container is never a priority: the same refusal as `Priority(json:)`'s.
                    do { _ = try Priority(json: .array([])) } catch { throw Failure(offset: offset, reason: error.description) }
                }
                // The parent's depth read in place (not a copy of its frame).
                depth = frames[frames.count - 1].depth + (role == .value ? 0 : 1)
            }
            frames.append(Frame(key: key, role: role, isArray: isArray, start: start, depth: depth, membersFrom: members.count))
        case .key(let t):
            let i = frames.count - 1
            let role: Role
            if let s = t.decoded {
                role = s == ".value" ? .value : s == ".priority" ? .priority : .member
                if role == .member {
                    do { try Key.validate(s) } catch { throw Failure(offset: offset, reason: error.description) }
                }
                frames[i].pendingKey = .string(s)
            } else {
                let c = t.content
                role = Self.equals(c, ".value") ? .value : Self.equals(c, ".priority") ? .priority : .member
                if role == .member && !Self.isPlainKey(c) {
                    // The key's own refusal (empty, too long, a forbidden character).
                    do { try Key.validate(t.string()) } catch { throw Failure(offset: offset, reason: error.description) }
                }
                // A split object's member becomes a part: its key is needed at once.
                frames[i].pendingKey = frames[i].split ? .string(t.string()) : .span((start + 1)..<(offset - 1))
            }
            if role == .value {
                frames[i].hasValue = true
            } else if role == .member {
                frames[i].hasMember = true
            }
            if frames[i].hasValue && frames[i].hasMember {
                throw Failure(offset: offset, reason: EmberError.invalidValueKey.description)
            }
            frames[i].pendingRole = role
        case .value(let t):
            if t.contentBytes > Limits.maxStringBytes {
                throw Failure(offset: offset, reason: EmberError.stringTooLong(bytes: t.contentBytes).description)
            }
            guard !frames.isEmpty else { return try emitPart([], start..<offset, offset, emit) }
            let (key, role) = try memberKey(offset)
            if role == .priority {
                let v: JSON
                do { v = try t.json(); _ = try Priority(json: v) } catch { throw Failure(offset: offset, reason: error.description) }
                frames[frames.count - 1].priority = v
            } else {
                try finished(key!, role, start..<offset, nonEmpty: !t.isNull, offset, emit)
            }
        case .endObject, .endArray:
            let f = frames.removeLast()
            let i = frames.count
            // Its members were in its text (or went out as parts): dropped.
            members.removeLast(members.count - f.membersFrom)
            if !f.split {
                // The first buffered frame is a part; a deeper one a member of its parent.
                if i == bufferRoot {
                    try emitPart(path(frames.count) + (f.key.map { [$0.resolved!] } ?? []), f.start..<offset, offset, emit)
                } else {
                    try finished(f.key!, f.role, f.start..<offset, nonEmpty: f.nonEmpty, offset, emit)
                }
            } else {
                bufferRoot = i
                if let p = f.priority {
                    let path = path(frames.count) + (f.key.map { [$0.resolved!] } ?? [])
                    try checkDepth(path, offset)
                    try emit(Part(path: path, kind: .priority(p), end: offset))
                }
            }
        }
        try splitIfLarge(offset, text, emit)
    }

    /// Whether a plain key's content passes `Key.validate` (else it names the fault).
    @inline(__always)
    private static func isPlainKey(_ c: UnsafeBufferPointer<UInt8>) -> Bool {
        guard c.count > 0, c.count <= Limits.maxKeyBytes else { return false }
        for b in c where Key.isForbidden(b) { return false }
        return true
    }

    @inline(__always)
    private static func equals(_ c: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
        c.count == word.utf8CodeUnitCount && c.elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount))
    }

    /// The keys of the first `count` frames (all resolved: split, or the first buffered one).
    private func path(_ count: Int) -> [String] {
        var p: [String] = []
        p.reserveCapacity(count)
        for f in frames[..<count] { if let k = f.key { p.append(k.resolved!) } }
        return p
    }

    /// The key the next member of the innermost frame goes under, and what it makes the member
    /// (nil at the top level).
    private mutating func memberKey(_ offset: Int64) throws -> (MemberKey?, Role) {
        guard !frames.isEmpty else { return (nil, .member) }
        let i = frames.count - 1
        if frames[i].isArray {
            // `Node.validate`: an array with elements puts them one level down.
            if frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            defer { frames[i].nextIndex += 1 }
            return (.index(frames[i].nextIndex), .member)
        }
        guard let k = frames[i].pendingKey else { throw Failure(offset: offset, reason: "a member without its key") }
        frames[i].pendingKey = nil
        return (k, frames[i].pendingRole)
    }

    /// A finished member (not a priority) of the innermost frame: kept while it is buffered,
    /// else a part. A non-empty member below the deepest path is refused as the node refuses it.
    private mutating func finished(_ key: MemberKey, _ role: Role, _ span: Range<Int64>, nonEmpty: Bool, _ offset: Int64,
                                   _ emit: (Part) throws -> Void) throws {
        let i = frames.count - 1
        if nonEmpty {
            if role != .value && frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            frames[i].nonEmpty = true
        }
        if !frames[i].split {
            // The innermost frame's members are the stack's last.
            members.append((key, span))
            return
        }
        let path = path(frames.count)
        try emitPart(role == .value ? path : path + [key.resolved!], span, offset, emit)
    }

    /// Splits the buffered frames whose text passed `maxPartBytes`: their members so far go out
    /// as parts (an object's in key order, a repeated key's last value) and later ones will too.
    private mutating func splitIfLarge(_ offset: Int64, _ text: Text, _ emit: (Part) throws -> Void) throws {
        while bufferRoot < frames.count, offset - frames[bufferRoot].start > maxPartBytes {
            let i = bufferRoot
            let path = path(i + 1)
            // Its members: from its `membersFrom` to the next frame's; the deeper frames' move down.
            let from = frames[i].membersFrom, to = i + 1 < frames.count ? frames[i + 1].membersFrom : self.members.count
            let members = self.members[from..<to].map { (key: $0.key.string(text), span: $0.span) }
            self.members.removeSubrange(from..<to)
            for k in (i + 1)..<frames.count { frames[k].membersFrom -= to - from }
            frames[i].split = true
            // A key already read goes to a part (or the next first buffered frame): read it now.
            if let k = frames[i].pendingKey { frames[i].pendingKey = .string(k.string(text)) }
            bufferRoot = i + 1
            // The next frame is the first buffered one now: its key is read while its bytes are held.
            if bufferRoot < frames.count, let k = frames[bufferRoot].key { frames[bufferRoot].key = .string(k.string(text)) }
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

extension ImportSplitter {
    /// The parts of a document held whole in memory (tests, the fuzzer: small inputs), each as
    /// it completes.
    public static func split(_ bytes: [UInt8], maxPartBytes: Int64, targetDepth: Int, _ each: (Part) throws -> Void) throws {
        var reader = JSONEventReader()
        var splitter = ImportSplitter(maxPartBytes: maxPartBytes, targetDepth: targetDepth)
        try bytes.withUnsafeBufferPointer { all in
            let text = Text(all, base: 0)
            let take: JSONEventReader.RawEmit = { e, start, end in try splitter.handle(e, start: start, end: end, text: text, each) }
            try reader.feed(all, raw: take)
            try reader.finish(raw: take)
        }
    }
}
