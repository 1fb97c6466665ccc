import EmberFuzz

// libFuzzer entry point (built with `-sanitize=fuzzer -parse-as-library`: libFuzzer supplies
// main). In an ordinary build this file has no top-level code and the program does nothing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzHarness.entry("json", data, size)
}
