import EmberClient
import Foundation

// The Swift snippets of ../shared/seeds/read-and-write-data-apple-async.txt, in document order.
// Adapted: the document's text flattened each snippet onto one line, so line breaks are restored
// (a `// ...` comment would otherwise swallow the closing `})`); each snippet sits in a method of
// a view-controller-like class that provides what it refers to (`ref`, `user`, `postRef`, …).
// FirebaseAuth's `Auth` and the app's `User` are stand-ins (AppStubs.swift). Nothing else changed.
final class AppleAsyncDoc {
    let user = Auth.CurrentUser(uid: SignedIn.uid)
    var username = "ann"
    let userID = SignedIn.uid
    let title = "Hello"
    let body = "First post"
    var postRef: DatabaseReference
    var refHandle: DatabaseHandle?

    init(postRef: DatabaseReference) {
        self.postRef = postRef
        getReference()
    }

    // Get a FIRDatabaseReference
    var ref: DatabaseReference!
    func getReference() {
        ref = Database.database().reference()
    }

    // Basic write operations
    func addUser() {
        self.ref.child("users").child(user.uid).setValue(["username": username])
    }

    func updateUsername() {
        self.ref.child("users/\(user.uid)/username").setValue(username)
    }

    // Read data by listening for value events
    func listenForPost() {
        refHandle = postRef.observe(DataEventType.value, with: { snapshot in
            // ...
        })
    }

    // Read once using getData()
    func readUsernameOnce(uid: String) async {
        do {
            let snapshot = try await ref.child("users/\(uid)/username").getData()
            let userName = snapshot.value as? String ?? "Unknown"
        } catch {
            print(error)
        }
    }

    // Read data once with an observer
    func loadProfile() {
        let userID = Auth.auth().currentUser?.uid
        ref.child("users").child(userID!).observeSingleEvent(of: .value, with: { snapshot in
            // Get user value
            let value = snapshot.value as? NSDictionary
            let username = value?["username"] as? String ?? ""
            let user = User(username: username)

            // ...
        }) { error in
            print(error.localizedDescription)
        }
    }

    // Update specific fields
    func writeNewPost() {
        guard let key = ref.child("posts").childByAutoId().key else { return }
        let post = ["uid": userID,
                    "author": username,
                    "title": title,
                    "body": body]
        let childUpdates = ["/posts/\(key)": post,
                            "/user-posts/\(userID)/\(key)/": post]
        ref.updateChildValues(childUpdates)
    }

    // Add a Completion Block
    func saveWithCompletion() async {
        do {
            try await ref.child("users").child(user.uid).setValue(["username": username])
            print("Data saved successfully!")
        } catch {
            print("Data could not be saved: \(error).")
        }
    }

    // Save data as transactions (`ref` here is the post's reference, as in the document)
    func toggleStar(ref: DatabaseReference) {
        ref.runTransactionBlock({ (currentData: MutableData) -> TransactionResult in
            if var post = currentData.value as? [String: AnyObject],
               let uid = Auth.auth().currentUser?.uid {
                var stars: [String: Bool]
                stars = post["stars"] as? [String: Bool] ?? [:]
                var starCount = post["starCount"] as? Int ?? 0
                if let _ = stars[uid] {
                    // Unstar the post and remove self from stars
                    starCount -= 1
                    stars.removeValue(forKey: uid)
                } else {
                    // Star the post and add self to stars
                    starCount += 1
                    stars[uid] = true
                }
                post["starCount"] = starCount as AnyObject?
                post["stars"] = stars as AnyObject?

                // Set value and report transaction success
                currentData.value = post
                return TransactionResult.success(withValue: currentData)
            }
            return TransactionResult.success(withValue: currentData)
        }) { error, committed, snapshot in
            if let error = error {
                print(error.localizedDescription)
            }
        }
    }

    // Atomic server-side increments
    func incrementStars(postID: String) {
        let updates = [
            "posts/\(postID)/stars/\(userID)": true,
            "posts/\(postID)/starCount": ServerValue.increment(1),
            "user-posts/\(postID)/stars/\(userID)": true,
            "user-posts/\(postID)/starCount": ServerValue.increment(1)
        ] as [String : Any]
        Database.database().reference().updateChildValues(updates)
    }
}
