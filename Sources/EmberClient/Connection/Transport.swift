import Foundation
import HummingbirdWSClient
import Logging

/// What a transport reports about one socket.
enum TransportEvent: Sendable {
    case message(String)
    /// The socket closed or could not be opened.
    case closed
}

/// One open (or opening) socket. `send` never blocks; frames go out in call order.
protocol TransportConnection: Sendable {
    func send(_ text: String)
    func close()
}

/// Opens sockets. A protocol so the connection logic can be tested without a network.
protocol WireTransport: Sendable {
    func open(url: String, onEvent: @escaping @Sendable (TransportEvent) -> Void) -> any TransportConnection
}

/// WebSocket transport over HummingbirdWSClient (Foundation's WebSocket task is missing on Linux).
struct WebSocketTransport: WireTransport {
    func open(url: String, onEvent: @escaping @Sendable (TransportEvent) -> Void) -> any TransportConnection {
        let (outgoing, continuation) = AsyncStream<String>.makeStream()
        let task = Task {
            var logger = Logger(label: "ember.client.ws")
            logger.logLevel = .critical
            // Frames are up to 16384 characters, i.e. up to 64 KiB of UTF-8.
            let config = WebSocketClientConfiguration(maxFrameSize: 1 << 20)
            _ = try? await WebSocketClient.connect(url: url, configuration: config, logger: logger) { inbound, outbound, _ in
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await frame in outgoing {
                            do { try await outbound.write(.text(frame)) } catch { break }
                        }
                        try? await outbound.close(.normalClosure, reason: nil)
                    }
                    do {
                        for try await message in inbound.messages(maxSize: 64 << 20) {
                            if case .text(let text) = message { onEvent(.message(text)) }
                        }
                    } catch {}
                    continuation.finish()
                    group.cancelAll()
                }
            }
            onEvent(.closed)
        }
        return WebSocketConnection(continuation: continuation, task: task)
    }
}

private struct WebSocketConnection: TransportConnection {
    let continuation: AsyncStream<String>.Continuation
    let task: Task<Void, Never>

    func send(_ text: String) { continuation.yield(text) }

    func close() {
        continuation.finish()
        // The close handshake may stall on a dead peer; cancelling ends the connect call.
        let task = task
        Task {
            try? await Task.sleep(for: .seconds(2))
            task.cancel()
        }
    }
}
