import EmberCore
import EmberRules
import EmberStorage

/// The rules port of an LMDB store. `setRules` logs a `.setRules` entry: straight into the
/// store on a single node; a cluster member proposes it through Raft (`log`).
public struct LMDBRules: RulesPort {
    let store: EmberStore
    let log: @Sendable (_ namespace: String, _ text: String) async throws -> Void

    /// `log`: how a `.setRules` entry reaches the log; nil: this store's own writer.
    public init(store: EmberStore, log: (@Sendable (String, String) async throws -> Void)? = nil) {
        self.store = store
        self.log = log ?? { namespace, text in
            try LMDBTranslation.refuseReserved(namespace)
            let result: WriteResult
            do { result = try await store.submit(namespace: namespace, .setRules(text: text)) } catch let e as StorageError {
                throw LMDBTranslation.translate(e)
            }
            if case .rejected(let e) = result.outcome { throw LMDBTranslation.translate(e) }
        }
    }

    public func setRules(namespace: String, text: String) async throws { try await log(namespace, text) }

    public func storedRules(namespace: String) -> NamespaceRules? { LMDBTranslation.rules(store.storedRules(namespace: namespace)) }

    public func setDefaultRules(_ engine: RulesEngine) { store.setDefaultRules(engine) }

    public func onRulesChanged(_ handler: @escaping @Sendable (String) -> Void) {
        store.onCommit { results in
            for r in results where r.rulesChanged { handler(r.namespace) }
        }
    }
}
