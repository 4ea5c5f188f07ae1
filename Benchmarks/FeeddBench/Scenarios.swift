import FeedClient
import FeedKit
import Foundation
import Glibc
import TestSupport

/// A randomuser feed on a loopback upstream, served by a fresh release daemon.
struct BenchWorld {
    let upstream: LoopbackUpstream
    let daemon: DaemonProcess

    init(upstreamLatency: Duration = .zero, usersPerPage: Int = 20, feedOptions: String, daemonOptions: String = "") throws {
        upstream = try LoopbackUpstream()
        upstream.setLatency(upstreamLatency)
        daemon = try DaemonProcess(
            config: Self.config(upstream: upstream, usersPerPage: usersPerPage, feedOptions: feedOptions, daemonOptions: daemonOptions))
    }

    /// A daemon's configuration: the feed `users` on `upstream`, then `moreTables` (a `[cluster]`).
    static func config(
        upstream: LoopbackUpstream, usersPerPage: Int = 20, feedOptions: String, daemonOptions: String = "", moreTables: String = ""
    ) -> String {
        """
        [daemon]
        max_clients = 20000
        log_level = "notice"
        \(daemonOptions)

        [feeds.users]
        source = "randomuser"
        url = "\(upstream.baseURL)/api/"
        results = \(usersPerPage)
        seed = "bench"
        \(feedOptions)

        \(moreTables)
        """
    }
}

enum Scenarios {
    /// `next` latency in ms (p50, p99) for one client that pauses between pages, the daemon's
    /// CPU time per page in ms (fetching, parsing and encoding it, and answering), and the first
    /// page's line as it was sent.
    static func nextLatency(
        prefetch: Int, samples: Int, pause: Duration
    ) throws -> (p50: Double, p99: Double, cpuPerPage: Double, firstPage: [UInt8]) {
        let world = try BenchWorld(upstreamLatency: .milliseconds(100), feedOptions: "prefetch = \(prefetch)\ncache_pages = 4096")
        let client = try world.daemon.connect()
        try client.send("next users")
        var firstPage: [UInt8] = []
        while !firstPage.starts(with: pageLineStart) {
            guard let line = try client.connection.readLine() else { throw TestFailure("the daemon closed the connection before the first page") }
            firstPage = line
        }
        let cpuBefore = try world.daemon.cpuSeconds()
        let latencies = try timedNexts(client, samples: samples, pause: pause)
        let cpuPerPage = (try world.daemon.cpuSeconds() - cpuBefore) * 1000 / Double(samples)
        return (quantile(latencies, 0.5), quantile(latencies, 0.99), cpuPerPage, firstPage)
    }

    /// The floor under a prefetched `next`: the same client code, pacing and page line, against a
    /// C server that answers each request line with the page at once (CReferences/page-echo.c).
    /// p50 and p99 in ms.
    static func echoLatency(page: [UInt8], samples: Int, pause: Duration) throws -> (p50: Double, p99: Double) {
        let echo = try CReference.build("page-echo.c")
        let directory = try TemporaryDirectory()
        let socketPath = directory.path("echo.sock")
        let pagePath = directory.path("page.json")
        guard FileManager.default.createFile(atPath: pagePath, contents: Data(page + [UInt8(ascii: "\n")])) else {
            throw TestFailure("cannot write \(pagePath)")
        }
        let server = try ReferenceServer(echo.executable, [socketPath, pagePath], ready: "listening")
        defer { server.stop() }
        let latencies = try timedNexts(try TestClient(path: socketPath), samples: samples, pause: pause)
        return (quantile(latencies, 0.5), quantile(latencies, 0.99))
    }

