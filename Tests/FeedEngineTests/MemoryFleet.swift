import FeedKit
import Foundation

@testable import FeedEngine

/// A fleet in memory (SPEC §8's rules, without NATS): the links of its instances share its
/// generations, its pages (the first page published for an address is the page), its leases on
/// the injected clock, its cursors and its consumer claims. A test can cut an instance off.
final class MemoryFleet: Sendable {
    struct Address: Hashable, CustomStringConvertible {
        let feed: String
        let generation: Int
        let page: Int

        var description: String { "\(feed).\(generation).\(page)" }
    }

    fileprivate struct State {
        var generations: [String: FleetGeneration] = [:]
        var pages: [Address: FleetPage] = [:]
        var leases: [Address: (holder: String, until: ContinuousClock.Instant)] = [:]
        var cursors: [String: [String: FleetCursor]] = [:]
        var unreachable: Set<String> = []
        var links: [String: Streams] = [:]
        /// How often each address was fetched from an upstream, fleet-wide.
        var fetches: [Address: Int] = [:]
    }

    /// What a link's streams yield to.
    fileprivate struct Streams {
        var publications: [AsyncStream<FleetPage>.Continuation] = []
        var generations: [AsyncStream<FleetGeneration>.Continuation] = []
        var claims: [AsyncStream<(feed: String, consumer: String)>.Continuation] = []
        var connection: [AsyncStream<Bool>.Continuation] = []
    }

    fileprivate let state = Locked(State())
    let lease: Duration

    init(lease: Duration = .seconds(1)) {
        self.lease = lease
    }

    func link(instance: String, clock: ManualClock) -> MemoryFleetLink {
        state.withLock { $0.links[instance] = Streams() }
        return MemoryFleetLink(fleet: self, instance: instance, clock: clock)
    }

    /// Cuts `instance` off the fleet, or lets it reach it again.
    func setReachable(_ instance: String, _ reachable: Bool) {
        let connection = state.withLock { state in
            if reachable { state.unreachable.remove(instance) } else { state.unreachable.insert(instance) }
            return state.links[instance]?.connection ?? []
        }
        for continuation in connection { continuation.yield(reachable) }
    }

    /// Addresses fetched from an upstream more than once.
    var fetchedTwice: [Address] { state.withLock { $0.fetches.filter { $0.value > 1 }.map(\.key) } }

    /// The page the fleet keeps at an address.
    func page(_ address: Address) -> FleetPage? { state.withLock { $0.pages[address] } }
}

/// One instance's link to a ``MemoryFleet``.
final class MemoryFleetLink: FleetLink {
    private let fleet: MemoryFleet
    let instance: String
    private let clock: ManualClock

    fileprivate init(fleet: MemoryFleet, instance: String, clock: ManualClock) {
        self.fleet = fleet
        self.instance = instance
        self.clock = clock
    }

    var name: String { "memory" }
    var isConnected: Bool { fleet.state.withLock { !$0.unreachable.contains(instance) } }

    private func reachable() throws(FleetError) {
        guard isConnected else { throw FleetError("the fleet \"memory\" cannot be reached from \(instance)") }
    }

    func connectionChanges() -> AsyncStream<Bool> {
        stream { $0.connection.append($1) }
    }

    func generations() -> AsyncStream<FleetGeneration> {
        stream { $0.generations.append($1) }
    }

    func publications() -> AsyncStream<FleetPage> {
        stream { $0.publications.append($1) }
    }

    func claimsElsewhere() -> AsyncStream<(feed: String, consumer: String)> {
        stream { $0.claims.append($1) }
    }

