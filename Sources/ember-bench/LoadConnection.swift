import NIOCore

/// When a load connection measures: requests sent from `measureFrom` and answered by `end`
/// count (the warm-up before is not measured); none is sent after `end`.
struct LoadTiming: Sendable {
    let measureFrom: NIODeadline
    let end: NIODeadline
}

/// What one load connection (wire protocol or raw HTTP) saw over a run.
struct LoadOutcome: Sendable {
    var latencies: [Double] = []  // ms
    var errors = 0
    var ok = 0
    /// Times the connection was opened again after a failure (raw HTTP only).
    var reconnects = 0
    /// The first refused answer's text (status and start of the body, or the transport error),
    /// so a run's errors say what they were.
    var firstError: String?
}
