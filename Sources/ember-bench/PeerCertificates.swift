import ArgumentParser
import Foundation

/// A CA and one certificate per node (both server and client use: peers authenticate each other).
func makePeerCertificates(openssl: String, dir: String, ids: [String]) throws {
    func run(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: openssl)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ValidationError("openssl \(args.first ?? "") failed") }
    }
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    try run(["req", "-x509"] + ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "30", "-subj", "/CN=bench-ca"])
    for id in ids {
        try "subjectAltName=DNS:\(id)\nextendedKeyUsage=serverAuth,clientAuth\n".write(
            toFile: "\(dir)/\(id).ext", atomically: true, encoding: .utf8)
        try run(["req"] + ec + ["-keyout", "\(dir)/\(id).key", "-out", "\(dir)/\(id).csr", "-subj", "/CN=\(id)"])
        try run(["x509", "-req", "-in", "\(dir)/\(id).csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                 "-CAcreateserial", "-out", "\(dir)/\(id).pem", "-days", "30", "-extfile", "\(dir)/\(id).ext"])
    }
}
