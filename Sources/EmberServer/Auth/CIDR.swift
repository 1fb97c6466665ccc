import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `fd00::/8`, a bare address = one host), for
/// `--trust-owner-from`. IPv4 addresses and IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, how a
/// dual-stack listener reports IPv4 peers) are the same address.
public struct CIDR: Sendable, Equatable, CustomStringConvertible {
    /// 16 bytes; IPv4 networks are stored IPv4-mapped.
    let network: [UInt8]
    /// Significant bits of `network` (IPv4 prefixes are offset by the 96 bits of the mapping).
    let prefixBits: Int
    public let description: String

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let (bytes, isV4) = CIDR.parseAddress(String(parts[0])) else { return nil }
        let maxBits = isV4 ? 32 : 128
        var bits = maxBits
        if parts.count == 2 {
            guard let b = Int(parts[1]), b >= 0, b <= maxBits, parts[1].allSatisfy(\.isASCII) else { return nil }
            bits = b
        }
        prefixBits = bits + (isV4 ? 96 : 0)
        network = CIDR.mask(bytes, bits: prefixBits)
        description = text
    }

    /// Parses a comma-separated list; nil names the first bad entry.
    public static func parseList(_ text: String) -> Result<[CIDR], CIDRListError> {
        var list: [CIDR] = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            guard let c = CIDR(item) else { return .failure(CIDRListError(entry: item)) }
            list.append(c)
        }
        return .success(list)
    }

    public func contains(_ address: String) -> Bool {
        guard let (bytes, _) = CIDR.parseAddress(address) else { return false }
        return CIDR.mask(bytes, bits: prefixBits) == network
    }

    /// 16 bytes (IPv4 as `::ffff:a.b.c.d`) and whether the text was IPv4. A zone (`fe80::1%eth0`)
    /// is dropped.
    static func parseAddress(_ text: String) -> ([UInt8], Bool)? {
        var text = text
        if let pct = text.firstIndex(of: "%") { text = String(text[..<pct]) }
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            let b = withUnsafeBytes(of: v4.s_addr) { Array($0) }  // network byte order
            return ([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + b, true)
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return (withUnsafeBytes(of: v6) { Array($0) }, false)
        }
        return nil
    }

    static func mask(_ bytes: [UInt8], bits: Int) -> [UInt8] {
        var out = bytes
        for i in 0..<out.count {
            let keep = max(0, min(8, bits - i * 8))
            out[i] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
        return out
    }
}

public struct CIDRListError: Error, Sendable, Equatable {
    public var entry: String
}

/// Whether a listen address only accepts connections from this machine (protected mode).
public enum ListenAddress {
    public static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        guard let (bytes, isV4) = CIDR.parseAddress(host) else { return false }
        if isV4 { return bytes[12] == 127 }
        return bytes == [UInt8](repeating: 0, count: 15) + [1]
    }
}
