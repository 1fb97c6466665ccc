/// Frame splitting of the Firebase wire protocol (reference §6.2): a message longer than 16384
/// characters is sent as a frame holding the frame count, then that many chunks. Pure.
public enum WireFraming {
    public static let maxFrameCharacters = 16_384

    /// The frames to send for one message.
    public static func split(_ message: String) -> [String] {
        // UTF-8 bytes bound the characters from above: most messages are decided without a copy.
        if message.utf8.count <= maxFrameCharacters { return [message] }
        let chars = Array(message.unicodeScalars)
        guard chars.count > maxFrameCharacters else { return [message] }
        var frames: [String] = []
        var i = 0
        while i < chars.count {
            let end = min(i + maxFrameCharacters, chars.count)
            var s = String.UnicodeScalarView()
            s.append(contentsOf: chars[i..<end])
            frames.append(String(s))
            i = end
        }
        return [String(frames.count)] + frames
    }
}

/// Reassembles inbound frames into messages, with a bound on the size of one message.
public struct WireReassembler: Sendable {
    public enum Output: Equatable, Sendable {
        case message(String)
        /// A keep-alive (`0`) or a count frame: nothing to handle yet.
        case none
    }

    public enum Failure: Error, Equatable, Sendable {
        case tooLarge(limit: Int)
        case badFrameCount
    }

    public let maxMessageBytes: Int
    private var remaining = 0
    private var buffer = ""

    public init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    public mutating func feed(_ frame: String) throws(Failure) -> Output {
        if remaining > 0 {
            guard buffer.utf8.count + frame.utf8.count <= maxMessageBytes else { throw .tooLarge(limit: maxMessageBytes) }
            buffer += frame
            remaining -= 1
            if remaining == 0 {
                defer { buffer = "" }
                return .message(buffer)
            }
            return .none
        }
        // A frame of at most 6 digits is a count (JS: `frame.length <= 6 && !isNaN(frame)`).
        if frame.utf8.count <= 6, !frame.isEmpty, frame.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard let n = Int(frame) else { throw .badFrameCount }
            // Each frame holds at most 16384 characters (≤ 4 bytes each).
            guard n.multipliedReportingOverflow(by: WireFraming.maxFrameCharacters).partialValue <= maxMessageBytes * 4 else {
                throw .tooLarge(limit: maxMessageBytes)
            }
            remaining = n
            return .none  // `0` is the client keep-alive
        }
        guard frame.utf8.count <= maxMessageBytes else { throw .tooLarge(limit: maxMessageBytes) }
        return .message(frame)
    }
}
