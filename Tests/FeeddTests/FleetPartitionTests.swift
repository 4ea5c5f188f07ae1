import FeedCluster
import FeedKit
import Foundation
import Testing
import TestSupport

/// SPEC §5 and §8 under network faults: three nats-servers, each in a network namespace of its
/// own, as one JetStream cluster with `replicas = 3`; three instances, each on its own server;
/// six durable consumers hopping between instances, acknowledging as they go. Links are cut and
/// healed, a leader is killed with -9 and another frozen with SIGSTOP. Throughout, no consumer
/// resumes before its last confirmed ack, no (generation, page) is served with two item lists,
/// no page is fetched twice but during a fault, and after the last heal every instance serves
/// consumers again within 30 s.
@Suite(
    .serialized, .timeLimit(.minutes(3)),
    .enabled(if: NetworkNamespaces.unavailableReason == nil, "needs root and ip netns (iproute2) to make its hosts; CI runs as root"))
struct FleetPartitionTests {
    /// What the consumers saw, and what went wrong.
    final class Ledger: @unchecked Sendable {
        // Sendable: touched by the driving thread only, but for `faults`, which has its own lock.
        /// Each consumer's last confirmed ack, as (generation, page).
        var confirmed: [String: (generation: Int64, page: Int64)] = [:]
        var itemsByPage: [String: [String]] = [:]
        var violations: [String] = []
        var acknowledged = 0
        let faults = Locked<[(name: String, from: ContinuousClock.Instant, until: ContinuousClock.Instant?)]>([])

        /// Whether `instant` falls in a fault, or in the `grace` after one ended.
        func isDuringFault(_ instant: ContinuousClock.Instant, grace: Duration) -> Bool {
            faults.withLock { faults in faults.contains { instant >= $0.from && instant <= ($0.until ?? .now) + grace } }
        }
    }

    static let consumers = (1...6).map { "consumer-\($0)" }

    /// One round trip of `consumer` on `daemon`: subscribe, read a page, acknowledge it. Failures
    /// (a fleet electing leaders answers `store_failed`) are no violation; a resumption before
    /// the consumer's last confirmed ack, or a page with other items than before, is.
    /// Returns whether the acknowledgement was confirmed.
    @discardableResult
    static func step(_ consumer: String, on daemon: DaemonProcess, _ ledger: Ledger) -> Bool {
        guard let client = try? daemon.connect() else { return false }
        guard let subscribed = try? client.request(["op": "subscribe", "feed": "users", "consumer": .string(consumer)]),
            subscribed["type"] == "subscribed", let after = subscribed["after"]?.integerValue, let generation = subscribed["generation"]?.integerValue
        else { return false }
        // A consumer resumes in the generation it acknowledged in, after that page; a later
        // generation starts every consumer at 0 (a refresh), an earlier one is a violation too.
        if let confirmed = ledger.confirmed[consumer], (generation, after) < confirmed {
            ledger.violations.append("\(consumer) resumed after generation \(generation) page \(after); its ack of generation \(confirmed.generation) page \(confirmed.page) was confirmed")
        }
        guard (try? client.send("next users 1")) != nil, let page = try? client.read(timeout: .seconds(8)), page["type"] == "page",
            let number = page["page"]?.integerValue, let pageGeneration = page["generation"]?.integerValue
        else { return false }
        let ids = FleetTests.ids(page)
        let address = "generation \(pageGeneration) page \(number)"
        if let seen = ledger.itemsByPage[address], seen != ids { ledger.violations.append("\(address) was served with two item lists") }
        ledger.itemsByPage[address] = ids
        guard let ack = try? client.request(["op": "ack", "feed": "users", "page": .integer(number)]), ack["type"] == "ack" else { return false }
        if ledger.confirmed[consumer].map({ $0 < (pageGeneration, number) }) ?? true { ledger.confirmed[consumer] = (pageGeneration, number) }
        ledger.acknowledged += 1
        return true
    }

    /// Each consumer in turn acknowledges a page on each instance, one right after the other:
    /// a read that lags behind the acknowledgement just confirmed elsewhere shows at once.
    static func hop(round: Int, _ instances: [DaemonProcess], _ ledger: Ledger) {
        for (index, consumer) in consumers.enumerated() {
            for hop in 0..<instances.count { step(consumer, on: instances[(index + round + hop) % instances.count], ledger) }
        }
    }

