import EmberCore
import Testing

@testable import EmberProtocol

/// `p` and `m` bodies as writes: the front's limits, the compare-and-set condition and the writer's
/// stamp, with the first fault reported.
@Suite struct WireWriteTests {
    let validation = WriteValidation(maxWriteNodes: 5, maxUpdateParts: 2)

    func write(_ action: String, _ body: String) throws -> WireWrite {
        guard case .object(let b) = try JSON.parse(body) else { preconditionFailure("a body is an object") }
        return try WireWrite(action: action, body: b, validation: validation)
    }

    func fault(_ action: String, _ body: String) -> String? {
        do { _ = try write(action, body); return nil } catch { return "\(error)" }
    }

    @Test func aSetWithItsConditionAndStamp() throws {
        let w = try write("p", #"{"p":"/a/b","d":{"x":1},"h":"abc","w":{"id":"tab-1","n":3}}"#)
        #expect(w.path == (try Path("a/b")))
        guard case .set(let data) = w.kind else { Issue.record("a p is a set"); return }
        #expect(data == .object(["x": .int(1)]))
        #expect(w.condition == .hash("abc"))
        #expect(w.stamp == WireWrite.Stamp(id: "tab-1", n: 3))
        // `v` (Ember's version condition) wins over `h`; a negative one is no condition.
        #expect(try write("p", #"{"p":"a","d":1,"h":"abc","v":7}"#).condition == .version(7))
        #expect(try write("p", #"{"p":"a","d":1,"v":-1}"#).condition == nil)
        // No data deletes.
        guard case .set(.null) = try write("p", #"{"p":"a"}"#).kind else { Issue.record("no d is null"); return }
    }

    @Test func aMergeIsItsPartsInPathOrder() throws {
        let w = try write("m", #"{"p":"a","d":{"z":1,"b/c":2}}"#)
        guard case .update(let parts) = w.kind else { Issue.record("an m is an update"); return }
        #expect(parts.map(\.0.description) == ["/b/c", "/z"])
        #expect(w.condition == nil && w.stamp == nil)
    }

    @Test func theFrontsLimitsAndShapes() {
        #expect(fault("p", #"{"d":1}"#) != nil)  // no path
        #expect(fault("p", #"{"p":"a","d":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}}"#)?.contains("maximum of 5 nodes") == true)
        #expect(fault("m", #"{"p":"a","d":1}"#)?.contains("a merge needs an object") == true)
        #expect(fault("m", #"{"p":"a","d":{"a":1,"b":2,"c":3}}"#)?.contains("Too many paths") == true)
        #expect(fault("m", #"{"p":"a","d":{"b":1,"b/c":2}}"#)?.contains("ancestor") == true)
        #expect(fault("p", #"{"p":"a","d":1,"w":{"id":"x"}}"#) == "\(WireWrite.invalidStamp)")
        #expect(fault("p", #"{"p":"a","d":1,"w":"x"}"#) == "\(WireWrite.invalidStamp)")
    }

    @Test func theFirstFaultIsReported() {
        // Too large data and a bad stamp: the data is checked first.
        #expect(fault("p", #"{"p":"a","d":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6},"w":1}"#)?.contains("maximum") == true)
        // A bad path before anything else.
        #expect(fault("m", #"{"p":"a/.b","d":1}"#)?.contains("merge") == false)
    }
}
