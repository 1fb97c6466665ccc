import NIOSSL

/// The certificate clients see on HTTPS/WSS. Separate from the cluster's peer certificate
/// (`--peer-tls-cert`), which is issued by the cluster's private CA for node names, while clients
/// expect a certificate for the public host name.
public struct ClientTLS: Sendable {
    public var certificatePath: String
    public var keyPath: String
    /// `--tls-ca`: clients may present a certificate signed by this CA (one signed by
    /// another CA fails the handshake); clients without one still connect. See `ClientCertificate`.
    public var clientCAPath: String?

    public init(certificatePath: String, keyPath: String, clientCAPath: String? = nil) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.clientCAPath = clientCAPath
    }

    /// Reads the files (at startup, so a bad path stops the node with the reason).
    public func serverConfiguration() throws -> TLSConfiguration {
        let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
        guard !chain.isEmpty else { throw AuthSetupError("no certificate in \(certificatePath)") }
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        if let clientCAPath {
            let roots: [NIOSSLCertificate]
            do { roots = try NIOSSLCertificate.fromPEMFile(clientCAPath) } catch {
                throw AuthSetupError("cannot read the client CA \(clientCAPath): \(error)")
            }
            guard !roots.isEmpty else { throw AuthSetupError("no certificate in \(clientCAPath)") }
            tls.trustRoots = .certificates(roots)
            // Asked for, verified when presented, not required: SDKs and browsers have none.
            tls.certificateVerification = .optionalVerification
        }
        return tls
    }
}
