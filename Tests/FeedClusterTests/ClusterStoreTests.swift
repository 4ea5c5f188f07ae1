import FeedKit
import FeedCluster
import Foundation
import TestSupport
import Testing

/// SPEC §8's shared state against one real nats-server with JetStream.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ClusterStoreTests {
    @Test func test_only_one_of_several_concurrent_acquirers_gets_a_page_lease() async throws {
        let server = try NATSServer()
        var stores: [ClusterStore] = []
        for index in 1...5 { stores.append(try await connectedStore([server], instance: "instance-\(index)")) }
        let page = PageAddress(feed: "users", generation: 1, page: 3)
        let outcomes = try await withThrowingTaskGroup(of: LeaseOutcome.self) { group in
            for store in stores { group.addTask { try await store.acquireLease(page) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let winners = outcomes.compactMap { if case .acquired(let lease) = $0 { lease } else { nil } }
        #expect(winners.count == 1)
        for outcome in outcomes {
            if case .heldElsewhere(let holder, _) = outcome { #expect(holder == winners.first?.holder) }
        }
        for store in stores { await store.close() }
    }

    @Test func test_a_lease_whose_holder_stopped_renewing_is_taken_over_after_it_expires() async throws {
        let server = try NATSServer()
        let dead = try await connectedStore([server], instance: "dead", lease: .seconds(1))
        let survivor = try await connectedStore([server], instance: "survivor", lease: .seconds(1))
        let page = PageAddress(feed: "users", generation: 1, page: 1)
        guard case .acquired(let deadLease) = try await dead.acquireLease(page) else { throw TestFailure("the first acquirer did not get the lease") }
        guard case .heldElsewhere(let holder, let until) = try await survivor.acquireLease(page) else {
            throw TestFailure("a held lease was given to a second instance")
        }
        #expect(holder == "dead")

        try await sleepPastLease(until: until)
        guard case .acquired(let taken) = try await survivor.acquireLease(page) else { throw TestFailure("an expired lease was not taken over") }
        #expect(taken.holder == "survivor")
        // The old holder can neither extend nor cancel its successor's lease.
        await #expect(throws: NATSError.self) { _ = try await dead.renewLease(deadLease) }
        try await dead.releaseLease(deadLease)
        guard case .heldElsewhere(let stillHolder, _) = try await dead.acquireLease(page) else { throw TestFailure("a late release freed the successor's lease") }
        #expect(stillHolder == "survivor")

        // A release lets another instance take the page at once.
        let renewed = try await survivor.renewLease(taken)
        try await survivor.releaseLease(renewed)
        guard case .acquired = try await dead.acquireLease(page) else { throw TestFailure("a released lease could not be acquired") }
        await dead.close()
        await survivor.close()
    }

    @Test func test_a_lease_renewed_in_time_is_never_taken_over() async throws {
        let server = try NATSServer()
        let holder = try await connectedStore([server], instance: "holder", lease: .seconds(1))
        let other = try await connectedStore([server], instance: "other", lease: .seconds(1))
        let page = PageAddress(feed: "users", generation: 1, page: 9)
        guard case .acquired(var lease) = try await holder.acquireLease(page) else { throw TestFailure("the lease was not acquired") }
        // Three lease lengths, renewing every third of one, as the engine does while it fetches.
        for _ in 0..<9 {
            try await Task.sleep(for: .milliseconds(333))
            lease = try await holder.renewLease(lease)
            guard case .heldElsewhere(let holderName, _) = try await other.acquireLease(page) else {
                throw TestFailure("a lease renewed in time was taken over")
            }
            #expect(holderName == "holder")
        }
        await holder.close()
        await other.close()
    }

    @Test func test_a_new_generation_reaches_an_instance_that_watches_within_a_second() async throws {
        let server = try NATSServer()
        let refresher = try await connectedStore([server], instance: "refresher")
        let watcher = try await connectedStore([server], instance: "watcher")
        let first = try await refresher.startGeneration(of: "users", replacing: nil, seed: "seed-1", fingerprint: "definition-a")
        let generations = watcher.generations()
        let seen = try await next(of: generations, "the current generation") { $0.feed == "users" }
        #expect(seen == first)

        let started = ContinuousClock.now
        let second = try await refresher.startGeneration(of: "users", replacing: first, seed: "seed-2", fingerprint: "definition-a")
        let refreshed = try await next(of: generations, within: .seconds(1), "the refreshed generation") { $0.generation == 2 }
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(refreshed == second)
        #expect(refreshed.seed == "seed-2")

        // A second refresh based on the old generation loses and gets the winner instead.
        let late = try await watcher.startGeneration(of: "users", replacing: first, seed: "seed-3", fingerprint: "definition-a")
        #expect(late == second)
        await refresher.close()
        await watcher.close()
    }

    @Test func test_a_fleet_wide_cursor_never_goes_backwards() async throws {
        let server = try NATSServer()
        let first = try await connectedStore([server], instance: "first")
        let second = try await connectedStore([server], instance: "second")
        let positions = (1...20).map { CursorPosition(generation: 1, page: $0) } + (0...5).map { CursorPosition(generation: 2, page: $0) }
        // Both instances acknowledge every position at once, in opposite orders.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for position in positions { _ = try await first.advanceCursor(feed: "users", consumer: "mobile app", to: position) } }
            group.addTask {
                for position in positions.reversed() { _ = try await second.advanceCursor(feed: "users", consumer: "mobile app", to: position) }
            }
            try await group.waitForAll()
        }
        #expect(try await first.cursor(feed: "users", consumer: "mobile app") == CursorPosition(generation: 2, page: 5))
        let kept = try await second.advanceCursor(feed: "users", consumer: "mobile app", to: CursorPosition(generation: 1, page: 30))
        #expect(kept == CursorPosition(generation: 2, page: 5))
        #expect(try await second.cursor(feed: "users", consumer: "mobile app") == CursorPosition(generation: 2, page: 5))

        try await first.forgetCursor(feed: "users", consumer: "mobile app")
        #expect(try await second.cursor(feed: "users", consumer: "mobile app") == nil)
        await first.close()
        await second.close()
    }

    @Test func test_subscribing_a_consumer_on_another_instance_takes_it_over_there() async throws {
        let server = try NATSServer()
        let first = try await connectedStore([server], instance: "first")
        let second = try await connectedStore([server], instance: "second")
        let claimsSeenByFirst = first.consumerClaims()
        try await first.claimConsumer(feed: "users", consumer: "mobile app")
        #expect(try await next(of: claimsSeenByFirst, "its own claim") == ConsumerClaim(feed: "users", consumer: "mobile app", instance: "first"))

        try await second.claimConsumer(feed: "users", consumer: "mobile app")
        let takeover = try await next(of: claimsSeenByFirst, within: .seconds(1), "the other instance's claim")
        #expect(takeover == ConsumerClaim(feed: "users", consumer: "mobile app", instance: "second"))
        await first.close()
        await second.close()
    }

    @Test func test_a_page_is_published_once_and_read_back_by_its_subject() async throws {
        let server = try NATSServer()
        let publisher = try await connectedStore([server], instance: "publisher", name: "prod")
        let latecomer = try await connectedStore([server], instance: "latecomer", name: "prod")
        let page = PageAddress(feed: "users", generation: 4, page: 2)
        #expect(publisher.subject(of: page) == "feedd.prod.pages.users.4.2")
        #expect(try await latecomer.page(page) == nil)

        let line = Array(#"{"type":"page","feed":"users","generation":4,"page":2,"items":[],"last":false}"#.utf8)
        #expect(try await publisher.publishPage(page, line: line) == .published)
        // The same page again, even with other bytes, keeps the first publication.
        #expect(try await latecomer.publishPage(page, line: Array("other".utf8)) == .alreadyPublished)
        #expect(try await publisher.publishPage(page, line: line) == .alreadyPublished)
        #expect(try await latecomer.page(page) == line)

        // Forgetting an old generation removes its pages, and only its pages.
        let newer = PageAddress(feed: "users", generation: 5, page: 2)
        _ = try await publisher.publishPage(newer, line: Array("newer".utf8))
        try await latecomer.forgetPages(of: "users", generation: 4)
        #expect(try await publisher.page(page) == nil)
        #expect(try await publisher.page(newer) == Array("newer".utf8))
        await publisher.close()
        await latecomer.close()
    }

    @Test func test_a_follower_receives_a_page_published_by_another_instance() async throws {
        let server = try NATSServer()
        let publisher = try await connectedStore([server], instance: "publisher")
        let follower = try await connectedStore([server], instance: "follower")
        let pages = await follower.pages(of: "users")
        let others = await follower.pages(of: "other")
        let line = Array("page five".utf8)
        #expect(try await publisher.publishPage(PageAddress(feed: "users", generation: 1, page: 5), line: line) == .published)
        _ = try await publisher.publishPage(PageAddress(feed: "other", generation: 1, page: 1), line: Array("not for users".utf8))
        let received = try await next(of: pages, within: .seconds(1), "the published page")
        #expect(received == PublishedPage(page: PageAddress(feed: "users", generation: 1, page: 5), line: line))
        let other = try await next(of: others, within: .seconds(1), "the other feed's page")
        #expect(other.page.feed == "other")
        await publisher.close()
        await follower.close()
    }

    /// Bursts of concurrent calls while the server is frozen. Were libnats called on the
    /// caller's thread, the burst would hold every thread of Swift's cooperative pool (two on
    /// this machine) for up to a second, and the heartbeats would stop with them; one ticks on
    /// the main actor, where feedd's event loop runs, one on the pool.
    @Test func test_a_frozen_server_fails_calls_within_their_bound_and_never_blocks_the_main_actor() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "patient")
        _ = try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 1))

        let mainActor = Heartbeat.onMainActor()
        let pool = Heartbeat.onThreadPool()
        server.freeze()
        let frozenAt = ContinuousClock.now
        var failures = 0
        while ContinuousClock.now - frozenAt < .seconds(5) {
            failures += try await withThrowingTaskGroup(of: Int.self) { burst in
                for page in 2...9 {
                    burst.addTask {
                        // Each fails within its bound, whether it reaches libnats or is refused
                        // as disconnected: the 8 calls share 4 worker threads, so one may wait for
                        // another's turn, and each makes up to two requests in turn (the cursor's
                        // entry, then its update), each bounded by the 1 s request timeout: 4 s,
                        // plus scheduling slack. (3.0 s was seen, three timeouts in a row.)
                        let started = ContinuousClock.now
                        defer { #expect(ContinuousClock.now - started < .seconds(5)) }
                        do {
                            _ = try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: page))
                            return 0
                        } catch let error as NATSError {
                            #expect(error.code == .unavailable, "\(error)")
                            return 1
                        }
                    }
                }
                return try await burst.reduce(0, +)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(store.state == .disconnected)
        server.thaw()
        #expect(failures > 0)
        let mainActorPause = await mainActor.stop()
        let poolPause = await pool.stop()
        #expect(mainActorPause < .milliseconds(250), "the main actor was blocked for \(mainActorPause)")
        #expect(poolPause < .milliseconds(250), "the cooperative thread pool was blocked for \(poolPause)")

        try await waitForState(.connected, of: store)
        let stored = try await retryingWhileUnavailable {
            try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 10))
        }
        #expect(stored == CursorPosition(generation: 1, page: 10))
        await store.close()
    }

    @Test func test_a_missing_credentials_or_certificate_authority_file_is_an_error_not_an_endless_retry() async throws {
        let server = try NATSServer()
        var withoutCredentials = ClusterStore.Configuration(servers: [server.url], name: "test", replicas: 1, lease: .seconds(10), instance: "lost")
        withoutCredentials.authentication = .credentials(file: "/nonexistent/feedd.creds")
        var withoutAuthorities = withoutCredentials
        withoutAuthorities.authentication = .none
        withoutAuthorities.tls.trustedCertificates = "/nonexistent/ca.pem"
        for (configuration, file) in [(withoutCredentials, "/nonexistent/feedd.creds"), (withoutAuthorities, "/nonexistent/ca.pem")] {
            do {
                let store = try await ClusterStore.connect(configuration, logger: testLogger)
                await store.close()
                Issue.record("connected without \(file)")
            } catch {
                #expect(error.code == .failed, "\(error)")
                #expect("\(error)".contains(file), "\(error)")
                #expect(!error.reason.hasPrefix("("), "libnats's source location is left out: \(error)")
            }
        }
    }

    @Test func test_an_unreachable_cluster_at_start_is_joined_once_it_comes_up() async throws {
        let port = try NATSServer.freePort()
        var configuration = ClusterStore.Configuration(
            servers: ["nats://127.0.0.1:\(port)"], name: "test", replicas: 1, lease: .seconds(10), instance: "early")
        configuration.requestTimeout = .seconds(1)
        let store = try await ClusterStore.connect(configuration, logger: testLogger)
        #expect(store.state == .disconnected)
        await #expect(throws: NATSError.self) { _ = try await store.cursor(feed: "users", consumer: "app") }
        let generations = store.generations()

        let server = try NATSServer(port: port)
        try await waitForState(.connected, of: store)
        let stored = try await retryingWhileUnavailable {
            try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 1))
        }
        #expect(stored == CursorPosition(generation: 1, page: 1))
        let started = try await store.startGeneration(of: "users", replacing: nil, seed: "seed", fingerprint: "definition")
        #expect(try await next(of: generations, "the first generation, on a watch begun before the cluster was up") == started)
        await store.close()
        #expect(store.state == .closed)
        server.stop()
        #expect(store.state == .closed)
    }
}

/// Ticks every 10 ms on one executor and remembers the longest gap between two ticks: if
/// anything held that executor's thread, the gap shows it.
final class Heartbeat: Sendable {
    private let longestPause = Locked<Duration>(.zero)
    private let ticking = Locked<Task<Void, Never>?>(nil)

    static func onMainActor() -> Heartbeat {
        let heartbeat = Heartbeat()
        heartbeat.ticking.withLock { $0 = Task { @MainActor in await heartbeat.tick(isolation: MainActor.shared) } }
        return heartbeat
    }

    static func onThreadPool() -> Heartbeat {
        let heartbeat = Heartbeat()
        heartbeat.ticking.withLock { $0 = Task.detached { await heartbeat.tick(isolation: nil) } }
        return heartbeat
    }

    /// Stops ticking and returns the longest gap seen.
    func stop() async -> Duration {
        let task = ticking.withLock { $0 }
        task?.cancel()
        await task?.value
        return longestPause.withLock { $0 }
    }

    private func tick(isolation: isolated (any Actor)?) async {
        var last = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
            let now = ContinuousClock.now
            longestPause.withLock { $0 = max($0, now - last) }
            last = now
        }
    }
}
