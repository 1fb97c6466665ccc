import EmberCore
import Testing

/// The two-generation map behind the trigger caches (`TwoGenerations`): what was inserted
/// lately is found, the newer generation becomes the older when full and the older goes, by
/// count or by the weight each insert names.
@Suite struct TriggerCacheGenerationsTests {
    @Test func theOlderGenerationGoesWhenTheNewerFills() {
        var m = TwoGenerations<Int, String>(limit: 3)
        for k in 0..<3 { m.insert(k, "v\(k)") }
        #expect((0..<3).allSatisfy { m.find($0) == "v\($0)" })
        // Full: 3 starts a new generation, 0-2 stay found in the older one.
        m.insert(3, "v3")
        #expect((0..<4).allSatisfy { m.find($0) == "v\($0)" } && m.count == 4)
        m.insert(4, "v4")
        m.insert(5, "v5")
        // 6 rotates again: 0-2 go, 3-5 are the older generation.
        m.insert(6, "v6")
        #expect((0..<3).allSatisfy { m.find($0) == nil })
        #expect((3..<7).allSatisfy { m.find($0) == "v\($0)" } && m.count == 4)
    }

    @Test func weightsBoundAGenerationByWhatItsEntriesWeigh() {
        var m = TwoGenerations<String, [UInt8]>(limit: 100)
        m.insert("a", [1], weight: 60)
        m.insert("b", [2], weight: 30)
        #expect(m.find("a") == [1] && m.find("b") == [2] && m.count == 2)
        // 90 + 20 > 100: a new generation; a and b are the older one.
        m.insert("c", [3], weight: 20)
        #expect(m.find("a") == [1] && m.find("c") == [3])
        // An entry heavier than the limit still goes in, alone; the generation before goes.
        m.insert("d", [4], weight: 500)
        #expect(m.find("a") == nil && m.find("b") == nil && m.find("c") == [3] && m.find("d") == [4])
        m.insert("e", [5], weight: 1)
        #expect(m.find("c") == nil && m.find("d") == [4] && m.find("e") == [5])
    }
}
