import Testing
@testable import EmberCore

@Suite("Keys")
struct KeyTests {
    @Test("ordinary keys are valid", arguments: [
        "a", "users", "-JSOpn9ZC54A4P4RoqVa", "0", "-1", "with space", "ü", "日本語", "😀", "a\u{80}b",
        "~!@%^&*()_+=-{}|\\:;\"'<>,?`", "\u{7E}", String(repeating: "x", count: 768),
    ])
    func valid(_ key: String) {
        #expect(Key.isValid(key))
        #expect(errorOf { try Key.validate(key) } == nil)
    }

    @Test("each forbidden character is rejected, anywhere in the key", arguments: [".", "$", "#", "[", "]", "/"])
    func forbiddenCharacter(_ c: String) {
        for key in [c, "a" + c, c + "a", "ab" + c + "cd"] {
            let err = errorOf { try Key.validate(key) }
            guard case .invalidKey(let k, let reason)? = err else {
                Issue.record("\(key.debugDescription): expected invalidKey, got \(String(describing: err))")
                continue
            }
            #expect(k == key)
            #expect(reason.contains("'.', '$', '#', '[', ']' or '/'"))
            #expect(!Key.isValid(key))
        }
    }

    @Test("ASCII control characters 0–31 and 127 are rejected")
    func controlCharacters() {
        for b in Array(0...31) + [127] {
            let key = "a" + String(UnicodeScalar(UInt8(b))) + "b"
            let err = errorOf { try Key.validate(key) }
            guard case .invalidKey(_, let reason)? = err else {
                Issue.record("byte \(b): expected invalidKey, got \(String(describing: err))")
                continue
            }
            #expect(reason.contains("control"), "byte \(b)")
        }
        // 128 and above (as UTF-8 multi-byte sequences) are fine; so is space (32) and '~' (126).
        #expect(Key.isValid("a\u{80}\u{9F}b"))
        #expect(Key.isValid(" "))
        #expect(Key.isValid("~"))
    }

    @Test("the empty key is rejected")
    func empty() {
        guard case .invalidKey(let k, let reason)? = errorOf({ try Key.validate("") }) else {
            Issue.record("expected invalidKey")
            return
        }
        #expect(k == "")
        #expect(reason.contains("non-empty"))
    }

    @Test("768 UTF-8 bytes is the maximum key length, counted in bytes not characters")
    func length() {
        #expect(Key.isValid(String(repeating: "a", count: 768)))
        #expect(errorOf { try Key.validate(String(repeating: "a", count: 769)) } == .keyTooLong(bytes: 769))
        // 2-byte characters: 384 × 2 = 768 ok; one more ASCII byte is too long.
        let twoByte = String(repeating: "é", count: 384)
        #expect(twoByte.utf8.count == 768)
        #expect(Key.isValid(twoByte))
        #expect(errorOf { try Key.validate(twoByte + "a") } == .keyTooLong(bytes: 769))
        // 3-byte characters: 256 × 3 = 768.
        let threeByte = String(repeating: "€", count: 256)
        #expect(threeByte.utf8.count == 768)
        #expect(Key.isValid(threeByte))
        #expect(errorOf { try Key.validate(threeByte + "€") } == .keyTooLong(bytes: 771))
        // 4-byte characters: 192 × 4 = 768; 193 would be only 193 characters but 772 bytes.
        let fourByte = String(repeating: "😀", count: 192)
        #expect(Key.isValid(fourByte))
        #expect(errorOf { try Key.validate(fourByte + "😀") } == .keyTooLong(bytes: 772))
        // 767 ASCII + one 2-byte character = 769 bytes.
        #expect(errorOf { try Key.validate(String(repeating: "a", count: 767) + "é") } == .keyTooLong(bytes: 769))
    }

    @Test("each violation has its own error")
    func distinctErrors() {
        let errors = [
            errorOf { try Key.validate("") },
            errorOf { try Key.validate("a.b") },
            errorOf { try Key.validate("a\u{1}b") },
            errorOf { try Key.validate(String(repeating: "a", count: 769)) },
        ]
        #expect(errors.allSatisfy { $0 != nil })
        for i in errors.indices {
            for j in errors.indices where i < j {
                #expect(errors[i] != errors[j])
                #expect(errors[i]?.description != errors[j]?.description)
            }
        }
        #expect(errorOf { try Path(String(repeating: "/a", count: 33)) } == .pathTooDeep(depth: 33))
    }
}

