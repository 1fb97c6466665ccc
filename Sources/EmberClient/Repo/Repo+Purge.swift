import EmberCore
import Foundation

extension Repo {
    /// `purgeOutstandingWrites`: transactions are aborted first (those on the wire end when the
    /// connection cancels their write), then the connection fails every queued write with
    /// `write_canceled`, and each write's completion rolls its local change back.
    func purgeOutstandingWrites() {
        queue.async { [self] in
            ClientLog.log("Purging outstanding writes")
            abortTransactions(overlapping: .root, reason: .set)
            connection.submit(.purgeWrites)
        }
    }
}
