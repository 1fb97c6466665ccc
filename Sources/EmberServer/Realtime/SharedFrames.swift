import EmberCore
import EmberProtocol

/// Frames of one committed change, built once per listened location and shared by every
/// untagged listen on it (encode once, send many). An untagged listen's pushes depend only on
/// the change and the listen's path, so listens on the same path get the same frames
/// byte for byte. Lives for one `RealtimeHub.publish` call on the publishing thread: no lock.
final class SharedFrames {
    let change: CommittedChange
    private var byPath: [Path: [String]] = [:]

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
}
