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
}
