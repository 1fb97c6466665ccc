/// The few elements the archive reads from S3's XML answers (a listing's keys and continuation
/// token, a multipart upload's id, an error's code and message). A scan, not a parser: S3's
/// answers are flat where these elements sit, and their texts hold no markup, only the five
/// predefined entities and numeric references.
public enum S3XML {
    /// The texts of every `<tag>…</tag>`, in order (entities resolved).
    public static func values(_ tag: String, in xml: String) -> [String] {
        var out: [String] = []
        let open = "<\(tag)>", close = "</\(tag)>"
        var rest = xml[...]
        while let a = rest.range(of: open) {
            guard let b = rest[a.upperBound...].range(of: close) else { break }
            out.append(unescape(String(rest[a.upperBound..<b.lowerBound])))
            rest = rest[b.upperBound...]
        }
        return out
    }

    public static func value(_ tag: String, in xml: String) -> String? { values(tag, in: xml).first }

    /// XML's five predefined entities, for both directions.
    static let entities: [(name: String, character: Character)] = [
        ("amp", "&"), ("lt", "<"), ("gt", ">"), ("quot", "\""), ("apos", "'"),
    ]

    public static func unescape(_ s: String) -> String {
        guard s.contains("&") else { return s }
        var out = ""
        var rest = s[...]
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) <= 10 else {
                out += rest[amp...]
                return out
            }
            let name = rest[rest.index(after: amp)..<semi]
            if let e = entities.first(where: { $0.name == name }) {
                out.append(e.character)
            } else {
                let code: UInt32? = name.hasPrefix("#x") ? UInt32(name.dropFirst(2), radix: 16)
                    : name.hasPrefix("#") ? UInt32(name.dropFirst()) : nil
                if let code, let u = Unicode.Scalar(code) { out.unicodeScalars.append(u) } else { out += rest[amp...semi] }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }

    public static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            if let e = entities.first(where: { $0.character == c }) { out += "&\(e.name);" } else { out.append(c) }
        }
        return out
    }
}