    private static let pageLineStart = Array(#"{"type":"page""#.utf8)

    /// `samples` times, after `pause`: the ms from sending `next users` to having the page line.
    static func timedNexts(_ client: TestClient, samples: Int, pause: Duration) throws -> [Double] {
        var latencies: [Double] = []
        for _ in 0..<samples {
            Thread.sleep(forTimeInterval: pause.seconds)
            let started = ContinuousClock.now
            try client.send("next users")
            // The raw line: parsing it here would measure the benchmark, not the daemon.
            guard let line = try client.connection.readLine(), line.starts(with: pageLineStart) else {
                throw TestFailure("expected a page line")
            }
            latencies.append((ContinuousClock.now - started).milliseconds)
        }
        return latencies
    }

    struct FanOut {
        let bytesPerSecond: Double
        let pageDeliveriesPerSecond: Double
        let publishToLastReceipt: Double
        /// One page line exactly as subscribers got it, for the Redis comparison.
        let samplePage: [UInt8]
        /// Another connection's `ping` round trip while the followers read the cached pages, p99 in ms.
        let pingP99: Double
        /// How many of those round trips there were (a few: the p99 is about the slowest).
        let pings: Int
    }

    /// `subscribers` followers of one feed: throughput over `pages` cached pages, then the time
    /// from the upstream answering each of `latencyPages` new pages to the last follower having it.
    /// The new pages come 150 ms apart; those answered before every follower had read the cached
    /// pages are left out, as they measure that backlog rather than the publishing.
    static func fanOut(subscribers: Int, pages: Int, latencyPages: Int) throws -> FanOut {
        let world = try BenchWorld(usersPerPage: 73, feedOptions: "prefetch = 0\ncache_pages = 4096")
        let warm = try world.daemon.connect()
        try warm.send("next users \(pages)")
        _ = try warm.read(until: "page")
        var samplePage: [UInt8] = []
        for page in 2...pages {
            let line = try warm.connection.readLine()!
            if page == 2 { samplePage = line + [UInt8(ascii: "\n")] }
        }
        world.upstream.setLatency(.milliseconds(150))
        let followers = try Followers(subscribers, on: [world.daemon.socketPath])
        let counter = followers.counter
        let pinger = try PingTimer(world.daemon)
        let started = try followers.send(#"{"op":"subscribe","feed":"users","follow":true}"#)
        // hello, subscribed, then the pages.
        guard counter.read(untilEachHas: 2 + pages, deadline: .now + .seconds(120)) else { throw TestFailure("fan-out timed out") }
        let pings = pinger.stop()
        let caughtUp = counter.lineCompletions[2 + pages]!.last
        let elapsed = (caughtUp - started).seconds
        let bytes = counter.byteCounts.reduce(0, +)
        guard counter.read(untilEachHas: 2 + pages + latencyPages, deadline: .now + .seconds(120)) else {
            throw TestFailure("latency pages timed out")
        }
        var latencies: [Double] = []
        for page in (pages + 1)...(pages + latencyPages) {
            guard let answered = world.upstream.received.first(where: { $0.query["page"] == String(page) })?.answeredAt,
                answered > caughtUp, let last = counter.lineCompletions[2 + page]?.last
            else { continue }
            latencies.append((last - answered).milliseconds)
        }
        withExtendedLifetime(followers) {}
        return FanOut(
            bytesPerSecond: Double(bytes) / elapsed, pageDeliveriesPerSecond: Double(subscribers * pages) / elapsed,
            publishToLastReceipt: quantile(latencies, 0.5), samplePage: samplePage, pingP99: quantile(pings, 0.99), pings: pings.count)
    }

    /// Private memory per idle connection (KiB), and the idle daemon's RssAnon and RSS (MiB).
    static func idleConnections(_ count: Int) throws -> (perConnection: Double, idleAnon: Double, idleRSS: Double) {
        let world = try BenchWorld(feedOptions: "")
        _ = try world.daemon.connect().request("ping")
        let idleAnon = try world.daemon.memory("RssAnon")
        let idleRSS = try world.daemon.memory("VmRSS")
        var connections: [FeedConnection] = []
        connections.reserveCapacity(count)
        for _ in 0..<count {
            let connection = try FeedConnection(path: world.daemon.socketPath)
            _ = try connection.readLine()
            connections.append(connection)
        }
        let check = try world.daemon.connect()
        guard try check.request("status")["clients"]?.integerValue == Int64(count + 1) else { throw TestFailure("clients missing") }
        let loaded = try world.daemon.memory("RssAnon")
        withExtendedLifetime(connections) {}
        return (Double(loaded - idleAnon) / Double(count), Double(idleAnon) / 1024, Double(idleRSS) / 1024)
    }

    /// Upstream requests per distinct page and per page delivered, `clients` reading `pages` each.
    static func upstreamSharing(clients: Int, pages: Int) throws -> (perDistinctPage: Double, perDelivery: Double) {
        let world = try BenchWorld(upstreamLatency: .milliseconds(20), feedOptions: "prefetch = 2")
        let readers = try (0..<clients).map { _ in try world.daemon.connect() }
        for reader in readers { try reader.send("next users \(pages)") }
        for reader in readers {
            _ = try reader.read(until: "page", timeout: .seconds(60))
            for _ in 1..<pages { _ = try reader.expect("page", timeout: .seconds(60)) }
        }
        let requests = world.upstream.received
        let distinct = Set(requests.compactMap { $0.query["page"] }).count
        return (Double(requests.count) / Double(max(distinct, 1)), Double(requests.count) / Double(clients * pages))
    }
}
