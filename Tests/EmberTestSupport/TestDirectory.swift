import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Every temporary directory and file a test process makes, under one parent removed at exit
/// (the tests made theirs straight in /tmp and never removed most of them: thousands piled up
/// over a day of runs). A parent left by a process that died without exiting is removed by the
/// next test process. Child processes a test starts (emberd) keep their data under it too.
public enum TestDirectory {
    static let prefix = "ember-test-run-"

    /// This process's parent directory, with a trailing slash (a drop-in for
    /// `NSTemporaryDirectory()`).
    public static let root: String = {
        let tmp = NSTemporaryDirectory()
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] where name.hasPrefix(prefix) {
            // kill(pid, 0) fails with ESRCH once that process is gone.
            if let pid = Int32(name.dropFirst(prefix.count)), kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: tmp + name)
            }
        }
        let root = tmp + prefix + "\(getpid())/"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: TestDirectory.root) }
        return root
    }()
}
