/// A document fed in pieces (`feed`, any split) and handed back as the parts an import sends
/// (`ImportSplitter`), each with its text: the document's own bytes, copied out of a window that
/// keeps only what a part still to come may span (the first buffered container's start, or a
/// token the reader has open). Memory: about one part and one piece, whatever the document's
/// size. Pure: `ember import` reads the file and feeds it here.
public struct ImportStream: Sendable {
    /// A part as the import sends it: a value's text, or the priority of an object sent as its
    /// members.
    public struct Part: Sendable, Equatable {
        public enum Payload: Sendable, Equatable { case text([UInt8]), priority(JSON) }
        public var path: [String]
        public var payload: Payload
        /// The document's bytes up to the end of this part.
        public var end: Int64
    }

    private var reader = JSONEventReader()
    private var splitter: ImportSplitter
    /// The document's bytes from `windowStart` on, as far as fed.
    private var window: [UInt8] = []
    private var windowStart: Int64 = 0
    /// The key a document's top level must not hold (the import's own record), if any.
    public let reservedKey: String?

    public init(maxPartBytes: Int64, targetDepth: Int, reservedKey: String? = nil) {
        splitter = ImportSplitter(maxPartBytes: maxPartBytes, targetDepth: targetDepth)
        self.reservedKey = reservedKey
    }

    /// Bytes of the document read so far.
    public var offset: Int64 { reader.offset }
    /// Bytes held now (the window): a part, a piece and one token, and as many again at most
    /// before the bytes no part needs are dropped (`step`).
    public var heldBytes: Int { window.count }

    /// Reads the next piece; the parts it completes, in document order. After a failure
    /// (`JSONEventReader.Failure`, with the document's offset) the stream must not be fed again;
    /// `completed` then holds the parts finished before it.
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, completed: inout [Part]) throws {
        try step(bytes, completed: &completed)
    }

    /// The document ended: its last parts (an error if it is incomplete).
    public mutating func finish(completed: inout [Part]) throws {
        try step(nil, completed: &completed)
    }

    private mutating func step(_ bytes: UnsafeBufferPointer<UInt8>?, completed out: inout [Part]) throws {
        // Worked on as locals, moved out and back (no copy-on-write of the window).
        var splitter = self.splitter, reader = self.reader, window = self.window
        self.window = []
        defer {
            // Only what a part still to come may span stays; the bytes before it go once they
            // are half the window (each byte is moved about once, not once per piece).
            let keep = min(splitter.retainedFrom ?? reader.offset, reader.openTokenStart ?? reader.offset)
            let dead = min(window.count, Int(max(0, keep - windowStart)))
            if dead > 0 && 2 * dead >= window.count {
                window.removeFirst(dead)
                windowStart += Int64(dead)
            }
            self.window = window
            self.splitter = splitter
            self.reader = reader
        }
        let base = windowStart, reserved = reservedKey
        let fresh = window.count
        // Handed out even when the piece fails: the parts finished before the failure.
        var parts: [Part] = []
        defer { out += parts }
        if let bytes { window.append(contentsOf: bytes) }
        try window.withUnsafeBufferPointer { w in
            let text = ImportSplitter.Text(w, base: base)
            // The closures are written inline, not kept in a variable: a kept closure escapes,
            // which boxes the splitter and the parts it captures and checks every access to them
            // at run time (a visible share of the import's CPU).
            if bytes == nil {
                try reader.finish(raw: { e, start, end in
                    try splitter.handle(e, start: start, end: end, text: text) { try Self.collect($0, w, base, reserved, &parts) }
                })
            } else {
                try reader.feed(UnsafeBufferPointer(rebasing: w[fresh...]), raw: { e, start, end in
                    try splitter.handle(e, start: start, end: end, text: text) { try Self.collect($0, w, base, reserved, &parts) }
                })
            }
        }
    }

    /// A part as sent: its text copied out of the window `w` (which starts at `base`).
    private static func collect(_ part: ImportSplitter.Part, _ w: UnsafeBufferPointer<UInt8>, _ base: Int64, _ reserved: String?,
                                _ parts: inout [Part]) throws {
        if let reserved, part.path.first == reserved {
            throw ImportSplitter.Failure(offset: part.end, reason: "the key \(reserved) is reserved for the import's progress record")
        }
        switch part.kind {
        case .value(let span):
            let text = Array(UnsafeBufferPointer(rebasing: w[Int(span.lowerBound - base)..<Int(span.upperBound - base)]))
            parts.append(Part(path: part.path, payload: .text(text), end: part.end))
        case .priority(let p):
            parts.append(Part(path: part.path, payload: .priority(p), end: part.end))
        }
    }
}
