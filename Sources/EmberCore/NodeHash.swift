/// The data hash clients send with listens and compare-and-set puts (reference §6.8). It must
/// match the SDKs bit for bit: numbers hash as IEEE doubles, children go in priority order.
extension Node {
    public var firebaseHash: String {
        if isEmpty { return "" }
        var text = ""
        if let priority { text += "priority:" + Node.priorityHashText(priority) + ":" }
        if let leaf {
            switch leaf {
            case .bool(let b): text += "boolean:" + (b ? "true" : "false")
            case .int(let i): text += "number:" + Node.doubleHex(Double(i))
            case .double(let d): text += "number:" + Node.doubleHex(d)
            case .string(let s): text += "string:" + s
            }
        } else {
            var body = ""
            for (key, child) in QuerySpec.default.sortedChildren(of: self) {
                let h = child.firebaseHash
                if !h.isEmpty { body += ":" + key + ":" + h }
            }
            if body.isEmpty && priority == nil { return "" }
            text += body
        }
        return Base64.encode(SHA1.digest(Array(text.utf8)))
    }

    static func priorityHashText(_ p: Priority) -> String {
        switch p {
        case .number(let d): return "number:" + doubleHex(d)
        case .string(let s): return "string:" + s
        }
    }

    /// 16 lowercase hex digits of the big-endian IEEE-754 bits.
    static func doubleHex(_ d: Double) -> String {
        let s = String(d.bitPattern, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
