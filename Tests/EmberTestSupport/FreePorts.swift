#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ports nothing listens on, for the test suites that start servers and clusters.
///
/// Each port comes from binding port 0 on 127.0.0.1 and reading what the kernel chose. Every
/// probe socket stays open until all `count` ports are chosen: closing one at once lets the
/// kernel hand the same port to the next probe, and two nodes of one cluster then race for it
/// (the cause of a "no leader elected" flake in the integration suite, fixed the same way).
public enum FreePorts {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// `count` distinct free ports on 127.0.0.1.
    public static func pick(_ count: Int) throws -> [Int] {
        precondition(count > 0 && count <= 64, "pick 1...64 ports at a time")
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        var ports: [Int] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket failed: errno \(errno)") }
            fds.append(fd)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = 0
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ok = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
            }
            guard ok else { throw Failure(description: "bind/getsockname failed: errno \(errno)") }
            ports.append(Int(UInt16(bigEndian: addr.sin_port)))
        }
        assert(Set(ports).count == count, "the kernel gave one port to two open sockets")
        return ports
    }

    /// One free port on 127.0.0.1.
    public static func one() throws -> Int { try pick(1)[0] }
}
