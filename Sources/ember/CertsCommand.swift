import ArgumentParser
import Crypto
import Foundation
import SwiftASN1
import X509

/// `ember certs init|add-node`: the cluster's certificates, made here (swift-certificates and
/// swift-crypto; no openssl). P-256 ECDSA keys throughout.
///
/// Files in DIR: `ca.pem` / `ca.key` (the cluster CA), `<id>.pem` / `<id>.key` per node (CN and
/// SAN DNS = the node id, plus `localhost`, 127.0.0.1 and any --hosts; usable as TLS server and
/// client, so the same pair serves the peer channel's mutual TLS — emberd's `--peer-tls-cert`,
/// `--peer-tls-key`, `--peer-tls-ca` — and can serve an HTTPS client port — `--tls-cert`, `--tls-key`) and
/// `admin.pem` / `admin.key` (client-only certificate, CN `admin`) and `admin.token` (a random
/// admin bearer token for the nodes' `--admin-token-file` and the CLI's `--token-file`: giving the
/// nodes a token puts them in verified mode, so a networked cluster never runs unauthenticated).
/// Keys and the token are written mode 0600.
struct CertsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "certs", abstract: "Make cluster certificates.", subcommands: [Init.self, AddNode.self])

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a cluster CA, one certificate per node and an admin client certificate.",
            discussion: """
                Each node then runs with --peer-tls-cert DIR/<id>.pem --peer-tls-key DIR/<id>.key \
                --peer-tls-ca DIR/ca.pem (the peer channel's mutual TLS). The same pair can serve \
                HTTPS/WSS to clients with --tls-cert/--tls-key (add the clients' names with --hosts), \
                and --tls-ca DIR/ca.pem makes admin.pem an admin client certificate.
                """)
        @OptionGroup var output: OutputOptions
        @Option(help: "Directory to write to (created if missing).") var out: String
        @Option(help: "Node ids, comma-separated (e.g. n1,n2,n3); none: only the CA and the admin certificate.") var nodes = ""
        @Option(help: "Extra names for the node certificates, comma-separated: NAME (every node) or ID=NAME (one node); IP addresses become IP SANs.")
        var hosts: String?
        @Option(help: "Validity in days.") var days = 825
        @Option(help: "Common name of the CA.") var caName = "ember-cluster-ca"
        @Flag(help: "Replace an existing CA in --out.") var force = false
        @Flag(help: "Do nothing (exit 0) when --out already holds a CA: for one-shot container jobs re-run on every start.")
        var ifMissing = false

        func run() async throws {
            try await runCLI {
                let ids = nodes.isEmpty ? [] : try CertMaker.parseIDs(nodes)
                let extra = try CertMaker.parseHosts(hosts, ids: ids)
                guard days > 0 && days <= 36_500 else { throw CLIError("--days must be 1...36500") }
                let caKeyPath = (out as NSString).appendingPathComponent("ca.key")
                if FileManager.default.fileExists(atPath: caKeyPath) && ifMissing && !force {
                    emit(output.json ? #"{"dir":"\#(out)","files":[]}"# : "\(out) already holds a CA; nothing written")
                    return
                }
                if FileManager.default.fileExists(atPath: caKeyPath) && !force {
                    throw CLIError("\(caKeyPath) exists; use --force to make a new CA (every node certificate must then be replaced)")
                }
                try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
                let ca = try CertMaker.makeCA(name: caName, days: days)
                var written = try CertMaker.write(ca.certificate, ca.key, dir: out, name: "ca")
                for id in ids {
                    let issued = try CertMaker.issue(by: ca, commonName: id, dnsNames: [id, "localhost"] + extra[id, default: []],
                                                     server: true, days: days)
                    written += try CertMaker.write(issued.certificate, issued.key, dir: out, name: id)
                }
                let admin = try CertMaker.issue(by: ca, commonName: "admin", dnsNames: [], server: false, days: days)
                written += try CertMaker.write(admin.certificate, admin.key, dir: out, name: "admin")
                written.append(try CertMaker.writeAdminToken(dir: out))
                if output.json {
                    emit(#"{"dir":"\#(out)","files":[\#(written.map { "\"\($0)\"" }.joined(separator: ","))]}"#)
                } else {
                    emit("wrote \(written.count) files to \(out): \(written.joined(separator: " "))")
                    if let id = ids.first { emit(Self.usage(dir: out, id: id)) }
                }
            }
        }

        /// Which emberd flags take which file (people otherwise guess at the two TLS pairs).
        static func usage(dir: String, id: String, caDir: String? = nil) -> String {
            let ca = ((caDir ?? dir) as NSString).appendingPathComponent("ca.pem")
            let pem = (dir as NSString).appendingPathComponent("\(id).pem"), key = (dir as NSString).appendingPathComponent("\(id).key")
            return """
                peers (mutual TLS): emberd --node-id \(id) --peer-tls-cert \(pem) --peer-tls-key \(key) --peer-tls-ca \(ca) ...
                HTTPS/WSS clients (optional): --tls-cert \(pem) --tls-key \(key) [--tls-ca \(ca): admin.pem is admin]
                """
        }
    }

    struct AddNode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add-node", abstract: "Issue a certificate for one more node (or replace one) with the CA in --dir.")
        @OptionGroup var output: OutputOptions
        @Option(help: "Directory holding ca.pem and ca.key.") var dir: String
        @Option(help: "Directory for the node's files (default: --dir).") var out: String?
        @Argument(help: "Node id.") var id: String
        @Option(help: "Extra names, comma-separated (as in certs init, without ID=).") var hosts: String?
        @Option(help: "Validity in days.") var days = 825

        func run() async throws {
            try await runCLI {
                _ = try CertMaker.parseIDs(id)
                let ca = try CertMaker.loadCA(dir: dir)
                let extra = try CertMaker.parseHosts(hosts, ids: [id])[id, default: []]
                let issued = try CertMaker.issue(by: ca, commonName: id, dnsNames: [id, "localhost"] + extra, server: true, days: days)
                let target = out ?? dir
                try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                let written = try CertMaker.write(issued.certificate, issued.key, dir: target, name: id)
                if output.json {
                    emit(#"{"dir":"\#(target)","files":["\#(written[0])","\#(written[1])"]}"#)
                } else {
                    emit("wrote \(written.joined(separator: " ")) to \(target)")
                    emit(Init.usage(dir: target, id: id, caDir: dir))
                }
            }
        }
    }
}

