import EmberCore
import EmberProtocol

/// The client's view of the wire protocol: messages are EmberProtocol's `WireServerMessage` and
/// `WireClientMessage`, shared with emberd; only the request envelope is built here.
enum ClientMessage {
    static func request(_ r: Int64, action: String, body: KeyMap<JSON>) -> String {
        WireClientMessage.request(r: r, action: action, body: body).text
    }

    static let ping = WireClientMessage.ping.text
}