    private func stream<Element>(_ register: @escaping (inout MemoryFleet.Streams, AsyncStream<Element>.Continuation) -> Void) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        fleet.state.withLock { state in
            var streams = state.links[instance] ?? MemoryFleet.Streams()
            register(&streams, continuation)
            state.links[instance] = streams
        }
        return stream
    }

    func join(feed: String, fingerprint: String, generation: Int, seed: String) async throws(FleetError) -> FleetGeneration {
        try reachable()
        return fleet.state.withLock { state in
            if let current = state.generations[feed] { return current }
            let started = FleetGeneration(feed: feed, number: generation, seed: seed, fingerprint: fingerprint)
            state.generations[feed] = started
            return started
        }
    }

    func refresh(feed: String, replacing generation: Int, seed: String, fingerprint: String) async throws(FleetError) -> FleetGeneration {
        try reachable()
        let (started, listeners) = fleet.state.withLock { state in
            if let current = state.generations[feed], current.number > generation { return (current, [AsyncStream<FleetGeneration>.Continuation]()) }
            let started = FleetGeneration(feed: feed, number: (state.generations[feed]?.number ?? generation) + 1, seed: seed, fingerprint: fingerprint)
            state.generations[feed] = started
            return (started, state.links.filter { !state.unreachable.contains($0.key) }.flatMap(\.value.generations))
        }
        for listener in listeners { listener.yield(started) }
        return started
    }

    func obtainPage(feed: String, generation: Int, page: Int, fetch: @escaping @Sendable () async throws -> FleetPage?) async throws -> FleetPageOutcome {
        guard isConnected else { return .unreachable }
        let address = MemoryFleet.Address(feed: feed, generation: generation, page: page)
        let now = clock.now
        enum Look { case published(FleetPage), held(Duration), leased }
        let look = fleet.state.withLock { state -> Look in
            if let published = state.pages[address] { return .published(published) }
            if let lease = state.leases[address], lease.holder != instance, lease.until > now { return .held(min(lease.until - now, .seconds(1))) }
            state.leases[address] = (instance, now + fleet.lease)
            state.fetches[address, default: 0] += 1
            return .leased
        }
        switch look {
        case .published(let published): return .page(published, fetchedHere: false)
        case .held(let retryIn): return .heldElsewhere(retryIn: retryIn)
        case .leased: break
        }
        defer { fleet.state.withLock { if $0.leases[address]?.holder == instance { $0.leases[address] = nil } } }
        guard let fetched = try await fetch() else { return .notYet }
        return .page(publish(fetched, at: address), fetchedHere: true)
    }

    /// Publishes `page` unless the address has one: returns the fleet's page there.
    private func publish(_ page: FleetPage, at address: MemoryFleet.Address) -> FleetPage {
        let (kept, listeners) = fleet.state.withLock { state -> (FleetPage, [AsyncStream<FleetPage>.Continuation]) in
            if let first = state.pages[address] { return (first, []) }
            state.pages[address] = page
            return (page, state.links.filter { !state.unreachable.contains($0.key) }.flatMap(\.value.publications))
        }
        for listener in listeners { listener.yield(kept) }
        return kept
    }

    func awaitNewPage(feed: String, generation: Int, page: Int, wait: @escaping @Sendable () async throws -> Void) async throws -> FleetLookOutcome {
        guard isConnected else {
            try await wait()
            return .mayHaveMore
        }
        let address = MemoryFleet.Address(feed: feed, generation: -generation, page: page)
        let now = clock.now
        let held = fleet.state.withLock { state -> Duration? in
            if state.pages[MemoryFleet.Address(feed: feed, generation: generation, page: page)] != nil { return .zero }
            if let lease = state.leases[address], lease.holder != instance, lease.until > now { return min(lease.until - now, .seconds(1)) }
            state.leases[address] = (instance, now + fleet.lease)
            return nil
        }
        if let held { return held == .zero ? .mayHaveMore : .heldElsewhere(retryIn: held) }
        defer { fleet.state.withLock { if $0.leases[address]?.holder == instance { $0.leases[address] = nil } } }
        try await wait()
        return .mayHaveMore
    }

    func claimConsumer(feed: String, consumer: String) async throws(FleetError) {
        try reachable()
        let others = fleet.state.withLock { state in state.links.filter { $0.key != instance }.flatMap(\.value.claims) }
        for other in others { other.yield((feed, consumer)) }
    }

    func cursor(feed: String, consumer: String) async throws(FleetError) -> FleetCursor? {
        try reachable()
        return fleet.state.withLock { $0.cursors[feed]?[consumer] }
    }

    func advanceCursor(feed: String, consumer: String, to cursor: FleetCursor) async throws(FleetError) {
        try reachable()
        fleet.state.withLock { state in
            let current = state.cursors[feed]?[consumer]
            if let current, (current.generation, current.page) >= (cursor.generation, cursor.page) { return }
            state.cursors[feed, default: [:]][consumer] = cursor
        }
    }

    func forgetCursor(feed: String, consumer: String) async throws(FleetError) {
        try reachable()
        _ = fleet.state.withLock { $0.cursors[feed]?.removeValue(forKey: consumer) }
    }
}
