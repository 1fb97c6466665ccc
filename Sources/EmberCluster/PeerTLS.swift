import EmberNodeStore
import EmberRaft
import NIOSSL
import X509

/// Mutual TLS 1.3 for the peer channel.
///
/// Both sides present a certificate signed by the cluster CA (chain verification is BoringSSL's).
/// Hostname verification is off because peers dial each other by IP and NIOSSL would accept a
/// certificate when ANY of its IP SANs matches, which says nothing about WHICH node it is. So
/// after the handshake we read the peer certificate's names ourselves: a node is who its CN or
/// one of its SAN DNS names says, and it must be a cluster member (and, when dialling, the member
/// we meant to reach).
public struct PeerTLS: Sendable {
    public let serverContext: NIOSSLContext
    public let clientContext: NIOSSLContext

    /// The peer protocol level this build speaks beyond the first, offered by ALPN on every peer
    /// connection. Builds before it offered none and ignore the offer (their handshake carries
    /// no ALPN answer), so a dialer learns whether the node it reached decodes the later
    /// messages (`Message.Payload.leaderDurable`); a node of the previous build would close the
    /// link on a message kind it does not know.
    public static let protocolLevel2 = "ember-peer/2"
    /// Level 3 (0.5.1 on): the corruption check's `HashCheck` frames, including their request
    /// form (an empty hash). 0.4.0 does not know the frame kind; 0.5.0 knows it but answers only
    /// the asker and at its own applied index, so members of either are not sent it.
    public static let protocolLevel3 = "ember-peer/3"
    /// Level 4 (the release after 0.6.0): no new frame; the member reads the log entry kinds of
    /// this build (`TriggerOperation.advance`), so the leader logs them only once every member
    /// (voters and learners) accepted it, and 0.6.0's form (`settle`) until then.
    public static let protocolLevel4 = "ember-peer/4"
    /// Level 5 (the release after 0.7.0): no new frame; the member reads the `updateText` log entry (a bulk
    /// update's parts as their JSON text, issue 42), logged only once every member accepted it.
    public static let protocolLevel5 = "ember-peer/5"
    /// What this build offers, most preferred first (ALPN picks the first both sides list).
    public static let offered = [protocolLevel5, protocolLevel4, protocolLevel3, protocolLevel2]

    /// The level an ALPN answer stands for (none: level 1, a build that offers nothing).
    public static func level(negotiated: String?) -> Int {
        switch negotiated {
        case protocolLevel5: return 5
        case protocolLevel4: return 4
        case protocolLevel3: return 3
        case protocolLevel2: return 2
        default: return 1
        }
    }

    /// `applicationProtocols`: what this node offers and accepts by ALPN (tests pass `[]` to
    /// stand for a node of the previous build).
    public init(certificatePath: String, keyPath: String, caPath: String,
                applicationProtocols: [String] = PeerTLS.offered) throws {
        let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        let roots = try NIOSSLCertificate.fromPEMFile(caPath)
        guard !chain.isEmpty, !roots.isEmpty else { throw ClusterConfigError("empty certificate or CA file") }

        var server = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        server.minimumTLSVersion = .tlsv13
        server.certificateVerification = .noHostnameVerification  // requires a client certificate
        server.trustRoots = .certificates(roots)
        server.applicationProtocols = applicationProtocols

        var client = TLSConfiguration.makeClientConfiguration()
        client.minimumTLSVersion = .tlsv13
        client.certificateVerification = .noHostnameVerification
        client.trustRoots = .certificates(roots)
        client.certificateChain = chain
        client.privateKey = .privateKey(key)
        client.applicationProtocols = applicationProtocols

        serverContext = try NIOSSLContext(configuration: server)
        clientContext = try NIOSSLContext(configuration: client)
    }

    /// The names a certificate claims: its subject CNs and SAN DNS names.
    public static func names(of certificate: NIOSSLCertificate) throws -> [String] {
        let cert = try Certificate(derEncoded: try certificate.toDERBytes())
        var names: [String] = []
        for rdn in cert.subject {
            for attribute in rdn where attribute.type == .RDNAttributeType.commonName {
                if let s = String(attribute.value) { names.append(s) }
            }
        }
        if let san = try cert.extensions.subjectAlternativeNames {
            for name in san {
                if case .dnsName(let dns) = name { names.append(dns) }
            }
        }
        return names
    }

    /// The member a verified certificate identifies, or nil. With `expected`, only that member.
    public static func identify(_ names: [String], members: Set<NodeID>, expected: NodeID?) -> NodeID? {
        if let expected { return names.contains(expected) && members.contains(expected) ? expected : nil }
        let matches = Set(names).intersection(members)
        // A certificate naming two members would let one node speak for another: refuse it.
        return matches.count == 1 ? matches.first : nil
    }
}
