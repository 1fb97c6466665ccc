import EmberCore

/// Where one message of a connection with pipelined writes goes, in arrival order (the rule that
/// a read waits for the writes before it). Writes (`p`/`m`) go to the store as they are read, with
/// no wait per write, their answers kept in request order by `WireAckQueue`; any other request
/// first waits until every write before it is answered, so it sees their effects and its answer
/// follows theirs. A message that is not a request (a keep-alive, one that does not parse) waits
/// for nothing.
public struct WireRequestRoute: Sendable {
    public enum Handling: Sendable {
        /// To `WireServerSession.receive` at once.
        case now
        /// A write to pipeline. When the front's checks refuse it, or it cannot be pipelined
        /// (a priority-only set), it is handled as `afterWrites` instead: its answer, too, must
        /// follow the writes before it.
        case pipelined(action: String, body: KeyMap<JSON>)
        /// Wait until the writes queued before it are answered, then `receive`.
        case afterWrites
    }

    /// The request's `r` when the message is a request: the budgets (`WireRequestBudget`, the
    /// address's) apply to it before anything else, and a refused one is answered at once.
    public let request: Int64?
    public let handling: Handling

    /// `pipelined`: the connection pipelines writes; without, every request is handled in turn
    /// and its write awaited before the next.
    public init(_ parsed: Result<WireClientMessage, WireClientMessage.ParseError>, pipelined: Bool) {
        guard case .success(.request(let r, let action, let body)) = parsed else {
            request = nil
            handling = .now
            return
        }
        request = r
        if !pipelined {
            handling = .now
        } else if Self.isWrite(action) {
            handling = .pipelined(action: action, body: body)
        } else {
            handling = .afterWrites
        }
    }

    /// `p` and `m` are writes: they may be pipelined; every other request waits for them.
    public static func isWrite(_ action: String) -> Bool {
        action == "p" || action == "m"
    }
}
