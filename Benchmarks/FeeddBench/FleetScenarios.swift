import FeedClient
import FeedCluster
import FeedKit
import Foundation
import Glibc
import TestSupport

/// A fleet (SPEC §8): three release daemons share the randomuser feed `users` through one
/// JetStream nats-server on loopback, one upstream adding 100 ms to every page, 300 clients on
/// each instance; and a standalone daemon, the same feed and clients, to compare with.
enum FleetScenarios {
    struct Fleet {
        /// Upstream requests over the whole run, per distinct page requested.
        let requestsPerPage: Double
        /// A prefetched `next` (ms) on an instance that did not fetch the page, and on the
        /// standalone daemon, with the timed readers alone.
        let next: Latencies
        let standaloneNext: Latencies
        /// The same while every daemon also sends its pages to its followers.
        let loadedNext: Latencies
        let loadedStandaloneNext: Latencies
        /// From the upstream's answer to each follower (ms) on an instance that did not fetch the
        /// page; on the standalone daemon.
        let follower: Latencies
        let standaloneFollower: Latencies
        /// Pages the fleet published a second while its followers read them.
        let livePagesPerSecond: Double
        /// Bytes a second one instance delivers to its followers from its cache, on average.
        let fanOutPerInstance: Double
        /// The same, on the standalone daemon.
        let fanOutStandalone: Double
    }

    /// Latency samples (ms) and their quantiles.
    struct Latencies {
        var samples: [Double] = []
        var p50: Double { quantile(samples, 0.5) }
        var p99: Double { quantile(samples, 0.99) }
    }

    static let clusterName = "bench"
    static let feedOptions = "prefetch = 3\ncache_pages = 4096"

