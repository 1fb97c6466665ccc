import Testing
import EmberTestSupport
@testable import EmberCore

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { b in
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }.joined()
}

@Suite("SHA-1 and base64", .printsSeedOnFailure)
struct SHA1Tests {
    @Test("known SHA-1 vectors (FIPS 180 examples and more)", arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        ("The quick brown fox jumps over the lazy dog", "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    ])
    func vectors(_ input: String, _ expected: String) {
        #expect(SHA1.hexDigest(Array(input.utf8)) == expected)
    }

    @Test("long and binary messages, all padding lengths")
    func longMessages() {
        #expect(SHA1.hexDigest([UInt8](repeating: 0x61, count: 1_000_000)) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        #expect(SHA1.hexDigest(Array((0..<1024).map { UInt8($0 % 256) })) == "5b00669c480d5cffbdfa8bdba99561160f2d1b77")
        // Every length around the 55/56/64-byte padding boundaries gives a 20-byte digest.
        for n in 50...130 { #expect(SHA1.digest([UInt8](repeating: 7, count: n)).count == 20) }
    }

    @Test("base64 with padding", arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ])
    func base64(_ input: String, _ expected: String) {
        #expect(Base64.encode(Array(input.utf8)) == expected)
    }

    @Test("base64 uses the standard alphabet (+ and /), not web-safe")
    func standardAlphabet() {
        #expect(Base64.encode([0xFF, 0xFE, 0xFD, 0xFB]) == "//79+w==")
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    }
}

@Suite("Node hash (§6.8)", .printsSeedOnFailure)
struct NodeHashTests {
    func b64sha1(_ text: String) -> String { Base64.encode(SHA1.digest(Array(text.utf8))) }

    @Test("known hashes computed outside Swift")
    func known() {
        #expect(node("1").firebaseHash == "YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=")  // "number:3ff0000000000000"
        #expect(node("1.0").firebaseHash == "YPVfR2bXt/lcDjiQZ8pOkAd3qkQ=")
        #expect(node(#""hello""#).firebaseHash == "z6sRbrNLwbHX5fdjpvsTtWgXUFc=")
        #expect(node("true").firebaseHash == "E5z61QM0lN/U2WsOnusszCTkR8M=")
        #expect(node("false").firebaseHash == "aSSNoqcS4oQwJ2xxH20rvpp3zP0=")
        #expect(node("-0.0").firebaseHash == "m/gA365Q5OBo06Bg8wdybAAiMSQ=")  // sign bit kept
        #expect(node(#"{".value":2,".priority":"p"}"#).firebaseHash == "s1yRX30Be59tFo2udHIlHNykYUs=")
        #expect(node(#"{".value":"x",".priority":1.5}"#).firebaseHash == "uACkusfhFFgblVrK0KpY9Z6GmY4=")
        #expect(node(#"{"b":1,"a":"x"}"#).firebaseHash == "1JV1XDLg7Q+lZRYxSfVQsxuQSPc=")
        #expect(node(#"{"a":{".value":1,".priority":2},"b":1,".priority":"root"}"#).firebaseHash == "fr9432OVvcXJK7XMfZ1ig8c4SV4=")
        #expect(node(#""日本😀""#).firebaseHash == "kBcNOVOivLKwTeP9eMfBgSFMyCg=")
    }

    @Test("texts hashed for leaves and priorities")
    func texts() {
        #expect(node("1").firebaseHash == b64sha1("number:3ff0000000000000"))
        #expect(node("-2").firebaseHash == b64sha1("number:c000000000000000"))
        #expect(node("3.14").firebaseHash == b64sha1("number:40091eb851eb851f"))
        #expect(node("9223372036854775807").firebaseHash == b64sha1("number:43e0000000000000"))
        #expect(node(#""""#).firebaseHash == b64sha1("string:"))  // the empty string is a leaf, not null
        #expect(node(#"{".value":true,".priority":1}"#).firebaseHash
                == b64sha1("priority:number:3ff0000000000000:boolean:true"))
        #expect(node(#"{"a":true,".priority":"z"}"#).firebaseHash
                == b64sha1("priority:string:z::a:" + b64sha1("boolean:true")))
        #expect(Node.empty.firebaseHash == "")
        #expect(Node.doubleHex(1) == "3ff0000000000000")
        #expect(Node.doubleHex(0) == "0000000000000000")
    }

