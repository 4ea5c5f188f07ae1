import FeedKit
import Testing

@testable import FeedEngine
import FeedState

/// SPEC §5 and §8 as a shared feed that served alone joins its fleet again: a consumer resumes
/// after the last page it acknowledged in the fleet, whatever the order of its subscribe and the
/// join's answer, and nothing it acknowledged alone hides its fleet cursor (issue 22's
/// "consumer-4 resumed after generation 1 page 0; its ack of generation 1 page 7 was confirmed").
@MainActor
@Suite(.timeLimit(.minutes(1))) struct FleetRejoinTests {
    let fleet = MemoryFleet()
    let clock = ManualClock()

    /// A shared feed of one instance that joined `fleet`, with consumer `c` at page 7 of the
    /// fleet's generation, then cut off and served alone (a local generation).
    func aloneAfterAcknowledging() async throws -> (world: ScriptedWorld, link: MemoryFleetLink, fleetGeneration: FleetGeneration) {
        let world = ScriptedWorld(store: MemoryState(), clusterName: "memory", clock: clock)
        let link = fleet.link(instance: "a", clock: clock)
        world.directory.attach(link)
        await world.settle()
        #expect(world.feed.fleetState == "joined")
        let joined = world.feed.generation
        try await link.advanceCursor(feed: "scripted", consumer: "c", to: FleetCursor(generation: joined, page: 7))

        fleet.setReachable("a", false)
        world.feed.performFleet(world.feed.membership.fleetUnreachable())
        await world.settle()
        #expect(world.feed.fleetState == "alone" && world.feed.generation > StoredFeed.maximumGeneration)
        fleet.setReachable("a", true)
        let fleetGeneration = try await link.join(feed: "scripted", fingerprint: world.feed.settings.contentFingerprint, generation: 0, seed: "")
        #expect(fleetGeneration.number == joined)
        return (world, link, fleetGeneration)
    }

    @Test func a_consumer_subscribing_as_the_feed_joins_again_resumes_after_its_fleet_cursor() async throws {
        let (world, _, fleetGeneration) = try await aloneAfterAcknowledging()
        // The subscribe comes in while the feed serves alone; the join's answer is handled before
        // the consumer's start goes out.
        let reader = world.service.reader(of: "scripted", consumer: "c")
        world.feed.handle(.fleet(.joined(fleetGeneration)))
        await world.settle()

        let subscribed = try #require(reader.log.subscriptions.last?.subscribed, "no answer: \(reader.log.failures)")
        #expect(subscribed.generation == fleetGeneration.number)
        #expect(subscribed.after == 7, "resumed after page \(subscribed.after) of generation \(subscribed.generation)")
    }

    @Test func an_acknowledgement_made_alone_never_hides_the_fleet_cursor() async throws {
        let world = ScriptedWorld(store: MemoryState(), clusterName: "memory", clock: clock)
        let link = GatedCursorLink(fleet.link(instance: "a", clock: clock))
        world.directory.attach(link)
        await world.settle()
        let joined = world.feed.generation
        let reader = world.service.reader(of: "scripted", consumer: "c")
        await world.settle()
        reader.next(1)
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: "t2")))
        await world.settle()
        #expect(reader.log.pages.map(\.number) == [1])

        // The ack of page 1 goes to the fleet and waits there; meanwhile the feed is cut off,
        // serves alone, and the consumer acknowledges page 1 of the local generation.
        link.holdCursorWrites()
        reader.acknowledge(1)
        await world.settle()
        world.feed.performFleet(world.feed.membership.fleetUnreachable())
        await world.settle()
        reader.next(1)
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: "t2")))
        await world.settle()
        #expect(reader.log.pages.last?.generation ?? 0 > StoredFeed.maximumGeneration)
        reader.acknowledge(1)
        await world.settle()

        // The feed joins again, and only then does the fleet answer the write of page 1.
        let fleetGeneration = try await link.join(feed: "scripted", fingerprint: world.feed.settings.contentFingerprint, generation: 0, seed: "")
        world.feed.handle(.fleet(.joined(fleetGeneration)))
        await world.settle()
        link.releaseCursorWrites()
        await world.settle()

        let stored = try await link.cursor(feed: "scripted", consumer: "c")
        #expect(stored == FleetCursor(generation: joined, page: 1), "the fleet keeps \(String(describing: stored))")
        reader.disconnect()
        let again = world.service.reader(of: "scripted", consumer: "c")
        await world.settle()
        #expect(again.log.subscriptions.last?.subscribed.after == 1)
    }
}

/// A fleet link whose cursor writes wait while held, as a fleet's do while its leader is elected.
final class GatedCursorLink: FleetLink {
    private let link: MemoryFleetLink
    private let held = Locked<(holding: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    init(_ link: MemoryFleetLink) { self.link = link }

    func holdCursorWrites() { held.withLock { $0.holding = true } }

    func releaseCursorWrites() {
        let waiting = held.withLock { state in
            defer { state = (false, []) }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    var name: String { link.name }
    var isConnected: Bool { link.isConnected }
    func connectionChanges() -> AsyncStream<Bool> { link.connectionChanges() }
    func generations() -> AsyncStream<FleetGeneration> { link.generations() }
    func publications() -> AsyncStream<FleetPage> { link.publications() }
    func claimsElsewhere() -> AsyncStream<(feed: String, consumer: String)> { link.claimsElsewhere() }

    func join(feed: String, fingerprint: String, generation: Int, seed: String) async throws(FleetError) -> FleetGeneration {
        try await link.join(feed: feed, fingerprint: fingerprint, generation: generation, seed: seed)
    }

    func refresh(feed: String, replacing generation: Int, seed: String, fingerprint: String) async throws(FleetError) -> FleetGeneration {
        try await link.refresh(feed: feed, replacing: generation, seed: seed, fingerprint: fingerprint)
    }

    func obtainPage(feed: String, generation: Int, page: Int, fetch: @escaping @Sendable () async throws -> FleetPage?) async throws -> FleetPageOutcome {
        try await link.obtainPage(feed: feed, generation: generation, page: page, fetch: fetch)
    }

    func awaitNewPage(feed: String, generation: Int, page: Int, wait: @escaping @Sendable () async throws -> Void) async throws -> FleetLookOutcome {
        try await link.awaitNewPage(feed: feed, generation: generation, page: page, wait: wait)
    }

    func claimConsumer(feed: String, consumer: String) async throws(FleetError) {
        try await link.claimConsumer(feed: feed, consumer: consumer)
    }

    func cursor(feed: String, consumer: String) async throws(FleetError) -> FleetCursor? {
        try await link.cursor(feed: feed, consumer: consumer)
    }

    func advanceCursor(feed: String, consumer: String, to cursor: FleetCursor) async throws(FleetError) {
        await withCheckedContinuation { continuation in
            let wait = held.withLock { state in
                if state.holding { state.waiting.append(continuation) }
                return state.holding
            }
            if !wait { continuation.resume() }
        }
        try await link.advanceCursor(feed: feed, consumer: consumer, to: cursor)
    }

    func forgetCursor(feed: String, consumer: String) async throws(FleetError) {
        try await link.forgetCursor(feed: feed, consumer: consumer)
    }
}
