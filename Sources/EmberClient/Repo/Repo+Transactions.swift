import EmberCore
import EmberSyncTree
import Foundation

/// Why a transaction ended without committing.
enum TransactionAbortReason: Sendable {
    case user
    case set
    case maxRetry
    case server(status: String, data: JSON)

    var error: (any Error)? {
        switch self {
        case .user: return nil
        case .set: return DatabaseError(code: .writeCanceled, message: "Transaction aborted by a set at an overlapping location")
        case .maxRetry: return DatabaseError(code: .maxRetries, message: "Transaction had too many retries")
        case .server(let status, let data): return DatabaseError.from(status: status, data: data)
        }
    }
}

/// One running transaction. Only touched on the Repo's queue (hence `@unchecked`).
final class TransactionRecord: @unchecked Sendable {
    enum Status { case run, sent, done }

    let order: Int
    let path: Path
    let update: @Sendable (MutableData) -> TransactionResult
    let onComplete: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)?
    let applyLocally: Bool
    /// The value observer that keeps the path synced while the transaction runs.
    let listenHandle: UInt
    var status = Status.run
    var retryCount = 0
    var writeID: Int?
    var inputHash = ""
    var output = Node.empty
    var outputJSON = JSON.null
    /// A set overrode this transaction while it was on the wire; finish it when the reply comes.
    var abortWhenAnswered: TransactionAbortReason?

    init(order: Int, path: Path, update: @escaping @Sendable (MutableData) -> TransactionResult,
         onComplete: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)?, applyLocally: Bool, listenHandle: UInt) {
        self.order = order
        self.path = path
        self.update = update
        self.onComplete = onComplete
        self.applyLocally = applyLocally
        self.listenHandle = listenHandle
    }
}

/// Transactions (JS `Repo.transaction`): run the update on the last known value, write it
/// locally, send a compare-and-set (`p` with `h` = hash of that value), and on `datastale`
/// rerun on the newer value the server has pushed first — at most 25 times.
extension Repo {
    static let maxTransactionRetries = 25

    func startTransaction(at path: Path, update: @escaping @Sendable (MutableData) -> TransactionResult,
                          onComplete: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)?, applyLocally: Bool) {
        let handle = handles.allocate()
        queue.async { [self] in
            let query = SyncQuery(path: path)
            registrations[handle] = Registration(handle: handle, query: query, eventType: .value, onEvent: { _, _ in }, onCancel: nil)
            raise(syncTree.addEventRegistration(query, RegistrationID(Int(handle))))
            nextTransactionOrder += 1
            let record = TransactionRecord(order: nextTransactionOrder, path: path, update: update, onComplete: onComplete,
                                           applyLocally: applyLocally, listenHandle: handle)
            transactions.append(record)
            run(record)
            sendReadyTransactions()
        }
    }

    /// The value a transaction at `path` runs on: local data without any transaction's writes.
    private func transactionInput(_ path: Path) -> Node {
        let ignored = Set(transactions.compactMap(\.writeID))
        return syncTree.calcCompleteEventCache(path, excluding: ignored) ?? .empty
    }

    private func run(_ record: TransactionRecord) {
        let input = transactionInput(record.path)
        let data = MutableData(node: input, now: serverTime)
        let result = record.update(data)
        guard result.isSuccess else {
            finish(record, reason: .user, committed: false, snapshot: input)
            return
        }
        let resultData = result.data ?? data
        let node = resultData.root
        record.output = node
        // Sent as written: the server resolves server values itself.
        record.outputJSON = resultData.rawRoot
        record.inputHash = input.firebaseHash
        let writeID = nextWriteID
        nextWriteID += 1
        record.writeID = writeID
        record.status = .run
        raise(syncTree.applyUserOverwrite(record.path, node, writeId: writeID, visible: record.applyLocally))
    }

    private func overlaps(_ a: Path, _ b: Path) -> Bool { a.contains(b) || b.contains(a) }

    /// Sends every ready transaction that no in-flight transaction overlaps.
    func sendReadyTransactions() {
        for record in transactions where record.status == .run {
            guard !transactions.contains(where: { $0.status == .sent && overlaps($0.path, record.path) }) else { continue }
            record.status = .sent
            connection.submit(.write(action: "p", path: record.path, data: record.outputJSON, hash: record.inputHash) {
                [weak self] status, data in
                guard let self else { return }
                self.queue.async { self.transactionAnswered(record, status: status, data: data) }
            })
        }
    }

    private func transactionAnswered(_ record: TransactionRecord, status: String, data: JSON) {
        guard record.status == .sent, let writeID = record.writeID else { return }
        if status == "ok" {
            raise(syncTree.ackUserWrite(writeID))
            record.writeID = nil
            if let reason = record.abortWhenAnswered {
                finish(record, reason: reason, committed: false, snapshot: record.output)
            } else {
                finish(record, reason: nil, committed: true, snapshot: record.output)
            }
        } else {
            raise(syncTree.ackUserWrite(writeID, revert: true))
            record.writeID = nil
            if let reason = record.abortWhenAnswered {
                finish(record, reason: reason, committed: false, snapshot: transactionInput(record.path))
            } else if status == "datastale" {
                // The server pushed the current value before answering; run again on it.
                record.retryCount += 1
                if record.retryCount >= Self.maxTransactionRetries {
                    finish(record, reason: .maxRetry, committed: false, snapshot: transactionInput(record.path))
                } else {
                    run(record)
                }
            } else {
                finish(record, reason: .server(status: status, data: data), committed: false,
                       snapshot: transactionInput(record.path))
            }
        }
        sendReadyTransactions()
    }

    /// A set or update at `path` aborts the transactions it overrides (SDK reason "set").
    func abortTransactions(overlapping path: Path, reason: TransactionAbortReason) {
        for record in transactions where overlaps(record.path, path) {
            switch record.status {
            case .sent:
                record.abortWhenAnswered = reason
            case .run:
                if let writeID = record.writeID {
                    raise(syncTree.ackUserWrite(writeID, revert: true))
                    record.writeID = nil
                }
                finish(record, reason: reason, committed: false, snapshot: transactionInput(record.path))
            case .done:
                break
            }
        }
    }

    func rerunTransactionsIfNeeded() {
        if transactions.contains(where: { $0.status == .run }) { sendReadyTransactions() }
    }

    private func finish(_ record: TransactionRecord, reason: TransactionAbortReason?, committed: Bool, snapshot: Node) {
        record.status = .done
        transactions.removeAll { $0 === record }
        if let reg = registrations.removeValue(forKey: record.listenHandle) {
            handles.deactivate(record.listenHandle)
            syncTree.removeEventRegistration(reg.query, RegistrationID(Int(record.listenHandle)))
        }
        guard let onComplete = record.onComplete, let database else { return }
        let snap = DataSnapshot(node: snapshot, ref: DatabaseReference(database: database, path: record.path), index: .priority)
        let error = reason?.error
        deliver { onComplete(error, committed, snap) }
    }
}
