import Foundation

/// Placeholders the server replaces when it applies a write (reference §1.6). Local events use
/// an estimate (offset-corrected clock, or the locally known value plus the delta).
public enum ServerValue {
    /// The server's time in milliseconds since the epoch.
    public static func timestamp() -> [String: Any] { [".sv": "timestamp"] }

    /// Adds `delta` atomically to the stored number (a missing or non-numeric value counts as 0).
    public static func increment(_ delta: Int) -> [String: Any] { [".sv": ["increment": delta]] }
    public static func increment(_ delta: Double) -> [String: Any] { [".sv": ["increment": delta]] }
    public static func increment(_ delta: NSNumber) -> [String: Any] { [".sv": ["increment": delta]] }
}
