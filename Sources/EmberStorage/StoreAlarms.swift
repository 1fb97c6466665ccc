import Foundation
import Synchronization

/// A node's alarms (etcd's NOSPACE and CORRUPT): conditions under which the node refuses part of
/// its service rather than fail halfway or serve wrong data.
///
/// - `noSpace`: the data file's map or its filesystem has less room than `SpaceGuard.reserve`
///   (or a commit failed for lack of room). Client writes get 507; reads and listeners go on.
///   Cleared by the guard's next measurement that finds room again.
/// - `corrupt`: this member's state hash disagrees with the cluster's at the same applied index.
///   The node refuses every client request (its data may be wrong). Kept in a file in the data
///   directory (`markerFile`) so a restart does not serve the data again; the repair (wipe the
///   directory, resync from the cluster) removes it with the rest.
public final class StoreAlarms: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case noSpace = "NOSPACE"
        case corrupt = "CORRUPT"
    }

    public struct Alarm: Sendable, Equatable {
        public var kind: Kind
        public var message: String
        /// Wall-clock milliseconds when it was raised (for people; nothing orders by it).
        public var since: Int64
    }

    /// The CORRUPT alarm's marker in the data directory (its text is the alarm's message).
    public static let markerFile = "ALARM-CORRUPT"
    /// Longest message kept (a message is built from hashes and node ids; bounded anyway).
    static let maxMessageBytes = 1_024

    private let directory: String?
    private let state = Mutex<[Kind: Alarm]>([:])
    /// Called (outside the lock) when an alarm is raised or cleared: logging, dropping listeners.
    private let observers = Mutex<[@Sendable (Kind, Alarm?) -> Void]>([])

    /// `directory`: where the CORRUPT marker lives (nil: not persisted, for tests' stores).
    init(directory: String?) {
        self.directory = directory
        if let directory, let text = try? String(contentsOfFile: directory + "/" + Self.markerFile, encoding: .utf8) {
            let since = (try? FileManager.default.attributesOfItem(atPath: directory + "/" + Self.markerFile)[.modificationDate] as? Date)
                .map { Int64($0.timeIntervalSince1970 * 1000) } ?? 0
            state.withLock { $0[.corrupt] = Alarm(kind: .corrupt, message: text, since: since) }
        }
    }

    public func active(_ kind: Kind) -> Alarm? { state.withLock { $0[kind] } }

    /// Every raised alarm, NOSPACE first.
    public var all: [Alarm] {
        let s = state.withLock { $0 }
        return Kind.allCases.compactMap { s[$0] }
    }

    /// `observer(kind, alarm)`: `alarm` is the raised alarm, or nil when `kind` was cleared.
    public func observe(_ observer: @escaping @Sendable (Kind, Alarm?) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Raises `kind` unless it is raised already (the first message stays). Returns whether it was new.
    @discardableResult
    public func raise(_ kind: Kind, _ message: String) -> Bool {
        let text = String(message.utf8.prefix(Self.maxMessageBytes)) ?? "alarm"
        let alarm = Alarm(kind: kind, message: text, since: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
        let new = state.withLock { s -> Bool in
            if s[kind] != nil { return false }
            s[kind] = alarm
            return true
        }
        guard new else { return false }
        if kind == .corrupt, let directory {
            // Durable before anyone is told: a crash right after must not serve the data again.
            let path = directory + "/" + Self.markerFile
            FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
            for p in [path, directory] {
                let fd = open(p, O_RDONLY)
                if fd >= 0 { fsync(fd); close(fd) }
            }
        }
        for o in observers.withLock({ $0 }) { o(kind, alarm) }
        return true
    }

    /// Clears `kind`. CORRUPT is cleared only by the repair (a wiped directory starts without
    /// the marker) or by tests; NOSPACE by the space guard.
    public func clear(_ kind: Kind) {
        let was = state.withLock { $0.removeValue(forKey: kind) }
        guard was != nil else { return }
        if kind == .corrupt, let directory { try? FileManager.default.removeItem(atPath: directory + "/" + Self.markerFile) }
        for o in observers.withLock({ $0 }) { o(kind, nil) }
    }
}
