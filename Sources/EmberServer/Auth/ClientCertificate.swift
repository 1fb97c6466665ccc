import NIOCore
import NIOSSL

/// Admin by client certificate (`--tls-ca`). The handshake verified the certificate
/// against that CA (an unverifiable one never gets this far); the name `admin` as CN or SAN DNS
/// (what `ember certs init` issues in `admin.pem`) makes the connection admin. Node ids cannot be
/// `admin`, so a node certificate of the same CA is not admin.
public enum ClientCertificate {
    public static let adminName = "admin"

    /// The identity of a connection when its request carries no token: `.admin` for a verified
    /// admin certificate, else anonymous. Reads the certificate on the channel's event loop.
    public static func baseIdentity(of channel: (any Channel)?, config: NodeConfiguration) async -> Identity {
        guard config.clientTLS?.clientCAPath != nil, let channel,
              let certificate = try? await channel.nioSSL_peerCertificate().get(),
              let names = try? PeerTLS.names(of: certificate) else { return .anonymous }
        return names.contains(adminName) ? .admin : .anonymous
    }
}
