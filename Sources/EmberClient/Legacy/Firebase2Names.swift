import Foundation

// The Firebase 2.x iOS SDK's names (deprecated by Firebase in 2016), so code written against the
// legacy guide ("Retrieving Data", one of the seed documents) compiles and runs: a `Firebase` is
// a reference made from a URL, events are `FEventType` with capitalized cases, and the methods
// carry their Objective-C names. They forward to the current API. Unlike the current API, their
// blocks need not be `@Sendable` (2.x code mutates captured variables in them): they run on the
// database's serial callback queue, one at a time.

/// The 2.x reference type: `Firebase(url: "https://NAME.firebaseio.com/path")`.
public typealias Firebase = DatabaseReference
public typealias FQuery = DatabaseQuery
public typealias FDataSnapshot = DataSnapshot
public typealias FEventType = DataEventType
public typealias FirebaseHandle = DatabaseHandle

extension DataEventType {
    public static var Value: DataEventType { .value }
    public static var ChildAdded: DataEventType { .childAdded }
    public static var ChildChanged: DataEventType { .childChanged }
    public static var ChildRemoved: DataEventType { .childRemoved }
    public static var ChildMoved: DataEventType { .childMoved }
}

/// Hands a block that is not `@Sendable` to the callback queue that runs it (serially).
private struct SerialBlock<Arguments>: @unchecked Sendable {
    let call: (Arguments) -> Void
}

extension DatabaseReference {
    /// 2.x `Firebase(url:)`: the location `url` names, in the shared database of its host
    /// (`Database.database(url:)` of the URL without its path), as `reference(fromURL:)` makes it.
    public convenience init(url: String) {
        guard var c = URLComponents(string: url), c.host != nil else { preconditionFailure("Firebase(url:): invalid URL \(url)") }
        let path = c.percentEncodedPath.removingPercentEncoding ?? c.path
        c.percentEncodedPath = ""
        c.fragment = nil
        let database = Database.database(url: c.string ?? url)
        do { self.init(database: database, path: try Database.parsePath(path)) } catch {
            preconditionFailure("Firebase(url:): invalid path in \(url): \(error)")
        }
    }

    public func childByAppendingPath(_ pathString: String) -> Firebase { child(pathString) }
}

extension DatabaseQuery {
    @discardableResult
    public func observeEventType(_ eventType: FEventType, withBlock block: @escaping (FDataSnapshot) -> Void) -> FirebaseHandle {
        let b = SerialBlock(call: block)
        return observe(eventType, with: { b.call($0) })
    }

    /// The cancel block gets an `NSError` (2.x code reads `error.description`).
    @discardableResult
    public func observeEventType(_ eventType: FEventType, withBlock block: @escaping (FDataSnapshot) -> Void,
                                 withCancelBlock cancelBlock: @escaping (NSError) -> Void) -> FirebaseHandle {
        let b = SerialBlock(call: block), c = SerialBlock(call: cancelBlock)
        return observe(eventType, with: { b.call($0) }, withCancel: { c.call(Self.nsError($0)) })
    }

    public func observeSingleEventOfType(_ eventType: FEventType, withBlock block: @escaping (FDataSnapshot) -> Void) {
        let b = SerialBlock(call: block)
        observeSingleEvent(of: eventType, with: { b.call($0) })
    }

    public func observeSingleEventOfType(_ eventType: FEventType, withBlock block: @escaping (FDataSnapshot) -> Void,
                                         withCancelBlock cancelBlock: @escaping (NSError) -> Void) {
        let b = SerialBlock(call: block), c = SerialBlock(call: cancelBlock)
        observeSingleEvent(of: eventType, with: { b.call($0) }, withCancel: { c.call(Self.nsError($0)) })
    }

    public func removeObserverWithHandle(_ handle: FirebaseHandle) { removeObserver(withHandle: handle) }

    public func queryOrderedByChild(_ key: String) -> FQuery { queryOrdered(byChild: key) }
    public func queryLimitedToFirst(_ limit: UInt) -> FQuery { queryLimited(toFirst: limit) }
    public func queryLimitedToLast(_ limit: UInt) -> FQuery { queryLimited(toLast: limit) }
    public func queryStartingAtValue(_ value: Any?) -> FQuery { queryStarting(atValue: value) }
    public func queryStartingAtValue(_ value: Any?, childKey: String?) -> FQuery { queryStarting(atValue: value, childKey: childKey) }
    public func queryEndingAtValue(_ value: Any?) -> FQuery { queryEnding(atValue: value) }
    public func queryEndingAtValue(_ value: Any?, childKey: String?) -> FQuery { queryEnding(atValue: value, childKey: childKey) }
    public func queryEqualToValue(_ value: Any?) -> FQuery { queryEqual(toValue: value) }
    public func queryEqualToValue(_ value: Any?, childKey: String?) -> FQuery { queryEqual(toValue: value, childKey: childKey) }

    private static func nsError(_ error: any Error) -> NSError {
        let text = (error as? DatabaseError)?.description ?? "\(error)"
        return NSError(domain: "com.firebase", code: 1, userInfo: [NSLocalizedDescriptionKey: text])
    }
}
