import Foundation
import Synchronization

// The seeds' code runs inside an app that signs users in with FirebaseAuth and has its own model
// types. Ember has no auth SDK, so these stand in for what the snippets use of it (adapted: the
// snippets themselves are unchanged).

/// FirebaseAuth's `Auth.auth().currentUser?.uid`, signed in as `SignedIn.uid`.
final class Auth: Sendable {
    struct CurrentUser: Sendable { let uid: String }
    static func auth() -> Auth { Auth() }
    var currentUser: CurrentUser? { CurrentUser(uid: SignedIn.uid) }
}

enum SignedIn {
    static let uid = "user-7"
}

/// The blogging app's model type (`let user = User(username: username)`); records what was made.
struct User {
    static let made = Mutex<[String]>([])
    let username: String
    init(username: String) {
        self.username = username
        User.made.withLock { $0.append(username) }
    }
}
