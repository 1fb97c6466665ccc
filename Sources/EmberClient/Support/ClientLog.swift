import Foundation
import Synchronization

/// The client's debug log (`Database.setLoggingEnabled`): off by default, as in the SDK; when on,
/// connection and request traffic goes to standard error, or to `sink` (tests).
enum ClientLog {
    private static let enabledFlag = Atomic<Bool>(false)
    private static let sinkBox = Mutex<(@Sendable (String) -> Void)?>(nil)

    static var enabled: Bool {
        get { enabledFlag.load(ordering: .relaxed) }
        set { enabledFlag.store(newValue, ordering: .relaxed) }
    }

    /// Receives log lines instead of standard error (nil: standard error).
    static var sink: (@Sendable (String) -> Void)? {
        get { sinkBox.withLock { $0 } }
        set { sinkBox.withLock { $0 = newValue } }
    }

    /// A debug line, built only when logging is on.
    static func log(_ message: @autoclosure () -> String) {
        guard enabled else { return }
        write("[EmberClient] " + message())
    }

    /// A problem the app should know of: always written.
    static func warn(_ message: String) { write("[EmberClient] warning: " + message) }

    private static func write(_ line: String) {
        if let sink { return sink(line) }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

extension Database {
    /// Turns the client's debug log on or off (SDK `Database.setLoggingEnabled`): connections,
    /// requests and replies are written to standard error.
    public static func setLoggingEnabled(_ enabled: Bool) { ClientLog.enabled = enabled }
}
