import Foundation

// The legacy guide's Swift is Swift 1 (2015). Three of its language features are gone; these
// stand-ins let its snippets compile unchanged (they are not part of Ember's API):
// - `println`, the Swift 1 print function (recorded like `print`);
// - the `++` operator, removed in Swift 3;
// - reading `snapshot.value["height"]` / `snapshot.value.objectForKey("title")`: 2.x's `value`
//   was `AnyObject!`, which looked members up at run time; today's `value` is `Any?`.
// The one change made inside a snippet is `as FDataSnapshot` → `as! FDataSnapshot` (Swift 1.2
// made forced casts `as!`).

func println(_ item: Any?) {
    print(item.map { "\($0)" } ?? "nil")
}

postfix operator ++

@discardableResult
postfix func ++ (value: inout UInt) -> UInt {
    defer { value += 1 }
    return value
}

extension Optional where Wrapped == Any {
    subscript(key: String) -> Any? { (self as? [String: Any])?[key] }
    func objectForKey(_ key: String) -> Any? { self[key] }
}
