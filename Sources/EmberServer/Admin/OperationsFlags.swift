import Foundation
import NIOSSL

/// Parsing and dry-run checks for emberd's operations flags.
public enum OperationsFlags {
    /// `--client-urls n1=http://a:9001,n2=http://b:9001`.
    public static func parseClientURLs(_ text: String?) throws -> [String: String] {
        guard let text else { return [:] }
        var out: [String: String] = [:]
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, isValidClientURL(id: parts[0], url: parts[1]) else {
                throw ClusterConfigError("invalid --client-urls entry '\(item)': expected id=http(s)://host:port")
            }
            out[parts[0]] = parts[1]
        }
        return out
    }

    /// The config file's `clientUrls` (`{"n1": "http://a:9001", ...}`), checked as the flag is.
    public static func checkClientURLs(_ urls: [String: String]) throws -> [String: String] {
        for (id, url) in urls.sorted(by: { $0.key < $1.key }) where !isValidClientURL(id: id, url: url) {
            throw ClusterConfigError("invalid clientUrls entry \(id): '\(url)': expected a node id and http(s)://host:port")
        }
        return urls
    }

    private static func isValidClientURL(id: String, url: String) -> Bool {
        guard ClusterConfiguration.isValidNodeID(id), let u = URL(string: url) else { return false }
        return (u.scheme == "http" || u.scheme == "https") && u.host != nil
    }

    /// `--check-config`: validates what a start would (cluster settings and TLS material load)
    /// and returns a one-object JSON summary.
    public static func check(config: NodeConfiguration, cluster: ClusterConfiguration?) throws -> String {
        var summary: [String: Any] = [
            "ok": true, "data": config.dataDirectory, "host": config.host, "port": config.port,
            "namespace": config.defaultNamespace,
            "readThreads": config.readPool.threads, "maxQueuedReads": config.readPool.maxQueued,
        ]
        if let cluster {
            do {
                try cluster.validate()
                _ = try PeerTLS(certificatePath: cluster.tlsCertificatePath, keyPath: cluster.tlsKeyPath,
                                caPath: cluster.tlsCAPath)
            } catch {
                throw ClusterConfigError("cluster configuration: \(error)")
            }
            summary["nodeId"] = cluster.nodeID
            summary["peerListen"] = cluster.peerListen.description
            summary["peers"] = cluster.peers.mapValues(\.description)
            summary["peerTls"] = ["cert": cluster.tlsCertificatePath, "key": cluster.tlsKeyPath, "ca": cluster.tlsCAPath]
            summary["maxPromotionLag"] = cluster.maxPromotionLag
            summary["learnerSyncIntervalMs"] = cluster.learnerSyncMillis
        }
        if let tls = config.clientTLS {
            _ = try NIOSSLContext(configuration: try tls.serverConfiguration())
            var files = ["cert": tls.certificatePath, "key": tls.keyPath]
            if let ca = tls.clientCAPath { files["ca"] = ca }
            summary["tls"] = files
        }
        if config.addressRequestRate.isEnabled {
            summary["requestsPerSecondPerAddress"] = config.addressRequestRate.perSecond
        }
        if !config.operations.memberURLs.isEmpty { summary["clientUrls"] = config.operations.memberURLs }
        if let a = config.operations.advertisedURL { summary["advertiseUrl"] = a }
        let data = try JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}