enum CertMaker {
    struct Issued {
        var certificate: Certificate
        var key: P256.Signing.PrivateKey
    }

    static func parseIDs(_ text: String) throws -> [String] {
        let ids = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !ids.isEmpty else { throw CLIError("no node ids given") }
        for id in ids {
            // Node ids double as certificate DNS names (see ClusterConfiguration.isValidNodeID).
            guard id.utf8.count <= 63, id.unicodeScalars.allSatisfy({ ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "-" || $0 == "." }) else {
                throw CLIError("invalid node id '\(id)': letters, digits, '-' and '.', at most 63 bytes")
            }
            guard id != "admin" && id != "localhost" else { throw CLIError("'\(id)' is reserved") }
        }
        guard Set(ids).count == ids.count else { throw CLIError("a node id is listed twice") }
        return ids
    }

    /// `NAME` applies to every node, `ID=NAME` to one.
    static func parseHosts(_ text: String?, ids: [String]) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for item in (text ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 {
                guard ids.contains(parts[0]) else { throw CLIError("--hosts names unknown node \(parts[0])") }
                out[parts[0], default: []].append(parts[1])
            } else {
                for id in ids { out[id, default: []].append(item) }
            }
        }
        // A name that is another member's id would let this certificate speak for that node.
        for (id, names) in out {
            if let clash = names.first(where: { $0 != id && ids.contains($0) }) {
                throw CLIError("--hosts gives \(id) the name \(clash), another node's id")
            }
        }
        return out
    }

    static func name(_ cn: String) throws -> DistinguishedName {
        try DistinguishedName { CommonName(cn); OrganizationName("Ember") }
    }

    /// Certificates are valid from a day before they are issued: a node whose wall clock is
    /// behind the issuer's (by up to a day) still accepts its peers' fresh certificates, where
    /// a few minutes' margin stopped a node an hour behind from joining its cluster at all.
    static let backdateSeconds: Double = 86_400

    static func makeCA(name cn: String, days: Int) throws -> Issued {
        let key = P256.Signing.PrivateKey()
        let pub = Certificate.PublicKey(key.publicKey)
        let subject = try name(cn)
        let now = Date()
        let cert = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: pub,
            notValidBefore: now.addingTimeInterval(-Self.backdateSeconds), notValidAfter: now.addingTimeInterval(Double(days) * 86_400),
            issuer: subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: pub)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
        return Issued(certificate: cert, key: key)
    }

    static func issue(by ca: Issued, commonName: String, dnsNames: [String], server: Bool, days: Int) throws -> Issued {
        let key = P256.Signing.PrivateKey()
        let pub = Certificate.PublicKey(key.publicKey)
        var sans: [GeneralName] = []
        var seen = Set<String>()
        for n in dnsNames where seen.insert(n).inserted {
            if let ip = ipBytes(n) { sans.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(ip)))) } else { sans.append(.dnsName(n)) }
        }
        if server && !seen.contains("127.0.0.1") { sans.append(.ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))) }
        let caSKI = try ca.certificate.extensions.subjectKeyIdentifier?.keyIdentifier
        let now = Date()
        let cert = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: pub,
            notValidBefore: now.addingTimeInterval(-Self.backdateSeconds), notValidAfter: now.addingTimeInterval(Double(days) * 86_400),
            issuer: ca.certificate.subject, subject: try name(commonName), signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyAgreement: true))
                try ExtendedKeyUsage(server ? [.serverAuth, .clientAuth] : [.clientAuth])
                SubjectKeyIdentifier(hash: pub)
                if let caSKI { AuthorityKeyIdentifier(keyIdentifier: caSKI) }
                if !sans.isEmpty { SubjectAlternativeNames(sans) }
            },
            issuerPrivateKey: Certificate.PrivateKey(ca.key))
        return Issued(certificate: cert, key: key)
    }

    /// IPv4 dotted quads and IPv6 text as SAN bytes; nil for DNS names.
    static func ipBytes(_ s: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, s, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, s, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func loadCA(dir: String) throws -> Issued {
        let certPath = (dir as NSString).appendingPathComponent("ca.pem")
        let keyPath = (dir as NSString).appendingPathComponent("ca.key")
        guard let certText = try? String(contentsOfFile: certPath, encoding: .utf8),
              let keyText = try? String(contentsOfFile: keyPath, encoding: .utf8) else {
            throw CLIError("cannot read \(certPath) and \(keyPath)")
        }
        do {
            return Issued(certificate: try Certificate(pemEncoded: certText), key: try P256.Signing.PrivateKey(pemRepresentation: keyText))
        } catch {
            throw CLIError("cannot load the CA in \(dir): \(error)")
        }
    }

    /// Bytes of randomness in an admin token (hex-encoded: 64 characters).
    static let adminTokenBytes = 32

    /// Writes `admin.token` (0600): a fresh random token; returns its file name.
    static func writeAdminToken(dir: String) throws -> String {
        var rng = SystemRandomNumberGenerator()
        let token = (0..<adminTokenBytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
        let path = (dir as NSString).appendingPathComponent("admin.token")
        _ = FileManager.default.createFile(atPath: path + ".tmp", contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600])
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: path + ".tmp", toPath: path)
        return "admin.token"
    }

    /// Writes `<name>.pem` and `<name>.key` (0600); returns their file names.
    static func write(_ cert: Certificate, _ key: P256.Signing.PrivateKey, dir: String, name: String) throws -> [String] {
        let pem = try cert.serializeAsPEM().pemString + "\n"
        let keyPEM = key.pemRepresentation + "\n"
        let certPath = (dir as NSString).appendingPathComponent("\(name).pem")
        let keyPath = (dir as NSString).appendingPathComponent("\(name).key")
        try Data(pem.utf8).write(to: URL(fileURLWithPath: certPath), options: .atomic)
        _ = FileManager.default.createFile(atPath: keyPath + ".tmp", contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600])
        _ = try? FileManager.default.removeItem(atPath: keyPath)
        try FileManager.default.moveItem(atPath: keyPath + ".tmp", toPath: keyPath)
        return ["\(name).pem", "\(name).key"]
    }
}