    /// `clients` followers on each of `instances` daemons and on a standalone one; `cachedPages`
    /// read before the fan-out from the cache is timed; then new pages, `quietSeconds` with one
    /// timed reader a daemon, and `liveSeconds` with the followers too.
    static func fleet(
        instances count: Int = 3, clients: Int = 300, cachedPages: Int = 100, quietSeconds: Double = 10, liveSeconds: Double = 15
    ) async throws -> Fleet {
        let nats = try NATSServer()
        defer { nats.stop() }
        let upstream = try LoopbackUpstream()
        let cluster = """
            [cluster]
            nats = ["\(nats.url)"]
            name = "\(clusterName)"
            """
        let instances = try (0..<count).map { _ in
            try DaemonProcess(config: BenchWorld.config(upstream: upstream, feedOptions: feedOptions, moreTables: cluster))
        }
        for instance in instances { _ = try instance.log.waitForLine(containing: "joined the fleet") }
        let standalone = try BenchWorld(feedOptions: feedOptions)
        // The fleet's instances, then the standalone daemon, each with its upstream.
        let daemons = instances + [standalone.daemon]
        let upstreams = instances.map { _ in upstream } + [standalone.upstream]

        // The cached pages: fetched once for the fleet (and once by the standalone daemon) without
        // latency, as only the fan-out from the cache is timed, then read on every daemon.
        for daemon in daemons { try read(cachedPages, from: daemon) }
        for upstream in [upstream, standalone.upstream] { upstream.setLatency(.milliseconds(100)) }
        // The best of three rounds, each going through every daemon in turn, so that a burst of
        // another process on the shared cores falls on the fleet and the standalone daemon alike.
        var fanOuts = Array(repeating: 0.0, count: daemons.count)
        for _ in 1...3 {
            for (index, daemon) in daemons.enumerated() {
                fanOuts[index] = max(fanOuts[index], try fanOut(clients, pages: cachedPages, from: daemon))
            }
        }
        let standaloneFanOut = fanOuts.removeLast()

        // Live pages, the fleet's and the standalone daemon's at once, so that both see the same
        // load: first the timed readers alone, then with the followers.
        let quiet = try LivePhase(daemons, upstreams, followers: 0, seconds: quietSeconds)
        let loaded = try LivePhase(daemons, upstreams, followers: clients, seconds: liveSeconds)
        let fleetPages = (quiet.after[0] + 1)...max(loaded.newest[0], loaded.timed.prefix(count).joined().map(\.page).max() ?? 0)
        let fetchers = try await fetchingInstances(
            of: fleetPages, generation: quiet.timed[0].first?.generation ?? 1, nats: nats, pids: instances.map(\.pid))
        /// Where page `page` of daemon `daemon` came from, as seen there.
        func origin(_ daemon: Int, _ page: Int) -> Origin? {
            guard daemon < count else { return .standalone }
            return fetchers[page].map { $0 == daemon ? .fetchedHere : .elsewhere }
        }
        let quietNext = quiet.nextLatencies(origin)
        let loadedNext = loaded.nextLatencies(origin)
        let followerLatencies = loaded.followerLatencies(origin)

        let requests = upstream.received
        let requestedPages = requests.compactMap { $0.query["page"].flatMap(Int.init) }
        let requestedTwice = Dictionary(grouping: requestedPages, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        let fetchedBy = (0..<count).map { instance in fetchers.values.filter { $0 == instance }.count }
        FileHandle.standardError.write(
            Data(
                """
                  fleet: live pages \(fleetPages), fetched by instance \(fetchedBy), requested twice \(requestedTwice); \
                cached fan-out MB/s by instance \(fanOuts.map { format($0 / 1e6) }); on the instance that fetched the page: \
                next p99 \(format(quietNext[.fetchedHere, default: Latencies()].p99)) ms, with followers \
                \(format(loadedNext[.fetchedHere, default: Latencies()].p99)) ms, \
                follower p50 \(format(followerLatencies.each[.fetchedHere, default: Latencies()].p50)) ms, \
                p99 \(format(followerLatencies.each[.fetchedHere, default: Latencies()].p99)) ms; \
                first follower p50 here \(format(followerLatencies.first[.fetchedHere, default: Latencies()].p50)) ms, \
                elsewhere \(format(followerLatencies.first[.elsewhere, default: Latencies()].p50)) ms, \
                standalone \(format(followerLatencies.first[.standalone, default: Latencies()].p50)) ms; \
                timed next samples elsewhere \(quietNext[.elsewhere, default: Latencies()].samples.count), \
                with followers \(loadedNext[.elsewhere, default: Latencies()].samples.count)

                """.utf8))
        return Fleet(
            requestsPerPage: Double(requests.count) / Double(max(Set(requestedPages).count, 1)),
            next: quietNext[.elsewhere, default: Latencies()], standaloneNext: quietNext[.standalone, default: Latencies()],
            loadedNext: loadedNext[.elsewhere, default: Latencies()], loadedStandaloneNext: loadedNext[.standalone, default: Latencies()],
            follower: followerLatencies.each[.elsewhere, default: Latencies()],
            standaloneFollower: followerLatencies.each[.standalone, default: Latencies()],
            livePagesPerSecond: Double(loaded.newest[0] - loaded.after[0]) / loaded.elapsed,
            fanOutPerInstance: fanOuts.reduce(0, +) / Double(fanOuts.count), fanOutStandalone: standaloneFanOut)
    }

    /// Some seconds of new pages on every daemon at once: `followers` follow each daemon from
    /// the newest page its upstream was asked for, and one timed reader a daemon reads after
    /// that same page.
    private struct LivePhase {
        let clients: Int
        let upstreams: [LoopbackUpstream]
        let after: [Int]
        let followers: Followers
        let subscribedAt: ContinuousClock.Instant
        let elapsed: Double
        /// The newest page every follower of each daemon has.
        let newest: [Int]
        let timed: [[TimedReader.Sample]]

        init(_ daemons: [DaemonProcess], _ upstreams: [LoopbackUpstream], followers clients: Int, seconds: Double) throws {
            self.clients = clients
            self.upstreams = upstreams
            let after = upstreams.map { upstream in upstream.received.compactMap { $0.query["page"].flatMap(Int.init) }.max() ?? 0 }
            followers = try Followers(clients, on: daemons.map(\.socketPath), recordingReceipts: true)
            let subscribedAt = try followers.send { index in
                #"{"op":"subscribe","feed":"users","follow":true,"after":\#(after[index / clients])}"#
            }
            // The timed readers start a second behind the followers and read slower than pages
            // come, so every page they ask for was prefetched.
            let readers = daemons.indices.map {
                TimedReader(socketPath: daemons[$0].socketPath, after: after[$0], startingAt: subscribedAt + .seconds(1))
            }
            if clients == 0 {
                Thread.sleep(forTimeInterval: seconds)
            } else {
                _ = followers.counter.read(untilEachHas: .max, deadline: subscribedAt + .seconds(seconds))
            }
            timed = try readers.map { try $0.stop() }
            elapsed = (ContinuousClock.now - subscribedAt).seconds
            // Lines: hello, subscribed, then the pages.
            let lineCounts = followers.counter.lineCounts
            newest = daemons.indices.map { daemon in
                clients == 0 ? after[daemon] : after[daemon] + lineCounts[(daemon * clients)..<((daemon + 1) * clients)].min()! - 2
            }
            guard clients == 0 || zip(newest, after).allSatisfy({ $0 > $1 }) else { throw TestFailure("no live page reached every follower") }
            self.after = after
            self.subscribedAt = subscribedAt
        }

        /// From the upstream's answer to each follower's receipt, and to the first follower's of
        /// each page (the fan-out's spread left out), by where the page came from.
        func followerLatencies(_ origin: (Int, Int) -> Origin?) -> (each: [Origin: Latencies], first: [Origin: Latencies]) {
            var each: [Origin: Latencies] = [:]
            var first: [Origin: Latencies] = [:]
            for daemon in upstreams.indices where newest[daemon] > after[daemon] {
                let answers = Dictionary(
                    upstreams[daemon].received.compactMap { request in request.query["page"].flatMap(Int.init).map { ($0, request.answeredAt) } }
                ) { first, _ in first }
                for page in (after[daemon] + 1)...newest[daemon] {
                    guard let answered = answers[page] ?? nil, answered > subscribedAt, let origin = origin(daemon, page) else { continue }
                    let latencies = followers.counter.receipts[(daemon * clients)..<((daemon + 1) * clients)].map {
                        ($0[page - after[daemon] + 1] - answered).milliseconds
                    }
                    each[origin, default: Latencies()].samples += latencies
                    first[origin, default: Latencies()].samples.append(latencies.min()!)
                }
            }
            return (each, first)
        }

        /// The timed `next`s, by where their page came from.
        func nextLatencies(_ origin: (Int, Int) -> Origin?) -> [Origin: Latencies] {
            var latencies: [Origin: Latencies] = [:]
            for (daemon, samples) in timed.enumerated() {
                for sample in samples {
                    guard let origin = origin(daemon, sample.page) else { continue }
                    latencies[origin, default: Latencies()].samples.append(sample.latency)
                }
            }
            return latencies
        }
    }

    /// Where a daemon's page came from.
    fileprivate enum Origin {
        /// Another instance of the fleet fetched it.
        case elsewhere
        /// This instance fetched it.
        case fetchedHere
        /// The standalone daemon fetched it.
        case standalone
    }

    /// Reads pages 1 to `count` with one `next` on a new connection to `daemon`.
    private static func read(_ count: Int, from daemon: DaemonProcess) throws {
        let client = try daemon.connect()
        try client.send("next users \(count)")
        _ = try client.read(until: "page", timeout: .seconds(30))
        for _ in 1..<count { _ = try client.expect("page", timeout: .seconds(30)) }
    }

    /// Bytes a second `clients` new followers of `daemon` receive while they read its first
    /// `pages` pages (all cached).
    private static func fanOut(_ clients: Int, pages: Int, from daemon: DaemonProcess) throws -> Double {
        let followers = try Followers(clients, on: [daemon.socketPath])
        let started = try followers.send(#"{"op":"subscribe","feed":"users","follow":true}"#)
        // hello, subscribed, then the pages.
        guard followers.counter.read(untilEachHas: 2 + pages, deadline: .now + .seconds(60)) else { throw TestFailure("fan-out timed out") }
        let elapsed = (followers.counter.lineCompletions[2 + pages]!.last - started).seconds
        return Double(followers.counter.byteCounts.reduce(0, +)) / elapsed
    }

    /// For each of `pages`, which of the instances (by their `pids`) fetched it: the holder of
    /// its lease, which stays in the fleet's leases bucket after its release. (An instance that
    /// takes a just-released lease and then finds the page published releases it in turn, and
    /// is named instead; that race is rare.)
    private static func fetchingInstances(
        of pages: ClosedRange<Int>, generation: Int, nats: NATSServer, pids: [Int32]
    ) async throws -> [Int: Int] {
        let client = try await NATSClient.connect(NATSClient.Options(servers: [nats.url], name: "feedd-bench"))
        defer { Task { await client.close() } }
        let bucket = "feedd-\(clusterName)-leases"
        var fetchers: [Int: Int] = [:]
        for page in pages {
            guard let lease = try await client.lastMessage(stream: "KV_\(bucket)", subject: "$KV.\(bucket).users.\(generation).\(page)", from: .leader),
                let holder = try JSONValue(parsing: lease.payload)["holder"]?.stringValue,
                let pid = holder.split(separator: "-").last.flatMap({ Int32($0) }), let instance = pids.firstIndex(of: pid)
            else { continue }
            fetchers[page] = instance
        }
        return fetchers
    }
}

/// A client on its own thread that reads the feed after a page with `next users` every 150 ms
/// and times each answer.
private final class TimedReader {
    struct Sample: Sendable {
        let generation: Int
        let page: Int
        let latency: Double
    }

    /// Each answer as received, and how long it took; parsed only once the timing is over.
    private let answers = Locked<[(line: [UInt8], latency: Double)]>([])
    private let failure = Locked<String?>(nil)
    private let stopping = Locked(false)
    private let thread: Thread

    /// Subscribes after page `after` at once, and times from `start` on.
    init(socketPath: String, after: Int, startingAt start: ContinuousClock.Instant) {
        let (answers, failure, stopping) = (answers, failure, stopping)
        thread = Thread {
            do {
                // The client belongs to this thread alone.
                let client = try TestClient(path: socketPath)
                try client.send(#"{"op":"subscribe","feed":"users","after":\#(after)}"#)
                _ = try client.read(until: "subscribed")
                Thread.sleep(forTimeInterval: max(0, (start - .now).seconds))
                while !stopping.withLock({ $0 }) {
                    Thread.sleep(forTimeInterval: 0.15)
                    let sent = ContinuousClock.now
                    try client.send("next users")
                    guard let line = try client.connection.readLine() else { throw TestFailure("the daemon closed the connection") }
                    let latency = (ContinuousClock.now - sent).milliseconds
                    answers.withLock { $0.append((line, latency)) }
                }
            } catch {
                failure.withLock { $0 = "the timed reader failed: \(error)" }
            }
        }
        thread.start()
    }

    /// Stops the thread; returns every page it read, when and how long it took.
    func stop() throws -> [Sample] {
        stopping.withLock { $0 = true }
        while !thread.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        if let failure = failure.withLock({ $0 }) { throw TestFailure(failure) }
        return try answers.withLock { $0 }.map { line, latency in
            let page = try JSONValue(parsing: line)
            guard page["type"] == "page", let generation = page["generation"]?.integerValue, let number = page["page"]?.integerValue else {
                throw TestFailure("the timed reader got \(String(decoding: line, as: UTF8.self))")
            }
            return Sample(generation: Int(generation), page: Int(number), latency: latency)
        }
    }
}
