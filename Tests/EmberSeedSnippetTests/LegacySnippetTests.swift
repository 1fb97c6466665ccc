import EmberClient
import Foundation
import Testing

/// Runs the legacy guide's snippets against a node holding the guide's data, and checks what
/// they print. The guide's databases (`docs-examples`, `dinosaur-facts`) are pointed at the node
/// with `useEmulator` before the snippets use them (the adapted setup).
extension SeedDocuments { @Suite struct RetrievingDataLegacyDoc {
    static let posts = "web/saving-data/fireblog/posts"
    static let postsURL = "https://docs-examples.firebaseio.com/" + posts

    static let setUp = Task { () throws -> Void in
        let node = try await SeedNode.get()
        for name in ["docs-examples", "dinosaur-facts"] {
            Database.database(url: "https://\(name).firebaseio.com").useEmulator(withHost: "127.0.0.1", port: node.port)
        }
        try await SeedNode.put(posts, ns: "docs-examples", json: #"""
            {"p1": {"author": "alanisawesome", "title": "The Turing Machine"},
             "p2": {"author": "gracehop", "title": "The nano-stack"}}
            """#)
        try await SeedNode.put("", ns: "dinosaur-facts", json: #"""
            {"dinosaurs": {
              "bruhathkayosaurus": {"height": 25, "length": 44, "weight": 135000},
              "lambeosaurus": {"height": 2.1, "length": 12.5, "weight": 5000},
              "linhenykus": {"height": 0.6, "length": 1, "weight": 3},
              "pterodactyl": {"height": 0.6, "length": 0.8, "weight": 2},
              "stegosaurus": {"height": 4, "length": 9, "weight": 2500},
              "triceratops": {"height": 3, "length": 8, "weight": 11000}},
             "scores": {"bruhathkayosaurus": 55, "lambeosaurus": 21, "linhenykus": 80,
                        "pterodactyl": 93, "stegosaurus": 5, "triceratops": 22}}
            """#)
    }

    /// Runs `snippet` and expects exactly `expected` printed.
    private func expectPrints(_ expected: [String], sourceLocation: SourceLocation = #_sourceLocation, _ snippet: () -> Void) async {
        Printed.clear()
        snippet()
        let ok = await Printed.wait(for: expected)
        #expect(ok, "printed \(Printed.all), expected \(expected)", sourceLocation: sourceLocation)
    }

    @Test func blogPostEvents() async throws {
        try await Self.setUp.value
        let posts = Firebase(url: Self.postsURL)
        defer { posts.removeAllObservers() }

        Printed.clear()
        LegacyDoc.readPosts()
        #expect(await Printed.wait { $0.contains("The Turing Machine") && $0.contains("gracehop") })
        posts.removeAllObservers()

        await expectPrints(["alanisawesome", "The Turing Machine", "gracehop", "The nano-stack"]) { LegacyDoc.childAdded() }
        posts.removeAllObservers()

        await expectPrints([]) { LegacyDoc.childChanged() }
        _ = try await posts.getData()
        Printed.clear()
        try await SeedNode.put(Self.posts + "/p1/title", ns: "docs-examples", json: #""The Turing Machine, 2nd ed.""#)
        #expect(await Printed.wait(for: [#"The updated post title is Optional("The Turing Machine, 2nd ed.")"#]))
        posts.removeAllObservers()

        LegacyDoc.childRemoved()
        _ = try await posts.getData()
        Printed.clear()
        try await SeedNode.put(Self.posts + "/p2", ns: "docs-examples", json: "null")
        #expect(await Printed.wait(for: [#"The blog post titled Optional("The nano-stack")"#]))
        posts.removeAllObservers()

        Printed.clear()
        LegacyDoc.eventGuarantees()
        #expect(await eventually { Printed.all.last == "initial data loaded! true" })
        #expect(Printed.all.count == 2 && Printed.all[0].hasPrefix("added -> "))
        posts.removeAllObservers()

        // Detaching, reading once, checking for null: they run; nothing of theirs prints.
        Printed.clear()
        LegacyDoc.detach(ref: posts)
        LegacyDoc.detachAll(ref: posts)
        LegacyDoc.readOnce(ref: posts)
        LegacyDoc.checkNull(ref: Firebase(url: "https://docs-examples.firebaseio.com/nothing-here"))
        // Barrier: a single-event observer registered after the snippets' is called after every
        // event raised for theirs on the same data (one callback queue, in order).
        _ = await Firebase(url: "https://docs-examples.firebaseio.com/nothing-here").observeSingleEvent(of: .value)
        _ = await posts.observeSingleEvent(of: .value)
        #expect(Printed.all.allSatisfy { $0.hasPrefix("Snapshot value: ") })
    }

    @Test func dinosaurQueries() async throws {
        try await Self.setUp.value
        await expectPrints(["linhenykus was 0.6 meters tall", "pterodactyl was 0.6 meters tall", "lambeosaurus was 2.1 meters tall",
                            "triceratops was 3.0 meters tall", "stegosaurus was 4.0 meters tall", "bruhathkayosaurus was 25.0 meters tall"]) {
            LegacyDoc.orderByHeight()
        }
        // No dimensions/height anywhere in the guide's flat data: every child sorts as null, by key.
        await expectPrints(["bruhathkayosaurus was 25.0 meters tall", "lambeosaurus was 2.1 meters tall", "linhenykus was 0.6 meters tall",
                            "pterodactyl was 0.6 meters tall", "stegosaurus was 4.0 meters tall", "triceratops was 3.0 meters tall"]) {
            LegacyDoc.orderByNestedHeight()
        }
        await expectPrints(["bruhathkayosaurus was 25.0", "lambeosaurus was 2.1", "linhenykus was 0.6",
                            "pterodactyl was 0.6", "stegosaurus was 4.0", "triceratops was 3.0"]) { LegacyDoc.orderByKey() }
        await expectPrints(["stegosaurus", "lambeosaurus", "triceratops", "bruhathkayosaurus", "linhenykus", "pterodactyl"]
            .map { "The \($0) dinosaur's score is \(["stegosaurus": 5, "lambeosaurus": 21, "triceratops": 22, "bruhathkayosaurus": 55, "linhenykus": 80, "pterodactyl": 93][$0]!)" }) {
            LegacyDoc.orderByValue()
        }
        await expectPrints(["triceratops", "bruhathkayosaurus"]) { LegacyDoc.twoHeaviest() }
        await expectPrints(["linhenykus", "pterodactyl"]) { LegacyDoc.twoShortest() }
        await expectPrints(["The bruhathkayosaurus dinosaur's score is Optional(55)", "The linhenykus dinosaur's score is Optional(80)",
                            "The pterodactyl dinosaur's score is Optional(93)"]) { LegacyDoc.leaderboard() }
        await expectPrints(["triceratops", "stegosaurus", "bruhathkayosaurus"]) { LegacyDoc.atLeastThreeMeters() }
        await expectPrints(["bruhathkayosaurus", "lambeosaurus", "linhenykus", "pterodactyl"]) { LegacyDoc.upToPterodactyl() }
        await expectPrints(["bruhathkayosaurus"]) { LegacyDoc.startingWithB() }
        await expectPrints(["bruhathkayosaurus"]) { LegacyDoc.exactly25Meters() }
        await expectPrints(["The dinosaur just shorter than the stegasaurus is triceratops"]) { LegacyDoc.justShorterThanStegosaurus() }
    }
} }
