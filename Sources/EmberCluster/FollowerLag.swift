import EmberRaft

/// One follower's lag as the leader sees it, for `/.ember/status` and `/metrics`.
public struct FollowerLag: Sendable {
    public var entries: UInt64
    public var stalledSeconds: Double

    public init(_ p: PeerProgress, commitIndex: UInt64, tickMillis: Int) {
        entries = p.lag(commitIndex: commitIndex)
        stalledSeconds = Double(p.lagStalledTicks * tickMillis) / 1000
    }
}
