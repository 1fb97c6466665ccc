// swift-tools-version: 6.1
import PackageDescription

// Layering (see ARCHITECTURE.md): EmberCore is pure; EmberStorage adds LMDB; EmberRaft is a pure
// consensus state machine; EmberNodeStore is the node's data port, EmberCluster the cluster
// runtime, EmberServer the node's fronts; EmberClient is the client library.
// EMBER_LIGHT=1 builds only the modules without network packages (core, storage, raft, client),
// which keeps edit-build-test loops on the pure layers to seconds.
let light = Context.environment["EMBER_LIGHT"] == "1"

// Platforms: the server targets are built for macOS 15 (and Linux). The client library's floor on
// Apple platforms is set by Synchronization's Mutex/Atomic (macOS 15, iOS 18, tvOS 18) above its
// WebSocket dependency's (hummingbird-websocket: macOS 14, iOS 17, tvOS 17) and GRDB 7's (iOS 13).
// No watchOS or visionOS: hummingbird-websocket does not support them. Apple builds are not
// exercised here (Linux only); see docs/CLIENT.md "Platforms".

var package = Package(
    name: "Ember",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18)],
    products: [
        .library(name: "EmberCore", targets: ["EmberCore"]),
        .library(name: "EmberClient", targets: ["EmberClient"]),
        .library(name: "EmberSyncTree", targets: ["EmberSyncTree"]),
        .executable(name: "emberd", targets: ["emberd"]),
        .executable(name: "ember-bench", targets: ["ember-bench"]),
        .executable(name: "ember", targets: ["ember"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // HTTP parts as HTTPTypes (what Hummingbird's HTTP/1 pipeline carries): the REST fast path.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        // Operations (issue 5): Prometheus metrics, and certificate generation in the `ember` CLI.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // Client token verification (HS256/RS256/ES256 JWTs, JWKS).
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        // The client's offline persistence (issue 14): SQLite, system library on Apple, libsqlite3 on Linux.
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB", path: "Sources/CLMDB", pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]),
        // zlib (Debian's zlib1g-dev): the point-in-time archive compresses its segments.
        .systemLibrary(
            name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        .target(name: "EmberCore"),
        // Writes are judged by the rules when applied, so storage evaluates them (EmberRules is pure).
        // swift-crypto for SHA-1 at machine speed (BoringSSL): the state hash scans the whole tree.
        .target(name: "EmberStorage", dependencies: [
            "EmberCore", "CLMDB", "EmberRules", "CZlib", .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .target(name: "EmberRaft"),
        // The decisions of a Raft host without its I/O (persist before send, deferred apply,
        // snapshot staging and install): what the cluster runtime and the simulator both drive.
        .target(name: "EmberRaftHost", dependencies: ["EmberRaft"]),
        // The seeded whole-cluster Raft simulator (faults, KV model, linearizability checker):
        // test support, kept out of the EmberRaft library the node links.
        .target(name: "EmberRaftSim", dependencies: ["EmberRaft", "EmberRaftHost"]),
        // Firebase security rules: parser, type checker and evaluator. Pure.
        .target(name: "EmberRules", dependencies: ["EmberCore"]),
        // REST URL / query parsing and wire-protocol framing: pure, so the fuzz targets build it alone.
        .target(name: "EmberProtocol", dependencies: ["EmberCore"]),
        // The node's data port (the `DataStore` the fronts talk to) and its single-node LMDB
        // implementation, with the identities and errors they share.
        .target(
            name: "EmberNodeStore",
            dependencies: [
                "EmberCore", "EmberStorage", "EmberRules", "EmberRaft",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The cluster runtime: the Raft host over LMDB, the peer transport over mutual TLS, and
        // the replicated `DataStore` the fronts use on a cluster member.
        .target(
            name: "EmberCluster",
            dependencies: [
                "EmberCore", "EmberStorage", "EmberRules", "EmberRaft", "EmberRaftHost", "EmberNodeStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "EmberServer",
            dependencies: [
                "EmberCore", "EmberRules", "EmberProtocol", "EmberNodeStore", "EmberCluster",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Pipelined wire responses are written as WebSocket frames straight to the channel.
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                // HTTP/1 parts as HTTPTypes on connections that are not upgraded to the wire protocol (WireServerChannel).
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "EmberRaft",
                // The HTTPS front and admin by client certificate (the peer channel's TLS is EmberCluster's).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // Trigger delivery (issue 36): POSTs to the receivers, HMAC-SHA256 signatures.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // The point-in-time archive in an S3-compatible object store (issue 37): SigV4 by hand
        // over the HTTP client trigger delivery already uses; emberd and ember open `s3://` with it.
        .target(
            name: "EmberArchiveS3",
            dependencies: [
                "EmberStorage",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // The client's event generation: pure, testable alone against the SDKs' spec cases.
        .target(name: "EmberSyncTree", dependencies: ["EmberCore"]),
        .target(
            name: "EmberClient",
            dependencies: [
                // EmberProtocol: the wire framing shared with the server (pure, no server code).
                "EmberCore", "EmberSyncTree", "EmberProtocol",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // A client process the persistence tests start and SIGKILL (Tests/EmberClientTests/PersistenceProcessTests).
        .executableTarget(
            name: "ember-persistence-probe",
            dependencies: [
                "EmberClient",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The node links jemalloc (Debian's libjemalloc-dev), which takes malloc over from glibc
        // for the whole process: a write's many small Swift allocations cost ~9% less CPU
        // (docs/benchmarks-history.md "jemalloc"); `/.ember/status` names the allocator in use.
        // emberd's jemalloc settings (its `malloc_conf` string): linked into emberd only.
        .target(name: "CEmberMallocConf", path: "Sources/CEmberMallocConf"),
        .executableTarget(
            name: "emberd",
            dependencies: [
                "EmberCore", "EmberServer", "EmberStorage", "EmberArchiveS3", "CEmberMallocConf",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]),
        .executableTarget(
            name: "ember-bench",
            dependencies: [
                "EmberCore", "EmberStorage", "EmberNodeStore", "EmberProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // HMAC-SHA256: the trigger bench's receiver checks the signatures.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),
        // The admin CLI: data, status, membership, certificates, backup/restore (issue 5).
        .executableTarget(
            name: "ember",
            dependencies: [
                "EmberCore", "EmberStorage", "EmberArchiveS3",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]),
        // Fuzzing (docs/TESTING.md "Fuzzing"): the harness bodies, one libFuzzer executable per parser
        // (built with `-sanitize=fuzzer -parse-as-library`, see `make fuzz`), and the corpus replay
        // that runs in the default suite.
        .target(name: "EmberFuzz", dependencies: ["EmberCore", "EmberProtocol", "EmberRules", "EmberStorage"]),
        .executableTarget(name: "FuzzJSON", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/JSON"),
        .executableTarget(name: "FuzzPath", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/Path"),
        .executableTarget(name: "FuzzREST", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/REST"),
        .executableTarget(name: "FuzzWire", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/Wire"),
        .executableTarget(name: "FuzzRules", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/Rules"),
        .executableTarget(name: "FuzzHTTPHead", dependencies: ["EmberFuzz"], path: "Sources/Fuzz/HTTPHead"),
        // What the test targets share (one copy each): free ports, the seeded generator and its
        // replayable seeds (SplitMix64 is EmberRaft's, re-exported), child processes.
        .target(name: "EmberTestSupport", dependencies: ["EmberRaft"], path: "Tests/EmberTestSupport"),
        .testTarget(name: "EmberFuzzTests", dependencies: ["EmberFuzz"], exclude: ["Corpus"]),
        .testTarget(name: "EmberCoreTests", dependencies: ["EmberCore", "EmberTestSupport"]),
        .testTarget(name: "EmberStorageTests", dependencies: ["EmberStorage", "EmberCore", "EmberRules", "EmberTestSupport"]),
        .testTarget(name: "EmberRaftTests", dependencies: ["EmberRaft", "EmberRaftSim"]),
        .testTarget(name: "EmberRaftHostTests", dependencies: ["EmberRaftHost", "EmberRaft"]),
        .testTarget(name: "EmberRulesTests", dependencies: ["EmberRules", "EmberCore", "EmberTestSupport"]),
        .testTarget(name: "EmberProtocolTests", dependencies: ["EmberProtocol", "EmberCore", "EmberTestSupport"]),
        .testTarget(name: "EmberNodeStoreTests", dependencies: [
            "EmberNodeStore", "EmberCore", "EmberTestSupport",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "EmberClusterTests", dependencies: [
            "EmberCluster", "EmberNodeStore", "EmberStorage", "EmberRaft", "EmberCore", "EmberTestSupport",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "EmberServerTests", dependencies: [
            "EmberServer", "EmberCore", "EmberRaft", "EmberStorage", "EmberRules", "EmberProtocol", "EmberNodeStore", "EmberCluster", "EmberTestSupport",
            .product(name: "JWTKit", package: "jwt-kit"),
        ]),
        .testTarget(name: "EmberArchiveS3Tests", dependencies: ["EmberArchiveS3", "EmberStorage"]),
        .testTarget(name: "EmberSyncTreeTests", dependencies: ["EmberSyncTree", "EmberCore"]),
        .testTarget(name: "EmberClientTests", dependencies: [
            "EmberClient", "EmberCore", "EmberSyncTree", "EmberProtocol", "EmberTestSupport",
            // Mints signed tokens for the auth tests.
            .product(name: "JWTKit", package: "jwt-kit"),
        ]),
        // The Swift snippets of the seed documents (../shared/seeds), compiled against the public
        // client API (plain `import EmberClient`) and run against a real emberd.
        .testTarget(name: "EmberSeedSnippetTests", dependencies: ["EmberClient", "EmberTestSupport"]),
    ]
)

if light {
    let heavy: Set<String> = ["EmberNodeStore", "EmberNodeStoreTests", "EmberCluster", "EmberServer", "emberd", "ember-bench", "ember", "EmberServerTests", "EmberClusterTests",
                              "EmberClient", "EmberClientTests", "ember-persistence-probe", "EmberSeedSnippetTests",
                              "EmberArchiveS3", "EmberArchiveS3Tests"]
    package.targets.removeAll { heavy.contains($0.name) }
    package.products.removeAll { heavy.contains($0.name) }
    package.dependencies.removeAll()
}
