// swift-tools-version:6.0
import PackageDescription

// The layout shows the architecture (SPEC §7). Each module imports only those to its right:
//   Plugins/*       → FeedKit              (and at most a C library of its own: rss reads XML with libxml2)
//   FeedState       → FeedKit              durable state, SQLite
//   FeedEngine      → FeedState, FeedKit   the feeds, in small machines; FeedService, the fronts' only door
//   FeedServer      → FeedEngine, FeedClient, FeedKit     the Unix socket front (it never sees FeedState)
//   FeedHTTP        → FeedEngine, FeedServer, FeedKit     the HTTP front, on libmicrohttpd
//   FeedCluster     → FeedKit              NATS JetStream
//   FeedFleet       → FeedEngine, FeedCluster, FeedKit    the engine's FleetLink on FeedCluster (CSimdJSON's page-line check)
//   SystemdSupport  → FeedKit;   FeedClient → FeedKit
//   Daemon          → the engine, the fronts, the fleet, systemd glue and the plugins: only wiring
//   feedd → Daemon;   feedctl → FeedClient;   ConformanceKit → FeedKit
//   TestSupport → FeedClient, FeedKit, ConformanceKit, FeedCluster
let package = Package(
    name: "feedd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "feedd", targets: ["feedd"]),
        .executable(name: "feedctl", targets: ["feedctl"]),
        .executable(name: "feedd-bench", targets: ["FeeddBench"]),
        .library(name: "FeedKit", targets: ["FeedKit"]),
    ],
    targets: [
        // The adapter protocol and every type an adapter sees.
        .target(name: "FeedKit", dependencies: ["CSpawn", "CCurl", "CSimdJSON"]),
        // simdjson (Debian's libsimdjson-dev) behind a small C API: a JSON text checked in full and
        // indexed, so adapters keep the upstream's bytes for each value instead of building a tree.
        .target(name: "CSimdJSON", linkerSettings: [.linkedLibrary("simdjson")]),
        // The keeper each plugin process group runs under: a fork that only C can make safely.
        .target(name: "CSpawn"),

        // Source adapters: one module each, importing FeedKit only.
        .target(name: "FileAdapter", dependencies: ["FeedKit"], path: "Plugins/File"),
        .target(name: "RandomUserAdapter", dependencies: ["FeedKit"], path: "Plugins/RandomUser"),
        .target(name: "S3FeedAdapter", dependencies: ["FeedKit"], path: "Plugins/S3Feed"),
        .target(name: "ExecAdapter", dependencies: ["FeedKit"], path: "Plugins/Exec"),
        .target(name: "HTTPAdapter", dependencies: ["FeedKit"], path: "Plugins/HTTP"),
        .target(name: "RSSAdapter", dependencies: ["FeedKit", "CLibXML2"], path: "Plugins/RSS"),
        .target(name: "MergeAdapter", dependencies: ["FeedKit"], path: "Plugins/Merge"),

        // C libraries from Debian.
        // HTTP for the network adapters: the multi interface on one thread (see CurlTransport).
        .systemLibrary(
            name: "CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        // XML for the rss adapter: libxml2's SAX2 parser.
        .systemLibrary(
            name: "CLibXML2", pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(
            name: "CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),
        // The official NATS C client, for the fleet's shared state in JetStream (SPEC §8).
        .systemLibrary(
            name: "CNATS", pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]),
        // toml++ (Debian's libtomlplusplus-dev) compiled header-only into a tiny C API,
        // so a static feedd binary needs no libtomlplusplus at run time. NDEBUG always: toml++'s
        // internal assertions abort on some malformed input (a '\r' in a table header, found
        // by fuzzing) that its parser otherwise reports as an ordinary syntax error.
        .target(
            name: "CTOMLShim",
            cxxSettings: [.define("TOML_HEADER_ONLY", to: "1"), .define("TOML_EXCEPTIONS", to: "0"), .define("NDEBUG")]),

        // A fleet's shared leases, generations, cursors and pages in NATS JetStream (SPEC §8).
        .target(name: "FeedCluster", dependencies: ["FeedKit", "CNATS", "CSodium"]),
        // libsodium: the fleet key's MACs (HMAC-SHA-512-256), the Ed25519 behind NKey seeds, and the
        // HTTP front's constant-time comparison of bearer tokens.
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]),
        // Durable state: generations, pages, consumer cursors, in SQLite (WAL) with one writer thread.
        .target(name: "FeedState", dependencies: ["FeedKit", "CSQLite", "CSQLiteGathering"]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        // A VFS over SQLite's default one that writes a write-ahead log's frames in few large
        // writes instead of two per 4 KiB page (a 9 MB feed document's pages: 3,500 writes).
        .target(name: "CSQLiteGathering", dependencies: ["CSQLite"]),

        // Feeds, prefetch, shared fetches, cursors, configuration.
        .target(name: "FeedEngine", dependencies: ["FeedKit", "FeedState", "CTOMLShim"]),
        // The engine's FleetLink on FeedCluster's JetStream store: shared generations, pages, cursors.
        .target(name: "FeedFleet", dependencies: ["FeedEngine", "FeedCluster", "FeedKit", "CSimdJSON"]),
        // The Unix socket, connections, the line protocol and flow control.
        .target(name: "FeedServer", dependencies: ["FeedEngine", "FeedKit", "FeedClient", "CEventLoop"]),
        // epoll, eventfd and libdispatch's main-queue hooks, for the event loop.
        .systemLibrary(name: "CEventLoop"),
        // glibc's mallopt, so that large blocks go back to the system when freed (Daemon).
        .systemLibrary(name: "CMalloc"),
        // The HTTP front (SPEC §11): JSON pages, Server-Sent Events and the infinite-scroll page,
        // served by libmicrohttpd from the daemon's own event loop.
        .target(name: "FeedHTTP", dependencies: ["FeedEngine", "FeedServer", "FeedKit", "CMicroHTTPD", "CSodium"]),
        // libmicrohttpd, its TLS through GnuTLS (libsodium, above, compares bearer tokens in constant time).
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]),
        // sd_notify, the watchdog, socket activation and journald-style logging.
        .target(name: "SystemdSupport", dependencies: ["CSystemd", "FeedKit"]),
        // A small blocking client for the socket, used by feedctl and the tests.
        .target(name: "FeedClient", dependencies: ["FeedKit"]),
        // The checks every adapter must pass: its tests run them, and `feedd plugin check` on exec plugins.
        .target(name: "ConformanceKit", dependencies: ["FeedKit"]),
        // The daemon's wiring: command line, config lookup, adapters, signals.
        .target(
            name: "Daemon",
            dependencies: [
                "FeedKit", "FeedEngine", "FeedState", "FeedServer", "FeedHTTP", "SystemdSupport", "FeedFleet", "CMalloc",
                "FileAdapter", "RandomUserAdapter", "S3FeedAdapter", "ExecAdapter", "HTTPAdapter", "RSSAdapter",
                "MergeAdapter", "ConformanceKit",
            ]),

        .executableTarget(name: "feedd", dependencies: ["Daemon"]),
        .executableTarget(name: "feedctl", dependencies: ["FeedClient", "FeedKit"]),

        // FeedCluster: tests mint NATS JWTs with its NKeys.
        .target(name: "TestSupport", dependencies: ["FeedClient", "FeedKit", "ConformanceKit", "FeedCluster"], path: "Tests/TestSupport"),
        // The benchmark: the real daemon against a loopback upstream (swift run -c release feedd-bench).
        // It depends on feedd only so that building it builds the daemon it measures.
        .executableTarget(name: "FeeddBench", dependencies: ["TestSupport", "FeedClient", "FeedKit", "FeedCluster", "feedd"], path: "Benchmarks/FeeddBench"),
        .testTarget(name: "FeedKitTests", dependencies: ["FeedKit", "TestSupport"]),
        .testTarget(name: "FileAdapterTests", dependencies: ["FileAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "RandomUserAdapterTests", dependencies: ["RandomUserAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "S3FeedAdapterTests", dependencies: ["S3FeedAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "ExecAdapterTests", dependencies: ["ExecAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "HTTPAdapterTests", dependencies: ["HTTPAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "RSSAdapterTests", dependencies: ["RSSAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "MergeAdapterTests", dependencies: ["MergeAdapter", "FeedKit", "TestSupport"]),
        .testTarget(name: "FeedEngineTests", dependencies: ["FeedEngine", "FeedState", "FeedKit", "FileAdapter"]),
        .testTarget(name: "FeedClusterTests", dependencies: ["FeedCluster", "FeedKit", "TestSupport"]),
        .testTarget(name: "FeedStateTests", dependencies: ["FeedState", "FeedKit", "TestSupport"]),
        // Writes to a state store until killed; FeedStateTests kill it with SIGKILL mid-commit.
        .executableTarget(name: "feedd-state-torture", dependencies: ["FeedState", "FeedKit"], path: "Tests/StateTorture"),
        .testTarget(name: "FeedServerTests", dependencies: ["FeedServer", "FeedKit"]),
        .testTarget(name: "FeedHTTPTests", dependencies: ["FeedHTTP", "FeedEngine", "FeedServer", "FeedKit"]),
        .testTarget(name: "SystemdSupportTests", dependencies: ["SystemdSupport", "FeedKit"]),
        // FeedCluster: FleetTests read the pages feedd publishes as any NATS client would.
        .testTarget(name: "FeeddTests", dependencies: ["TestSupport", "FeedClient", "FeedKit", "FeedCluster"]),
    ],
    cxxLanguageStandard: .cxx17
)
