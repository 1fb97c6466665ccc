/// Client side of the wire protocol's framing (reference §6.2): messages longer than 16384
/// characters go out as a count frame plus chunks; inbound count frames are reassembled. Pure.
/// (The server has its own copy in EmberServer; the client must not depend on the server module.)
enum ClientFraming {
    static let maxFrameCharacters = 16_384

    static func split(_ message: String) -> [String] {
        let scalars = Array(message.unicodeScalars)
        guard scalars.count > maxFrameCharacters else { return [message] }
        var frames: [String] = []
        var i = 0
        while i < scalars.count {
            let end = min(i + maxFrameCharacters, scalars.count)
            var s = String.UnicodeScalarView()
            s.append(contentsOf: scalars[i..<end])
            frames.append(String(s))
            i = end
        }
        return [String(frames.count)] + frames
    }
}

/// Reassembles inbound frames into messages.
struct ClientReassembler: Sendable {
    private var remaining = 0
    private var buffer = ""

    /// A complete message, or nil when the frame was a count, a chunk or a keep-alive.
    mutating func feed(_ frame: String) -> String? {
        if remaining > 0 {
            buffer += frame
            remaining -= 1
            guard remaining == 0 else { return nil }
            defer { buffer = "" }
            return buffer
        }
        // JS: a frame of at most 6 characters that is a number is a count.
        if frame.utf8.count <= 6, !frame.isEmpty, frame.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(frame) {
            remaining = n
            return nil
        }
        return frame
    }
}
