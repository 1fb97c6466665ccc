/// A client's HTTP/1.1 upgrade to a WebSocket (RFC 6455 §4.1), for Ember's own test and load
/// clients that open the socket themselves.
public enum WebSocketUpgrade {
    /// The request for `target` (e.g. `/.ws?v=5&ns=ns`) on `host`. The key is fixed: these clients
    /// do not check the accept hash (the 101 status is enough for them).
    public static func request(host: String, target: String) -> String {
        "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    }

    /// Whether the response head (through its blank line) switches protocols.
    public static func accepted(_ head: String) -> Bool { head.hasPrefix("HTTP/1.1 101") }
}
