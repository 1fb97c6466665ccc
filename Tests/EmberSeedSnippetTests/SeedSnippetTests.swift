import EmberClient
import Foundation
import Testing

/// The seed documents' snippets, run one at a time: they share the node, the signed-in user and
/// the record of what they printed.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SeedDocuments {}

/// Runs the two current "Read and Write Data" documents' snippets (unchanged but for the
/// adaptations their files list) against a real emberd, through `Database.database()` as the
/// snippets call it, and checks what they did: the data stored on the node, what they printed,
/// what they read.
extension SeedDocuments { @Suite struct ReadAndWriteDocs {
    private func stored(_ path: String) async throws -> Any? { try await SeedNode.rest(path) }

    @Test func readAndWriteDataAppleAsync() async throws {
        _ = try await SeedNode.get()
        Printed.clear()
        User.made.withLock { $0.removeAll() }
        let postRef = Database.database().reference(withPath: "async/posts/p1")
        let doc = AppleAsyncDoc(postRef: postRef)
        #expect(doc.ref.url == Database.database().reference().url)

        doc.addUser()
        #expect(try await eventually { try await stored("users/\(SignedIn.uid)") as? [String: String] == ["username": "ann"] })
        doc.username = "ann2"
        doc.updateUsername()
        #expect(try await eventually { try await stored("users/\(SignedIn.uid)/username") as? String == "ann2" })

        doc.listenForPost()
        #expect(doc.refHandle != nil)
        postRef.removeObserver(withHandle: doc.refHandle!)

        await doc.readUsernameOnce(uid: SignedIn.uid)
        #expect(Printed.all.isEmpty, "getData failed: \(Printed.all)")

        doc.loadProfile()
        #expect(try await eventually { User.made.withLock { $0 } == ["ann2"] })

        doc.writeNewPost()
        #expect(try await eventually {
            guard let posts = try await stored("posts") as? [String: [String: String]], let (key, post) = posts.first else { return false }
            let mirror = try await stored("user-posts/\(SignedIn.uid)/\(key)") as? [String: String]
            return post == ["uid": SignedIn.uid, "author": "ann2", "title": "Hello", "body": "First post"] && mirror == post
        })

        await doc.saveWithCompletion()
        #expect(Printed.all == ["Data saved successfully!"])

        try await postRef.setValue(["title": "Hello", "starCount": 0])
        doc.toggleStar(ref: postRef)
        #expect(try await eventually {
            let post = try await stored("async/posts/p1") as? [String: Any]
            return post?["starCount"] as? Int == 1 && (post?["stars"] as? [String: Bool]) == [SignedIn.uid: true]
        })
        doc.toggleStar(ref: postRef)
        #expect(try await eventually {
            let post = try await stored("async/posts/p1") as? [String: Any]
            return post?["starCount"] as? Int == 0 && post?["stars"] == nil
        })

        doc.incrementStars(postID: "inc1")
        doc.incrementStars(postID: "inc1")
        #expect(try await eventually {
            let count = try await stored("posts/inc1/starCount") as? Int
            let mirrored = try await stored("user-posts/inc1/starCount") as? Int
            let star = try await stored("posts/inc1/stars/\(SignedIn.uid)") as? Bool
            return count == 2 && mirrored == 2 && star == true
        })
        #expect(Printed.all == ["Data saved successfully!"], "no snippet reported an error")
    }

    @Test func readAndWriteDataIOS() async throws {
        _ = try await SeedNode.get()
        Printed.clear()
        User.made.withLock { $0.removeAll() }
        let postRef = Database.database().reference(withPath: "ios/posts/p1")
        let doc = IOSDoc(postRef: postRef)

        doc.addUser()
        #expect(try await eventually { try await stored("users/\(SignedIn.uid)/username") as? String == "bea" })

        doc.listenForPost()
        #expect(doc.refHandle != nil)
        postRef.removeObserver(withHandle: doc.refHandle!)

        doc.readUsernameOnce()
        #expect(await Printed.wait { $0 == "Got data bea" })

        doc.loadProfile()
        #expect(try await eventually { User.made.withLock { $0 } == ["bea"] })

        let updates = doc.writeNewPost()
        #expect(updates.count == 2)
        #expect(updates.keys.contains { $0.hasPrefix("/posts/") })
        #expect(updates.values.allSatisfy { $0 == ["uid": SignedIn.uid, "author": "bea", "title": "Hi", "body": "Second post"] })

        Printed.clear()
        doc.username = "bea2"
        doc.saveWithCompletion()
        #expect(await Printed.wait { $0 == "Data saved successfully!" })
        #expect(try await stored("users/\(SignedIn.uid)/username") as? String == "bea2")

        try await postRef.setValue(["title": "Hi", "starCount": 5])
        doc.toggleStar(ref: postRef)
        #expect(try await eventually {
            let post = try await stored("ios/posts/p1") as? [String: Any]
            return post?["starCount"] as? Int == 6 && (post?["stars"] as? [String: Bool]) == [SignedIn.uid: true]
        })

        let increments = doc.incrementStarsUpdates(postID: "inc2")
        try await Database.database().reference().updateChildValues(increments)
        #expect(try await stored("posts/inc2/starCount") as? Int == 1)
        #expect(try await stored("user-posts/inc2/stars/\(SignedIn.uid)") as? Bool == true)
    }
} }
