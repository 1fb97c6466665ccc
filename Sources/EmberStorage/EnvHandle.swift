import CLMDB
import Foundation
import Synchronization

/// One open LMDB environment of a store. A read holds the handle it began on until its
/// transaction ends (`StoreCore.withRead`), so when an online defrag switches the store to the
/// environment of the compacted file, reads already running finish on the old one, which
/// closes when its last holder lets go (`deinit`): its pages stay mapped (the renamed-over
/// file lives on until then) and its reader table stays its own.
///
/// Why a second environment needs its own lock file: two environments of one process on one
/// lock file would each take the other's reader slots for their own (LMDB's locks are per
/// process, and closing one clears every slot of the process), and the writer could then reuse
/// pages a reader still reads. So the environment of a defragged file is opened through a
/// symbolic link to `data.mdb` (`Defrag.linkName`) with `MDB_NOSUBDIR`: the same data file,
/// the lock file `<link>-lock`. Two link names alternate; a defrag refuses to reuse one whose
/// environment is still open.
final class EnvHandle: @unchecked Sendable {
    let env: OpaquePointer
    /// The link this environment was opened through, nil for the data directory itself.
    let link: String?
    private let closed = Atomic<Bool>(false)

    init(env: OpaquePointer, link: String?) {
        self.env = env
        self.link = link
    }

    /// Closes the environment (once) and removes its link and lock file.
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        mdb_env_close(env)
        if let link {
            unlink(link)
            unlink(link + "-lock")
        }
    }

    deinit { close() }
}
