import EmberCore
import Foundation
import Logging
import NIOCore
import NIOPosix

@testable import EmberNodeStore
@testable import EmberServer

/// A whole node serving HTTP and WebSockets in the test process: a real LMDB store in a temporary
/// directory, `EmberNode.run` bound to port 0 on 127.0.0.1, and the port the server reports once
/// it serves. Protocol tests talk to it over real sockets (`TestWebSocket`, `rawHTTP`) without
/// building or spawning emberd; `stop()` ends it as SIGTERM would, through task cancellation.
final class InProcessNode: Sendable {
    let node: EmberNode
    let port: Int
    let directory: String
    private let serving: Task<Void, any Error>

    private init(node: EmberNode, port: Int, directory: String, serving: Task<Void, any Error>) {
        self.node = node
        self.port = port
        self.directory = directory
        self.serving = serving
    }

    /// Starts a node (`configure` sees its configuration first) and returns once it serves.
    static func start(_ configure: (inout NodeConfiguration) -> Void = { _ in }) async throws -> InProcessNode {
        let (node, dir) = try OperationsTests.makeNode { config in
            config.host = "127.0.0.1"
            config.port = 0
            configure(&config)
        }
        let (ports, reported) = AsyncStream.makeStream(of: Int.self)
        let serving = Task {
            try await node.run { port in reported.yield(port); reported.finish() }
        }
        var it = ports.makeAsyncIterator()
        guard let port = await it.next(), port > 0 else {
            serving.cancel()
            _ = await serving.result
            throw HarnessFailure("the node did not report a port")
        }
        return InProcessNode(node: node, port: port, directory: dir, serving: serving)
    }

    /// Stops serving and closes the store; the data directory is removed.
    func stop() async {
        serving.cancel()
        _ = await serving.result
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `body` against a fresh node, stopped afterwards whatever `body` did.
    static func with<T>(_ configure: (inout NodeConfiguration) -> Void = { _ in }, _ body: (InProcessNode) async throws -> T) async throws -> T {
        let server = try await start(configure)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }
}

struct HarnessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The event loop the harness's clients share (one thread: the tests' clients are few).
let harnessClientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

/// What a client socket receives, as a stream of buffers that ends when the server closes it.
final class ReceivedBytes: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let stream: AsyncStream<ByteBuffer>
    private let continuation: AsyncStream<ByteBuffer>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        continuation.yield(unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }
}

/// Bytes read from a socket, consumed from the front as a test parses them.
struct ByteReader {
    private var iterator: AsyncStream<ByteBuffer>.AsyncIterator
    private var bytes: [UInt8] = []

    init(_ received: ReceivedBytes) { iterator = received.stream.makeAsyncIterator() }

    /// Exactly `count` bytes; nil when the socket closed first.
    mutating func take(_ count: Int) async -> [UInt8]? {
        while bytes.count < count {
            guard let more = await iterator.next() else { return nil }
            bytes += more.readableBytesView
        }
        defer { bytes.removeFirst(count) }
        return Array(bytes[..<count])
    }

    /// Everything up to and including `delimiter`; nil when the socket closed first.
    mutating func take(through delimiter: [UInt8]) async -> [UInt8]? {
        while true {
            if let end = Self.find(delimiter, in: bytes) {
                defer { bytes.removeFirst(end) }
                return Array(bytes[..<end])
            }
            guard let more = await iterator.next() else { return nil }
            bytes += more.readableBytesView
        }
    }

    /// Whatever arrives until the server closes the socket.
    mutating func rest() async -> [UInt8] {
        while let more = await iterator.next() { bytes += more.readableBytesView }
        defer { bytes = [] }
        return bytes
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<i + needle.count].elementsEqual(needle) {
            return i + needle.count
        }
        return nil
    }
}

/// Opens a TCP connection to the node.
func connectTCP(port: Int) async throws -> (any Channel, ReceivedBytes) {
    let received = ReceivedBytes()
    let channel = try await ClientBootstrap(group: harnessClientGroup)
        .channelInitializer { ch in ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(received) } }
        .connect(host: "127.0.0.1", port: port).get()
    return (channel, received)
}

/// One HTTP/1.1 request on its own connection (`Connection: close`); the status and body.
func rawHTTP(port: Int, _ method: String, _ target: String, body: String? = nil, headers: [String: String] = [:]) async throws -> (status: Int, body: String) {
    let (channel, received) = try await connectTCP(port: port)
    var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    for (k, v) in headers { head += "\(k): \(v)\r\n" }
    if let body { head += "Content-Length: \(body.utf8.count)\r\n" }
    head += "\r\n" + (body ?? "")
    try await channel.writeAndFlush(ByteBuffer(string: head)).get()
    var reader = ByteReader(received)
    let text = String(decoding: await reader.rest(), as: UTF8.self)
    try? await channel.close().get()
    guard let statusLine = text.split(separator: "\r\n").first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? ""),
          let split = text.range(of: "\r\n\r\n") else { throw HarnessFailure("not an HTTP response: \(text.prefix(200))") }
    var payload = String(text[split.upperBound...])
    if text[..<split.lowerBound].lowercased().contains("transfer-encoding: chunked") { payload = dechunk(payload) }
    return (status, payload)
}

/// The body of a chunked response.
func dechunk(_ text: String) -> String {
    var out = ""
    var rest = Substring(text)
    while let line = rest.range(of: "\r\n"), let size = Int(rest[..<line.lowerBound], radix: 16), size > 0 {
        let start = line.upperBound
        let bytes = Array(rest[start...].utf8)
        out += String(decoding: bytes[..<size], as: UTF8.self)
        rest = Substring(String(decoding: bytes[(size + 2)...], as: UTF8.self))
    }
    return out
}
