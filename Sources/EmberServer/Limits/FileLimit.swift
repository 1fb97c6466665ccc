#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The open-file limit emberd runs with. Every WebSocket, SSE stream and REST keep-alive holds a
/// descriptor, so the common soft default (1024) caps a node far below its connection limit
/// (`--max-connections`, 100,000 by default). At start the soft limit is raised to the hard limit,
/// which an unprivileged process may do; the hard limit is the operator's (systemd LimitNOFILE,
/// compose `ulimits`, `ulimit -Hn`).
public enum FileLimit {
    public struct Result: Sendable {
        public var before: UInt64
        public var after: UInt64
        public var hard: UInt64
        /// Why raising failed, if it did (the node still starts with `before`).
        public var error: String?
    }

    /// Raises the soft RLIMIT_NOFILE to the hard limit. Returns nil where the platform has no rlimit.
    public static func raiseToHard() -> Result? {
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #elseif canImport(Darwin)
        let resource = RLIMIT_NOFILE
        #endif
        #if os(Linux) || canImport(Darwin)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        var result = Result(before: UInt64(limit.rlim_cur), after: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
        guard limit.rlim_cur < limit.rlim_max else { return result }
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        #if canImport(Darwin)
        // Darwin refuses a soft limit above OPEN_MAX even when the hard limit is unlimited.
        raised.rlim_cur = min(raised.rlim_cur, rlim_t(OPEN_MAX))
        #endif
        if setrlimit(resource, &raised) == 0 {
            result.after = UInt64(raised.rlim_cur)
        } else {
            result.error = String(cString: strerror(errno))
        }
        return result
        #else
        return nil
        #endif
    }
}
