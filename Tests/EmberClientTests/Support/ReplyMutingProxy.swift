import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy in front of a node that can stop passing the node's answers while still
/// passing what the client sends: the node applies the client's writes, the client never hears
/// they were acknowledged (a connection that died at the worst moment, made reproducible).
final class ReplyMutingProxy: @unchecked Sendable {
    /// Bytes moved per read (a named bound on what one pump buffers).
    static let chunk = 64 * 1024

    let port: Int
    private let target: Int
    private let listener: Int32
    private let muted = Atomic<Bool>(false)
    private let sockets = Mutex<[Int32]>([])

    init(target: Int) throws {
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw TestFailure("proxy cannot listen") }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// From now on the node's bytes are read and dropped (connections stay open).
    func muteReplies() { muted.store(true, ordering: .sequentiallyConsistent) }

    /// Drops every open connection (clients reconnect through the proxy) and passes answers again.
    func cutAndPass() {
        muted.store(false, ordering: .sequentiallyConsistent)
        for fd in sockets.withLock({ s in defer { s = [] }; return s }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    func close() {
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for fd in sockets.withLock({ s in defer { s = [] }; return s }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    deinit { close() }

    private static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                Glibc.close(client)
                Glibc.close(upstream)
                continue
            }
            sockets.withLock { $0 += [client, upstream] }
            Thread.detachNewThread { [self] in pump(from: client, to: upstream, mutable: false) }
            Thread.detachNewThread { [self] in pump(from: upstream, to: client, mutable: true) }
        }
    }

    private func pump(from: Int32, to: Int32, mutable: Bool) {
        var buffer = [UInt8](repeating: 0, count: Self.chunk)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, Self.chunk, 0) }
            if n <= 0 { break }
            if mutable && muted.load(ordering: .sequentiallyConsistent) { continue }
            var sent = 0
            while sent < n {
                let m = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                if m <= 0 { break }
                sent += m
            }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}
