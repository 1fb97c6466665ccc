import EmberClient
import Foundation

// The Swift snippets of ../shared/seeds/read-and-write-data-ios.txt, in document order.
// Adapted: the document's extraction dropped lines holding only closing braces (and a few last
// lines); the braces are restored, marked `// restored`, and nothing else is added. Snippets the
// extraction cut short stay short: "update username" is missing entirely, the fan-out ends before
// `ref.updateChildValues(childUpdates)`, the increment ends before `updateChildValues(updates)`,
// and the cancel and transaction-completion blocks lost their bodies. Each snippet sits in a
// method of a view-controller-like class that provides what it refers to; FirebaseAuth's `Auth`
// and the app's `User` are stand-ins (AppStubs.swift).
final class IOSDoc {
    let user = Auth.CurrentUser(uid: SignedIn.uid)
    var username = "bea"
    let userID = SignedIn.uid
    let title = "Hi"
    let body = "Second post"
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

    // Read data by listening for value events
    func listenForPost() {
        refHandle = postRef.observe(DataEventType.value, with: { (snapshot) in
          let postDict = snapshot.value as? [String : AnyObject] ?? [:]
          // ...
        }) // restored
    }

    // Read once using getData()
    func readUsernameOnce() {
        self.ref.child("users/\(user.uid)/username").getData { (error, snapshot) in
            if let error = error {
                print("Error getting data \(error)")
            } // restored
            else if snapshot.exists() {
                print("Got data \(snapshot.value!)")
            } // restored
            else {
                print("No data available")
            } // restored
        } // restored
    }

    // Read data once with an observer
    func loadProfile() {
        let userID = Auth.auth().currentUser?.uid
        ref.child("users").child(userID!).observeSingleEvent(of: .value, with: { (snapshot) in
          // Get user value
          let value = snapshot.value as? NSDictionary
          let username = value?["username"] as? String ?? ""
          let user = User(username: username)

          // ...
          }) { (error) in
        } // restored
    }

    // Update specific fields (the document's snippet ends before `ref.updateChildValues`)
    func writeNewPost() -> [String: [String: String]] {
        guard let key = ref.child("posts").childByAutoId().key else { return [:] }
        let post = ["uid": userID,
                    "author": username,
                    "title": title,
                    "body": body]
        let childUpdates = ["/posts/\(key)": post,
                            "/user-posts/\(userID)/\(key)/": post]
        return childUpdates // restored: hands the updates to the test instead of dropping them
    }

    // Add a Completion Block
    func saveWithCompletion() {
        ref.child("users").child(user.uid).setValue(["username": username]) {
          (error:Error?, ref:DatabaseReference) in
          if let error = error {
            print("Data could not be saved: \(error).")
          } else {
            print("Data saved successfully!")
          } // restored
        } // restored
    }

    // Save data as transactions (`ref` here is the post's reference, as in the document)
    func toggleStar(ref: DatabaseReference) {
        ref.runTransactionBlock({ (currentData: MutableData) -> TransactionResult in
          if var post = currentData.value as? [String : AnyObject], let uid = Auth.auth().currentUser?.uid {
            var stars: Dictionary<String, Bool>
            stars = post["stars"] as? [String : Bool] ?? [:]
            var starCount = post["starCount"] as? Int ?? 0
            if let _ = stars[uid] {
              // Unstar the post and remove self from stars
              starCount -= 1
              stars.removeValue(forKey: uid)
            } else {
              // Star the post and add self to stars
              starCount += 1
              stars[uid] = true
            } // restored
            post["starCount"] = starCount as AnyObject?
            post["stars"] = stars as AnyObject?

            // Set value and report transaction success
            currentData.value = post

            return TransactionResult.success(withValue: currentData)
          } // restored
          return TransactionResult.success(withValue: currentData)
        }) { (error, committed, snapshot) in
          if let error = error {
          } // restored
        } // restored
    }

    // Atomic server-side increments (the document's snippet ends before `updateChildValues`)
    func incrementStarsUpdates(postID: String) -> [String: Any] {
        let updates = [
          "posts/\(postID)/stars/\(userID)": true,
          "posts/\(postID)/starCount": ServerValue.increment(1),
          "user-posts/\(postID)/stars/\(userID)": true,
          "user-posts/\(postID)/starCount": ServerValue.increment(1)
        ] as [String : Any]
        return updates // restored: hands the updates to the test
    }
}
