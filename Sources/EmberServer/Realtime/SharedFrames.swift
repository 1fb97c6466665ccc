import EmberCore
import EmberProtocol
import NIOCore

/// Frames of one committed change, built once per listened location and shared by every
/// untagged listen on it (encode once, send many). An untagged listen's pushes depend only on
/// the change and the listen's path, so listens on the same path get the same frames
/// byte for byte. Lives for one `RealtimeHub.publish` call on the publishing thread: no lock
/// (`@unchecked Sendable`: it is only passed into the sessions' locks on that same thread).
final class SharedFrames: @unchecked Sendable {
    let change: CommittedChange
    private var byPath: [Path: [String]] = [:]
    private var encodedByPath: [Path: ByteBuffer] = [:]

    init(change: CommittedChange) {
        self.change = change
    }

    /// The frames an untagged listen at `path` sends for the change, built on first use.
    func untagged(at path: Path) -> [String] {
        if let known = byPath[path] { return known }
        let frames = WireListen.untaggedMessages(for: change, at: path).flatMap { WireFraming.split($0.serialized()) }
        byPath[path] = frames
        return frames
    }

    /// The same frames as WebSocket frames (header and payload, unmasked as a server's are), in
    /// one buffer that every connection listening at `path` writes as is: the buffer is
    /// reference-counted, so a fan-out to N connections makes no copy per connection.
    func encoded(at path: Path) -> ByteBuffer {
        if let known = encodedByPath[path] { return known }
        let frames = untagged(at: path)
        var buffer = Self.allocator.buffer(capacity: frames.reduce(0) { $0 + WireOutbound.frameSize(payload: $1.utf8.count) })
        for f in frames { ConnectionOutbox.appendTextFrame(f, to: &buffer) }
        encodedByPath[path] = buffer
        return buffer
    }

    private static let allocator = ByteBufferAllocator()
}

/// One listened location's share of a `SharedFrames`: the publish visits the listens of a
/// location together, so their frames are looked up once for all of them, not per listen.
/// Confined to the publishing thread like `SharedFrames`.
final class SharedPathFrames: @unchecked Sendable {
    let shared: SharedFrames
    let path: Path
    private var frames: [String]?
    private var buffer: ByteBuffer?
    /// The encoded buffer once per event loop: the connections of one loop share one copy, so
    /// the loops do not contend for one buffer's reference count (each write retains and
    /// releases it several times inside NIO).
    private var perLoop: [(loop: any EventLoop, buffer: ByteBuffer)] = []

    init(_ shared: SharedFrames, path: Path) {
        self.shared = shared
        self.path = path
    }

    var change: CommittedChange { shared.change }

    var untagged: [String] {
        if let frames { return frames }
        let f = shared.untagged(at: path)
        frames = f
        return f
    }

    var encoded: ByteBuffer {
        if let buffer { return buffer }
        let b = shared.encoded(at: path)
        buffer = b
        return b
    }

    /// `encoded`, as the copy for the connections of `loop`.
    func encoded(for loop: any EventLoop) -> ByteBuffer {
        for e in perLoop where e.loop === loop { return e.buffer }
        var copy = encoded
        if !perLoop.isEmpty {
            // A second loop: its own storage (one copy per loop, not per connection).
            copy = ByteBufferAllocator().buffer(capacity: copy.readableBytes)
            copy.writeImmutableBuffer(encoded)
        }
        perLoop.append((loop, copy))
        return copy
    }
}
