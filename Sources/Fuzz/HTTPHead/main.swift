import EmberFuzz

#if EMBER_FUZZING
// libFuzzer build (`make fuzz`: -sanitize=fuzzer -parse-as-library -DEMBER_FUZZING). SwiftPM
// links an executable's entry point as `FuzzHTTPHead_main`; it hands control to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("FuzzHTTPHead_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in FuzzHarness.entry("httphead", data, size) }
}
#else
// Ordinary build: replays the input files named on the command line through the harness.
// (A declaration, not a statement: with -parse-as-library the inactive branch must still parse.)
let replayed: Int32 = FuzzHarness.replayMain(target: "httphead")
#endif
