import Testing
@testable import EmberServer

/// The test process links glibc's malloc only (jemalloc is linked by `emberd`, whose status the
/// integration suite checks): the check must not name an allocator that is not serving malloc.
@Test func theAllocatorCheckNamesGlibcInAProcessWithoutJemalloc() {
    #if os(Linux)
    #expect(Allocator.name == "glibc")
    #endif
}