    @Test func consumers_never_resume_before_their_confirmed_ack_while_links_are_cut_and_leaders_killed_or_frozen() async throws {
        let hosts = try NetworkNamespaces(count: 3)
        let servers = try NATSServer.cluster(inNamespaces: hosts.names, hosts: hosts.addresses)
        defer { for server in servers { server.thaw(); server.stop() } }
        let upstream = try LoopbackUpstream()
        let instances = try servers.map { server in
            try FleetTests.instance([server.url], upstream, replicas: 3, waitUntilJoined: false, feeds: """
                [feeds.users]
                source = "randomuser"
                url = "\(upstream.baseURL)/api/"
                results = 3
                prefetch = 0
                timeout = "3s"
                retry_max_delay = "300ms"
                """)
        }
        for instance in instances { try instance.log.waitForLine(containing: "joined the fleet", timeout: .seconds(40)) }
        let observer = try await NATSClient.connect(NATSClient.Options(servers: servers.map(\.url), name: "observer"))
        defer { Task { await observer.close() } }
        _ = try await next(of: observer.states(), within: .seconds(10), "the observer's connection") { $0 == .connected }

        let ledger = Ledger()
        let started = ContinuousClock.now
        // Warm up: every consumer acknowledges a page on each instance.
        for round in 0..<2 { Self.hop(round: round, instances, ledger) }
        #expect(ledger.acknowledged > 0, "no acknowledgement before the faults: \(instances[0].log.text.suffix(2_000))")

        // The faults, one after another, while the consumers go on.
        let streams = FleetTests.streams
        let schedule = Task.detached {
            func leader(of stream: String) async -> Int {
                let name = try? await observer.streamLeader(stream)
                return servers.firstIndex { $0.name == name } ?? 0
            }
            // A fault lasts from its start until the fleet answers every instance again (after a
            // heal, servers that were cut off force new elections) and a lease has passed: until
            // then an instance the fleet does not answer serves alone, fetching pages itself.
            func fault(_ name: String, lasting duration: Duration, _ start: () throws -> Void, _ end: () throws -> Void) async throws {
                ledger.faults.withLock { $0.append((name, .now, nil)) }
                try start()
                try await Task.sleep(for: duration)
                try end()
                let deadline = ContinuousClock.now + .seconds(30)
                for (index, instance) in instances.enumerated() {
                    while (try? instance.connect().request(["op": "subscribe", "feed": "users", "consumer": .string("probe-\(index)")]))?["type"] != "subscribed",
                        ContinuousClock.now < deadline
                    {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                }
                // Each stream has its own leader, elected on its own schedule.
                for stream in streams {
                    while (try? await observer.streamLeader(stream)) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
                }
                try await Task.sleep(for: .seconds(3))
                ledger.faults.withLock { $0[$0.count - 1].until = .now }
                try await Task.sleep(for: .seconds(2))
            }
            let cursorsLeader = await leader(of: "KV_feedd-test-cursors")
            try await fault("leader of the cursors isolated", lasting: .seconds(6), { try hosts.isolate(cursorsLeader) }, { try hosts.heal() })
            let leasesLeader = await leader(of: "KV_feedd-test-leases")
            try await fault("leader of the leases killed", lasting: .seconds(4), { servers[leasesLeader].crash() }, { try servers[leasesLeader].start() })
            let pagesLeader = await leader(of: "feedd-test-pages")
            try await fault("leader of the pages frozen", lasting: .seconds(4), { servers[pagesLeader].freeze() }, { servers[pagesLeader].thaw() })
            try await fault("link between two servers cut", lasting: .seconds(4), { try hosts.cut(0, 1) }, { try hosts.heal() })
            return ContinuousClock.now
        }
        var round = 3
        while !ledger.faults.withLock({ $0.count == 4 && $0.last?.until != nil }) {
            Self.hop(round: round, instances, ledger)
            round += 1
        }
        let healed = try await schedule.value

        // Within 30 s of the last heal, every instance serves a consumer again.
        for (index, instance) in instances.enumerated() {
            while !Self.step(Self.consumers[index], on: instance, ledger) {
                guard ContinuousClock.now - healed < .seconds(30) else {
                    Issue.record("instance \(index + 1) did not serve a consumer within 30 s of healing")
                    break
                }
                try await Task.sleep(for: .milliseconds(200))
            }
        }

        #expect(ledger.violations.isEmpty, "\(ledger.violations)")
        if !ledger.violations.isEmpty {
            for (index, instance) in instances.enumerated() {
                print("instance \(index + 1):\n" + instance.log.lines.filter { $0.contains("fleet") || $0.contains("generation") }.joined(separator: "\n"))
            }
        }
        // A page fetched more than once: each fetch after the first must fall in a fault (or the
        // lease and reconnection after it), when an instance is cut off and fetches alone.
        let fetches = Dictionary(grouping: upstream.received.filter { $0.path.hasPrefix("/api") }) { $0.query["page"] ?? "" }
        for (page, requests) in fetches where requests.count > 1 {
            for request in requests.dropFirst() {
                let at = request.answeredAt ?? .now
                let faults = ledger.faults.withLock { $0.map { "\($0.name): \($0.from - started) to \(($0.until ?? .now) - started)" } }
                #expect(ledger.isDuringFault(at, grace: .zero), "page \(page) was fetched \(requests.count) times, at \(requests.map { ($0.answeredAt ?? .now) - started }), once outside every fault: \(faults)")
            }
        }
        #expect(ledger.acknowledged > 30, "only \(ledger.acknowledged) acknowledgements went through")
    }
}
