#if canImport(Glibc)
import Glibc
#endif

/// Which malloc serves this process. `emberd` links jemalloc, which takes malloc over from glibc
/// (it comes before libc in the executable's libraries): a write's many small Swift allocations
/// cost less there. A build or machine without it falls back to glibc silently, so the status
/// names the one in use (`/.ember/status` "allocator") and the node logs it at start.
public enum Allocator {
    public static let name: String = {
        #if canImport(Glibc)
        // Loaded at all? RTLD_NOLOAD only looks: it never loads the library.
        guard let jemalloc = dlopen("libjemalloc.so.2", RTLD_LAZY | RTLD_NOLOAD) else { return "glibc" }
        defer { dlclose(jemalloc) }
        // In use: the process-wide `malloc` (RTLD_DEFAULT) is jemalloc's own.
        let global = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc")
        return global != nil && global == dlsym(jemalloc, "malloc") ? "jemalloc" : "glibc"
        #else
        return "system"
        #endif
    }()

    /// jemalloc's byte counts (`/metrics` `ember_allocator_bytes`): what the process holds
    /// allocated, in active pages, resident, and mapped. Resident far above allocated is freed
    /// memory the allocator keeps for reuse (dirty pages, returned to the system over its decay
    /// time), not live data. nil under another allocator.
    public struct Stats: Sendable, Equatable {
        public var allocated: Int
        public var active: Int
        public var resident: Int
        public var mapped: Int
    }

    public static func stats() -> Stats? {
        #if canImport(Glibc)
        guard name == "jemalloc", let ctl = mallctl else { return nil }
        // The counters are a snapshot taken at the last "epoch" write: refresh it first.
        var epoch: UInt64 = 1
        var current: UInt64 = 0
        var size = MemoryLayout<UInt64>.size
        _ = ctl("epoch", &current, &size, &epoch, size)
        func read(_ key: String) -> Int? {
            var v = 0
            var n = MemoryLayout<Int>.size
            return ctl(key, &v, &n, nil, 0) == 0 ? v : nil
        }
        guard let allocated = read("stats.allocated"), let active = read("stats.active"),
              let resident = read("stats.resident"), let mapped = read("stats.mapped") else { return nil }
        return Stats(allocated: allocated, active: active, resident: resident, mapped: mapped)
        #else
        return nil
        #endif
    }

    /// jemalloc's arena count (`opt.narenas`: emberd's built-in `narenas:1` unless MALLOC_CONF
    /// says otherwise), or nil under another allocator.
    public static let arenas: Int? = {
        #if canImport(Glibc)
        guard name == "jemalloc", let ctl = mallctl else { return nil }
        var v: UInt32 = 0
        var n = MemoryLayout<UInt32>.size
        return ctl("opt.narenas", &v, &n, nil, 0) == 0 ? Int(v) : nil
        #else
        return nil
        #endif
    }()

    #if canImport(Glibc)
    typealias MallctlFunction = @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?,
                                                UnsafeMutableRawPointer?, Int) -> Int32
    /// jemalloc's `mallctl`, looked up at run time: the package links jemalloc into `emberd` only.
    static let mallctl: MallctlFunction? = {
        guard let f = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") else { return nil }
        return unsafeBitCast(f, to: MallctlFunction.self)
    }()
    #endif
}