    @Test("children hash in priority order, integer keys first")
    func childOrder() {
        let n = node(#"{"b":"B","10":"T","9":"N","a":{".value":"A",".priority":1},"c":{".value":"C",".priority":"s"}}"#)
        let expected = ":9:" + b64sha1("string:N") + ":10:" + b64sha1("string:T") + ":b:" + b64sha1("string:B")
            + ":a:" + b64sha1("priority:number:3ff0000000000000:string:A")
            + ":c:" + b64sha1("priority:string:s:string:C")
        #expect(n.firebaseHash == b64sha1(expected))
        // Arrays hash as objects with integer keys.
        #expect(node("[1,2]").firebaseHash == node(#"{"0":1,"1":2}"#).firebaseHash)
        #expect(node("[1,2]").firebaseHash
                == b64sha1(":0:" + b64sha1("number:3ff0000000000000") + ":1:" + b64sha1("number:4000000000000000")))
    }

    /// Independent model of §6.8: hex via UInt64 bytes, priority order rebuilt here.
    func referenceHash(_ n: Node) -> String {
        func hexDouble(_ d: Double) -> String {
            let bits = d.bitPattern
            return hex((0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) })
        }
        func prioText(_ p: Priority) -> String {
            switch p {
            case .number(let d): return "number:" + hexDouble(d)
            case .string(let s): return "string:" + s
            }
        }
        func rank(_ p: Priority?) -> Int {
            switch p { case nil: return 0; case .number?: return 1; case .string?: return 2 }
        }
        func before(_ a: (String, Node), _ b: (String, Node)) -> Bool {
            let ra = rank(a.1.priority), rb = rank(b.1.priority)
            if ra != rb { return ra < rb }
            switch (a.1.priority, b.1.priority) {
            case let (.number(x)?, .number(y)?) where x != y: return x < y
            case let (.string(x)?, .string(y)?) where x != y: return Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8))
            default: return KeyOrder.compare(a.0, b.0) < 0
            }
        }
        var text = ""
        if let p = n.priority { text += "priority:" + prioText(p) + ":" }
        if let leaf = n.leaf {
            switch leaf {
            case .bool(let b): text += "boolean:\(b)"
            case .int(let i): text += "number:" + hexDouble(Double(i))
            case .double(let d): text += "number:" + hexDouble(d)
            case .string(let s): text += "string:" + s
            }
        } else {
            for (k, c) in n.children.map({ ($0.key, $0.value) }).sorted(by: before) {
                let h = referenceHash(c)
                if !h.isEmpty { text += ":" + k + ":" + h }
            }
        }
        return text.isEmpty ? "" : b64sha1(text)
    }

    @Test("random trees hash like the independent model")
    func randomTrees() {
        var rng = TestSeed.generator(0xF1_2E_BA_5E)
        func randomPriority() -> Priority? {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return .number(Double(Int.random(in: -3...3, using: &rng)) / 2)
            case 1: return .string(["a", "b", "", "10"].randomElement(using: &rng)!)
            default: return nil
            }
        }
        func randomNode(_ depth: Int) -> Node {
            if depth > 3 || Int.random(in: 0..<3, using: &rng) == 0 {
                let leaf: Leaf
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: leaf = .bool(Bool.random(using: &rng))
                case 1: leaf = .int(Int64.random(in: -1000...1000, using: &rng))
                case 2: leaf = .double(Double(Int.random(in: -1000...1000, using: &rng)) / 8)
                default: leaf = .string(["", "x", "é", "😀", "a:b"].randomElement(using: &rng)!)
                }
                return Node(leaf, priority: randomPriority())
            }
            var kids: KeyMap<Node> = [:]
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                kids[["a", "b", "0", "1", "10", "9", "-1", "z"].randomElement(using: &rng)!] = randomNode(depth + 1)
            }
            return Node(children: kids, priority: randomPriority())
        }
        for _ in 0..<300 {
            let n = randomNode(0)
            #expect(n.firebaseHash == referenceHash(n), "\(n.exportJSON().serialized())")
        }
    }

    @Test("equal data hashes equally; different data differently")
    func sensitivity() {
        #expect(node(#"{"a":1,"b":2}"#).firebaseHash == node(#"{"b":2.0,"a":1}"#).firebaseHash)
        #expect(node(#"{"a":1}"#).firebaseHash != node(#"{"a":"1"}"#).firebaseHash)
        #expect(node(#"{"a":1}"#).firebaseHash != node(#"{"a":{".value":1,".priority":1}}"#).firebaseHash)
        #expect(node("1").firebaseHash != node("true").firebaseHash)
    }
}
