import NIOSSL

/// The certificate clients see on HTTPS/WSS. Separate from the cluster's peer certificate
/// (`--tls-cert`), which is issued by the cluster's private CA for node names, while clients
/// expect a certificate for the public host name.
public struct ClientTLS: Sendable {
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }

    /// Reads the files (at startup, so a bad path stops the node with the reason).
    public func serverConfiguration() throws -> TLSConfiguration {
        let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
        guard !chain.isEmpty else { throw AuthSetupError("no certificate in \(certificatePath)") }
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        return tls
    }
}
