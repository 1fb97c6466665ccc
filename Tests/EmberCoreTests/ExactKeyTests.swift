import EmberCore
import Testing

/// Keys are byte strings (issue 40, item 3): Swift's `String` `==` and hashing are canonical
/// equivalence, under which `"\u{E9}"` (NFC) and `"e\u{301}"` (NFD) are one key.
@Suite struct ExactKeyTests {
    let nfc = "\u{E9}", nfd = "e\u{301}"

    @Test func swiftStringsMergeTheKeysThatKeyMapKeepsApart() {
        #expect(nfc == nfd)  // why KeyMap exists
        var m: KeyMap<Int> = [:]
        m[nfc] = 1
        m[nfd] = 2
        #expect(m.count == 2 && m[nfc] == 1 && m[nfd] == 2)
        #expect(m.keys.contains(nfd) && !KeyMap<Int>([nfc: 1]).keys.contains(nfd))
        m.removeValue(forKey: nfc)
        #expect(m.count == 1 && m[nfd] == 2 && m[nfc] == nil)
        #expect(ExactKey(nfc) != ExactKey(nfd) && ExactKey(nfc) == ExactKey("\u{E9}"))
    }

    @Test func jsonObjectsKeepBothKeysAndRepeatsKeepTheLast() throws {
        let j = try JSON.parse(#"{"\u00e9": 1, "e\u0301": 2, "\u00e9": 3}"#)
        let o = try #require(j.objectValue)
        #expect(o.count == 2 && o[nfc] == .int(3) && o[nfd] == .int(2))
        // Raw UTF-8 keys in the text, not escapes.
        let raw = try #require(try JSON.parse("{\"\(nfc)\": 1, \"\(nfd)\": 2}").objectValue)
        #expect(raw.count == 2)
        #expect(j.serialized() == "{\"\(nfd)\":2,\"\(nfc)\":3}")  // "e…" (0x65) before "é" (U+00E9)
    }

    @Test func nodesKeepBothChildrenThroughWritesAndDeletes() throws {
        var n = try Node(json: JSON.parse("{\"\(nfc)\": 1}"))
        n.set(Node(.int(2)), at: Path(validated: [nfd]))
        #expect(n.childCount == 2 && n.child(nfc) == Node(.int(1)) && n.child(nfd) == Node(.int(2)))
        n.set(.empty, at: Path(validated: [nfc]))
        #expect(n.childCount == 1 && n.child(nfd) == Node(.int(2)) && n.child(nfc).isEmpty)
        #expect(!n.isIdentical(to: try Node(json: JSON.parse("{\"\(nfc)\": 2}"))))
    }

    @Test func pathsAreEqualOnlyByBytes() {
        let a = Path(validated: ["x", nfc]), b = Path(validated: ["x", nfd])
        #expect(a != b)
        #expect(Set([a, b]).count == 2)
        #expect(!a.contains(b) && !Path(validated: [nfc]).contains(Path(validated: [nfd, "y"])))
        #expect(Path(validated: [nfc]).contains(Path(validated: [nfc, "y"])))
    }
}
