import FeedCluster
import FeedEngine
import FeedKit
import Foundation

/// The engine's ``FleetLink`` on a ``ClusterStore`` (SPEC §8).
///
/// A page's line alone does not say how to ask for the page after it, which an instance that
/// did not fetch it needs on a sequential source. So every page is published with one more
/// header, `Feedd-Page`: ``FleetPage/header``, a JSON object with `items` (how many), `next`
/// (`more`, `later` or `end`, as the source answered), `token` (the next page's token, if any)
/// and `source_page`. `nats sub` shows it; readers of the feed need only the line.
public final class ClusterFleetLink: FleetLink {
    public let store: ClusterStore
    let logger: Logger
    /// The figures the link keeps itself (the store and its client keep the others).
    let figures = Locked(LinkFigures())
    /// The header that carries what the engine needs to page on from a published page.
    static let pageHeader = "Feedd-Page"

    /// A link on `store`. It logs nothing of the connection until ``watchConnection()``.
    init(store: ClusterStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Connects to the cluster of `settings`; an unreachable one is retried in the background.
    /// Throws for what retrying cannot fix: a secret file or the fleet key that cannot be read.
    public static func connect(_ settings: ClusterSettings, instance: String, logger: Logger) async throws(NATSError) -> ClusterFleetLink {
        var configuration = ClusterStore.Configuration(
            servers: settings.servers, name: settings.name, replicas: settings.replicas, lease: settings.lease, instance: instance)
        configuration.authentication =
            switch settings.authentication {
            case .none: .none
            case .password(let user, let passwordFile): .password(user: user, passwordFile: passwordFile)
            case .token(let file): .token(file: file)
            case .nkeySeed(let file): .nkeySeed(file: file)
            case .credentials(let file): .credentials(file: file)
            }
        configuration.tls = NATSClient.TLSFiles(
            trustedCertificates: settings.trustedCertificatesFile, certificate: settings.certificateFile, privateKey: settings.privateKeyFile)
        configuration.fleetKey = try settings.keyFile.map { path throws(NATSError) in try FleetKey(contentsOf: path) }
        return ClusterFleetLink(store: try await ClusterStore.connect(configuration, logger: logger), logger: logger)
    }

    public var name: String { store.configuration.name }
    public var isConnected: Bool { store.state == .connected }

    public func connectionChanges() -> AsyncStream<Bool> {
        let states = store.states()
        return AsyncStream { continuation in
            let forwarding = Task {
                var last: Bool?
                for await state in states {
                    let connected = state == .connected
                    if connected != last { continuation.yield(connected) }
                    last = connected
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in forwarding.cancel() }
        }
    }

    /// Closes the connection and ends every stream.
    public func close() async { await store.close() }

    // MARK: Generations

    public func join(feed: String, fingerprint: String, generation: Int, seed: String) async throws(FleetError) -> FleetGeneration {
        try await fleetCall { () async throws(NATSError) in
            if let current = try await store.generation(of: feed) { return Self.convert(current) }
            return Self.convert(try await store.startGeneration(of: feed, replacing: nil, seed: seed, fingerprint: fingerprint, firstNumber: generation))
        }
    }

    public func refresh(feed: String, replacing generation: Int, seed: String, fingerprint: String) async throws(FleetError) -> FleetGeneration {
        try await fleetCall { () async throws(NATSError) in
            let current = try await store.generation(of: feed)
            // Another instance's refresh got there first: that one is the new generation.
            if let current, current.generation > generation { return Self.convert(current) }
            let started = try await store.startGeneration(
                of: feed, replacing: current, seed: seed, fingerprint: fingerprint,
                firstNumber: min(generation, Int(RecordLimits.maximumGeneration)) + 1)
            if let current { forgetPagesLater(of: feed, generation: current.generation) }
            return Self.convert(started)
        }
    }

    /// Drops the pages of a generation the fleet moved on from, once every instance has (each
    /// adopts a new generation within a second, and a fetch of the old one ends within its
    /// lease). An outage meanwhile leaves them in the stream, costing only disk.
    private func forgetPagesLater(of feed: String, generation: Int) {
        Task { [store, logger] in
            try? await Task.sleep(for: store.configuration.lease + .seconds(2))
            do {
                try await store.forgetPages(of: feed, generation: generation)
            } catch {
                logger.info("the pages of generation \(generation) of feed \(feed) stay in the fleet's stream: \(error)")
            }
        }
    }

    public func generations() -> AsyncStream<FleetGeneration> {
        map(store.generations()) { Self.convert($0) }
    }

    private static func convert(_ generation: FeedGeneration) -> FleetGeneration {
        FleetGeneration(feed: generation.feed, number: generation.generation, seed: generation.seed, fingerprint: generation.fingerprint)
    }

    // MARK: Pages

    public func obtainPage(
        feed: String, generation: Int, page: Int, fetch: @escaping @Sendable () async throws -> FleetPage?
    ) async throws -> FleetPageOutcome {
        let address = PageAddress(feed: feed, generation: generation, page: page)
        let lease: LeaseOutcome
        do {
            if let published = try await store.publishedPage(address), let page = believed(published) {
                return .page(page, fetchedHere: false)
            }
            let asked = ContinuousClock.now
            lease = try await store.acquireLease(address)
            figures.withLock { $0.leaseDuration.record(since: asked) }
        } catch {
            // The feed serves alone on this answer, and tries the fleet again a second later:
            // say why, or a store that keeps failing one operation looks like a flapping network.
            logger.notice("feed \(feed) page \(page): \(error); served alone until the fleet answers")
            return .unreachable
        }
        switch lease {
        case .acquired(let lease):
            // A lease released a moment ago is taken over like an expired one: its holder
            // published the page between the look above and the lease. Looking again costs
            // a read per fetch; not looking cost an upstream request (the fleet benchmark
            // saw about one page in 250 fetched twice).
            if let published = try? await store.publishedPage(address), let page = believed(published) {
                Task { [store] in try? await store.releaseLease(lease) }
                return .page(page, fetchedHere: false)
            }
            return try await fetchHolding(lease, fetch: fetch)
        case .heldElsewhere(let holder, let until):
            logger.debug("\(address): fetched by \(holder); waiting for its publication")
            return .heldElsewhere(retryIn: Self.retryDelay(until: until))
        }
    }

    /// Fetches the page while holding its lease, then publishes it and lets the lease go. If
    /// another instance published it meanwhile (its lease had expired), that publication is the page.
    private func fetchHolding(_ lease: FeedLease, fetch: @Sendable () async throws -> FleetPage?) async throws -> FleetPageOutcome {
        let (fetched, held) = try await holding(lease, fetch)
        defer { Task { [store] in try? await store.releaseLease(held) } }
        guard let fetched else { return .notYet }
        do {
            let started = ContinuousClock.now
            let outcome = try await store.publishPage(lease.page, line: Array(fetched.line.buffer), headers: [Self.pageHeader: Self.header(of: fetched)])
            figures.withLock { figures in
                figures.publishDuration.record(since: started)
                if outcome == .alreadyPublished { figures.refusedPublications += 1 }
            }
            clearProblem()
            // The page published first is the page, for every instance; one that is not valid
            // (forged) is not served, and this instance serves what it fetched.
            if outcome == .alreadyPublished, let first = try await store.publishedPage(lease.page), let page = believed(first) {
                return .page(page, fetchedHere: true)
            }
        } catch {
            if error.code == .full { figures.withLock { $0.problem = error } }
            logger.warning("\(lease.page): fetched but not published to the fleet: \(error)")
        }
        return .page(fetched, fetchedHere: true)
    }

    public func awaitNewPage(feed: String, generation: Int, page: Int, wait: @escaping @Sendable () async throws -> Void) async throws -> FleetLookOutcome {
        let address = PageAddress(feed: feed, generation: generation, page: page)
        let lease: LeaseOutcome
        do {
            if try await store.publishedPage(address) != nil { return .mayHaveMore }
            lease = try await store.acquireLease(address, for: .look)
        } catch {
            try await wait()
            return .mayHaveMore
        }
        switch lease {
        case .acquired(let lease):
            let (_, held) = try await holding(lease, wait)
            try? await store.releaseLease(held)
            return .mayHaveMore
        case .heldElsewhere(_, let until):
            return .heldElsewhere(retryIn: Self.retryDelay(until: until))
        }
    }

    /// How long to wait for the publication of a page whose lease ends at `until` (Unix ms)
    /// before asking again: until the lease runs out, but at most a second, in case the
    /// publication came during an outage and was never delivered.
    private static func retryDelay(until: Int64) -> Duration {
        .milliseconds(min(max(until - now, 20), 1_000))
    }

    /// Runs `body` while holding `lease`, renewed every third of its length; returns what
    /// `body` returned and the lease as last renewed, to release. On a throw the lease is released.
    private func holding<Value>(_ lease: FeedLease, _ body: () async throws -> Value) async throws -> (Value, FeedLease) {
        let renewal = Task { [store] in
            var held = lease
            while (try? await Task.sleep(for: store.configuration.lease / 3)) != nil {
                do throws(NATSError) {
                    held = try await store.renewLease(held)
                } catch where error.code == .conflict {
                    break
                } catch {}
            }
            return held
        }
        do {
            let value = try await body()
            renewal.cancel()
            return (value, await renewal.value)
        } catch {
            renewal.cancel()
            try? await store.releaseLease(await renewal.value)
            throw error
        }
    }

    private static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }

    /// One subscription to every feed's pages: each message is decoded once into a page whose
    /// line the engine shares.
    public func publications() -> AsyncStream<FleetPage> {
        let store = store
        return AsyncStream { continuation in
            let forwarding = Task {
                for await published in await store.pages(of: nil) {
                    // A page that is not valid is counted and dropped here: no instance serves it.
                    if let page = self.believed(published) { continuation.yield(page) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in forwarding.cancel() }
        }
    }

    static func header(of page: FleetPage) -> String {
        page.header
    }

    /// The page a published message carries, if it is one (``PublishedPageCheck``); a message
    /// that is not is counted, logged and dropped.
    func believed(_ published: PublishedPage) -> FleetPage? {
        switch PublishedPageCheck.page(published, subject: store.subject(of: published.page)) {
        case .success(let page): return page
        case .failure(let rejection):
            store.rejections.record(rejection)
            return nil
        }
    }

    // MARK: Consumers

    public func claimConsumer(feed: String, consumer: String) async throws(FleetError) {
        try await fleetCall { () async throws(NATSError) in try await store.claimConsumer(feed: feed, consumer: consumer) }
    }

    public func cursor(feed: String, consumer: String) async throws(FleetError) -> FleetCursor? {
        try await fleetCall { () async throws(NATSError) in
            try await store.cursor(feed: feed, consumer: consumer).map { FleetCursor(generation: $0.generation, page: $0.page) }
        }
    }

    public func advanceCursor(feed: String, consumer: String, to cursor: FleetCursor) async throws(FleetError) {
        try await fleetCall { () async throws(NATSError) in
            _ = try await store.advanceCursor(feed: feed, consumer: consumer, to: CursorPosition(generation: cursor.generation, page: cursor.page))
        }
    }

    public func forgetCursor(feed: String, consumer: String) async throws(FleetError) {
        try await fleetCall { () async throws(NATSError) in try await store.forgetCursor(feed: feed, consumer: consumer) }
    }

    public func claimsElsewhere() -> AsyncStream<(feed: String, consumer: String)> {
        let instance = store.configuration.instance
        return map(store.consumerClaims()) { claim in claim.instance == instance ? nil : (claim.feed, claim.consumer) }
    }

    // MARK: Helpers

    /// Runs one call to the store, its failure told the engine's way: a refusal or a full
    /// JetStream is named as such, and stays the link's ``FleetStatistics/problem`` until it works again.
    private func fleetCall<Value>(_ body: () async throws(NATSError) -> Value) async throws(FleetError) -> Value {
        do {
            let value = try await body()
            clearProblem()
            return value
        } catch {
            switch error.code {
            case .authentication, .authorization, .tls, .full:
                figures.withLock { $0.problem = error }
                throw FleetError("the fleet \"\(name)\" failed: \(error)")
            default:
                throw FleetError("the fleet \"\(name)\" cannot be reached: \(error)")
            }
        }
    }

    /// `elements` transformed, those `transform` makes nil left out.
    private func map<Element: Sendable, Output: Sendable>(
        _ elements: AsyncStream<Element>, _ transform: @escaping @Sendable (Element) -> Output?
    ) -> AsyncStream<Output> {
        AsyncStream { continuation in
            let forwarding = Task {
                for await element in elements {
                    if let output = transform(element) { continuation.yield(output) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in forwarding.cancel() }
        }
    }
}
