import EmberClient
import Foundation

// The Swift snippets of ../shared/seeds/retrieving-data-legacy-ios.txt (Firebase 2.x, Swift 1),
// in document order, each in a method of its own. Unchanged but for `as!` in the last one (see
// Swift1Shims.swift); the 2.x API names are Ember's (Legacy/Firebase2Names.swift). The URLs are
// the document's: the test points those databases at its node with `useEmulator` first.
enum LegacyDoc {
    // Getting Started
    static func readPosts() {
        // Get a reference to our posts
        var ref = Firebase(url:"https://docs-examples.firebaseio.com/web/saving-data/fireblog/posts")

        // Attach a closure to read the data at our posts reference
        ref.observeEventType(.Value, withBlock: { snapshot in
            println(snapshot.value)
        }, withCancelBlock: { error in
            println(error.description)
        })
    }

    // Child Added
    static func childAdded() {
        // Get a reference to our posts
        var ref = Firebase(url:"https://docs-examples.firebaseio.com/web/saving-data/fireblog/posts")

        // Retrieve new posts as they are added to your database
        ref.observeEventType(.ChildAdded, withBlock: { snapshot in
            println(snapshot.value.objectForKey("author"))
            println(snapshot.value.objectForKey("title"))
        })
    }

    // Child Changed
    static func childChanged() {
        // Get a reference to our posts
        var ref = Firebase(url:"https://docs-examples.firebaseio.com/web/saving-data/fireblog/posts")

        // Get the data on a post that has changed
        ref.observeEventType(.ChildChanged, withBlock: { snapshot in
            let title = snapshot.value.objectForKey("title") as? String
            println("The updated post title is \(title)")
        })
    }

    // Child Removed
    static func childRemoved() {
        // Get a reference to our posts
        var ref = Firebase(url:"https://docs-examples.firebaseio.com/web/saving-data/fireblog/posts")

        // Get the data on a post that has been removed
        ref.observeEventType(.ChildRemoved, withBlock: { snapshot in
            let title = snapshot.value.objectForKey("title") as? String
            println("The blog post titled \(title)")
        })
    }

    // Event Guarantees
    static func eventGuarantees() {
        // Get a reference to our posts
        var ref = Firebase(url:"https://docs-examples.firebaseio.com/web/saving-data/fireblog/posts")
        var count:UInt = 0

        // Retrieve new posts as they are added to the database
        ref.observeEventType(.ChildAdded, withBlock: { snapshot in
            count++
            println("added -> \(snapshot.value)")
        })

        // snapshot.childrenCount will always equal count since snapshot.value will include every FEventTypeChildAdded event
        // triggered before this point.
        ref.observeEventType(.Value, withBlock: { snapshot in
          println("initial data loaded! \(count == snapshot.childrenCount)")
        })
    }

    // Detaching Blocks
    static func detach(ref: Firebase) {
        var handle = ref.observeEventType(.Value, withBlock: { snapshot in
            println("Snapshot value: \(snapshot.value)")
        })

        ref.removeObserverWithHandle(handle)
    }

    static func detachAll(ref: Firebase) {
        ref.removeAllObservers()
    }

    // Reading Data Once
    static func readOnce(ref: Firebase) {
        ref.observeSingleEventOfType(.Value, withBlock: { snapshot in
            // do some stuff once
        })
    }

    // Checking for NSNull
    static func checkNull(ref: Firebase) {
        ref.observeEventType(.Value, withBlock: { snap in

          if snap.value is NSNull {
            // The value is null
          }

        })
    }

    // Ordering using a child key
    static func orderByHeight() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("height").observeEventType(.ChildAdded, withBlock: { snapshot in
            if let height = snapshot.value["height"] as? Double {
                println("\(snapshot.key) was \(height) meters tall")
            }
        })
    }

    static func orderByNestedHeight() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("dimensions/height").observeEventType(.ChildAdded, withBlock: { snapshot in
            if let height = snapshot.value["height"] as? Double {
                println("\(snapshot.key) was \(height) meters tall")
            }
        })
    }

    // Ordering by key name
    static func orderByKey() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByKey().observeEventType(.ChildAdded, withBlock: { snapshot in
            if let height = snapshot.value["height"] as? Double {
                println("\(snapshot.key) was \(height)")
            }
        })
    }

    // Ordering by value
    static func orderByValue() {
        let scoresRef = Firebase(url:"https://dinosaur-facts.firebaseio.com/scores")
        scoresRef.queryOrderedByValue().observeEventType(.ChildAdded, withBlock: { snapshot in
            if let score = snapshot.value as? Int {
                println("The \(snapshot.key) dinosaur's score is \(score)")
            }
        })
    }

    // Limit Queries
    static func twoHeaviest() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("weight").queryLimitedToLast(2)
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    static func twoShortest() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("height").queryLimitedToFirst(2)
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    static func leaderboard() {
        let scoresRef = Firebase(url:"https://dinosaur-facts.firebaseio.com/scores")
        scoresRef.queryOrderedByValue().queryLimitedToLast(3).observeEventType(.ChildAdded, withBlock: { snapshot in

            println("The \(snapshot.key) dinosaur's score is \(snapshot.value)")
        })
    }

    // Range Queries
    static func atLeastThreeMeters() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("height").queryStartingAtValue(3)
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    static func upToPterodactyl() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByKey().queryEndingAtValue("pterodactyl")
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    static func startingWithB() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByKey().queryStartingAtValue("b").queryEndingAtValue("b\u{f8ff}")
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    static func exactly25Meters() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.queryOrderedByChild("height").queryEqualToValue(25)
           .observeEventType(.ChildAdded, withBlock: { snapshot in

            println(snapshot.key)
        })
    }

    // Putting it all together
    static func justShorterThanStegosaurus() {
        let ref = Firebase(url:"https://dinosaur-facts.firebaseio.com/dinosaurs")
        ref.childByAppendingPath("stegosaurus").childByAppendingPath("height")
            .observeEventType(.Value, withBlock: { stegosaurusHeightSnapshot in
                if let favoriteDinoHeight = stegosaurusHeightSnapshot.value as? Double {
                    let queryRef = ref.queryOrderedByChild("height").queryEndingAtValue(favoriteDinoHeight).queryLimitedToLast(2)
                    queryRef.observeSingleEventOfType(.Value, withBlock: { querySnapshot in
                        if querySnapshot.childrenCount == 2 {
                            let child: FDataSnapshot = querySnapshot.children.nextObject() as! FDataSnapshot
                            println("The dinosaur just shorter than the stegasaurus is \(child.key)");
                        } else {
                            println("The stegosaurus is the shortest dino");
                        }
                    })
                }
            })
    }
}