@Suite("Paths")
struct PathTests {
    @Test("parsing ignores leading, trailing and doubled slashes")
    func parsing() throws {
        #expect(try Path("").isRoot)
        #expect(try Path("/").isRoot)
        #expect(try Path("//").isRoot)
        #expect(try Path("a/b").segments == ["a", "b"])
        #expect(try Path("/a/b").segments == ["a", "b"])
        #expect(try Path("a/b/").segments == ["a", "b"])
        #expect(try Path("//a//b//").segments == ["a", "b"])
        #expect(try Path("/a/b/") == Path("a/b"))
        #expect(try Path("/a/b").description == "/a/b")
        #expect(Path.root.description == "/")
    }

    @Test("depth 32 is allowed, 33 is not")
    func depth() throws {
        let ok = try Path(Array(repeating: "k", count: 32).joined(separator: "/"))
        #expect(ok.count == 32)
        #expect(errorOf { try Path(Array(repeating: "k", count: 33).joined(separator: "/")) } == .pathTooDeep(depth: 33))
        // Slashes do not count as levels.
        #expect(try Path("/" + Array(repeating: "k", count: 32).joined(separator: "//") + "/").count == 32)
    }

    @Test("every segment is validated")
    func invalidSegments() {
        #expect(errorOf { try Path("a/b.c") } != nil)
        #expect(errorOf { try Path("a/$b") } != nil)
        #expect(errorOf { try Path("a/b#") } != nil)
        #expect(errorOf { try Path("a/[b]") } != nil)
        #expect(errorOf { try Path("a/\u{7F}") } != nil)
        #expect(errorOf { try Path("a/" + String(repeating: "x", count: 769)) } == .keyTooLong(bytes: 769))
        #expect(errorOf { try Path("a/" + String(repeating: "x", count: 768)) } == nil)
    }

    @Test("parent, child, key, first, dropFirst")
    func navigation() throws {
        let p = try Path("a/b/c")
        #expect(p.parent == (try Path("a/b")))
        #expect(p.parent?.parent?.parent == .root)
        #expect(Path.root.parent == nil)
        #expect(p.key == "c")
        #expect(p.last == "c")
        #expect(p.first == "a")
        #expect(Path.root.key == nil)
        #expect(p.dropFirst == (try Path("b/c")))
        #expect(Path.root.child("x") == (try Path("x")))
        #expect(p.child("d") == (try Path("a/b/c/d")))
        #expect(p.appending(try Path("d/e")) == (try Path("a/b/c/d/e")))
        #expect(p.appending(.root) == p)
    }

    @Test("contains and relative")
    func containment() throws {
        let ab = try Path("a/b")
        #expect(Path.root.contains(ab))
        #expect(ab.contains(ab))
        #expect(ab.contains(try Path("a/b/c/d")))
        #expect(!ab.contains(try Path("a")))
        #expect(!ab.contains(try Path("a/bc")))  // segment-wise, not a string prefix
        #expect(!ab.contains(try Path("x/b")))
        #expect(ab.relative(try Path("a/b/c/d")) == (try Path("c/d")))
        #expect(ab.relative(ab) == .root)
        #expect(Path.root.relative(ab) == ab)
        #expect(ab.relative(try Path("a")) == nil)
        #expect(ab.relative(try Path("a/c")) == nil)
    }

    @Test("paths order segment by segment in key order, prefixes first")
    func ordering() throws {
        let sorted = try ["", "a", "a/1", "a/2", "a/10", "a/b", "a/b/c", "b", "b/a"].map { try Path($0) }
        for i in sorted.indices {
            for j in sorted.indices {
                #expect((sorted[i] < sorted[j]) == (i < j), "\(sorted[i]) vs \(sorted[j])")
            }
        }
    }
}

/// Regression (found by FuzzPath): a key that starts with a combining mark forms one Character
/// with the slash before it; paths are split by Unicode scalar so the slash still separates.
@Suite("Paths with combining marks")
struct CombiningMarkPathTests {
    @Test func slashBeforeACombiningMarkSeparates() throws {
        let p = try Path("a/\u{05A4}/\u{301}x")
        #expect(p.segments == ["a", "\u{05A4}", "\u{301}x"])
        #expect(try Path(p.description) == p)
        #expect(try Path("/\u{05A4}").segments == ["\u{05A4}"])
    }
}
