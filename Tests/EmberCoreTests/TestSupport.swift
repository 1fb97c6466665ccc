import EmberTestSupport
import Testing
@testable import EmberCore

/// Parses JSON text that the test itself wrote; a failure here is a bug in the test.
func json(_ text: String) -> JSON {
    do { return try JSON.parse(text) } catch { fatalError("test JSON does not parse: \(text): \(error)") }
}

/// Builds a node from JSON text that the test itself wrote.
func node(_ text: String) -> Node {
    do { return try Node(json: JSON.parse(text)) } catch { fatalError("test node does not build: \(text): \(error)") }
}

/// Captures the typed error of a throwing call (nil when it does not throw).
/// Anything other than an `EmberError` is recorded as a test issue.
func errorOf<T>(_ body: () throws -> T, sourceLocation: SourceLocation = #_sourceLocation) -> EmberError? {
    do {
        _ = try body()
        return nil
    } catch let error as EmberError {
        return error
    } catch {
        Issue.record("expected an EmberError, got \(error)", sourceLocation: sourceLocation)
        return .invalidData("unexpected error type")
    }
}

func path(_ s: String) -> Path {
    do { return try Path(s) } catch { fatalError("bad test path \(s): \(error)") }
}
