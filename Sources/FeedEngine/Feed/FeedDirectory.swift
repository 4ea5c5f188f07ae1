import FeedKit
import FeedState

/// Every running feed, by name; applies a new configuration's feeds on reload, and routes what
/// the fleet says to the feeds it concerns.
@MainActor
public final class FeedDirectory {
    /// The running feeds, by name.
    public private(set) var feeds: [String: Feed] = [:]
    private let logger: Logger
    private let encoder: any PageEncoder
    /// Consumer cursors, generations and their pages; they outlive reloads here, so cursors of
    /// a removed feed are still there when it comes back.
    let store: (any DurableState)?
    /// The `[cluster]` name of a daemon in a fleet (SPEC §8), from start-up on, before the
    /// fleet is reached; nil for a daemon on its own. Set it before the first ``apply(_:)``:
    /// shared feeds then serve alone until they join.
    public var clusterName: String?
    /// The fleet the shared feeds are part of, once connecting to it has begun.
    public private(set) var fleet: FleetLink?
    /// What the directory follows of the fleet: generations, pages, consumer claims, its connection.
    private var fleetWatches: [Task<Void, Never>] = []
    /// Called when any feed's health changes, feeds come and go, or the fleet is reached or lost.
    public var onChange: (() -> Void)?
    /// Where the feeds started from now on defer their looks for upstream work to (see
    /// ``Feed/advanceUpstreamAfterTurn()``); nil looks at once. Set it before the first ``apply(_:)``.
    public var afterTurn: TurnEnd?

    private let clock: any EngineClock
    /// The retry jitter of feeds started from now on; nil for the random one (tests fix it).
    var jitter: (@Sendable () -> Double)?
    /// For each feed, the feeds that gather it (`merge`), from their adapters' ``SourceAdapter/memberFeeds``.
    private var gatheredBy: [String: Set<String>] = [:]
    /// Members being refreshed because a feed that gathers them was: their new generation must
    /// not refresh that feed a second time.
    private var refreshingFor: [String: Set<String>] = [:]
    /// Gathering feeds to refresh once the current turn is over, so members refreshed together
    /// refresh them once.
    private var pendingCascade: Set<String> = []

    /// A directory whose feeds keep their state in `store` (nil: nowhere) and encode their pages
    /// with `encoder`.
    public init(store: (any DurableState)?, encoder: any PageEncoder, logger: Logger, clock: any EngineClock = SystemClock()) {
        self.store = store
        self.encoder = encoder
        self.logger = logger
        self.clock = clock
    }

    /// The feeds' names, sorted.
    public var names: [String] { feeds.keys.sorted() }

    /// The feed named `name`, if it runs.
    public subscript(name: String) -> Feed? { feeds[name] }

    /// Makes the running feeds those of `definitions` (SPEC §3): new ones start; removed ones end
    /// their subscriptions; one whose pages change (source, options, `wrap`), or in a fleet its
    /// sharing, is replaced by a fresh feed whose new generation its subscribers continue on, as
    /// after a refresh; one whose pages stay the same (`timeout`, `poll`, `prefetch`, …) takes its
    /// new settings and keeps its generation, cache, cursors and subscriptions; an unchanged one
    /// is left exactly as it is.
    public func apply(_ definitions: [FeedDefinition]) {
        let incoming = Dictionary(definitions.map { ($0.settings.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (name, feed) in feeds where incoming[name] == nil {
            logger.with(LogFields(feed: name)).notice("feed \(name) removed")
            feed.close()
            feeds[name] = nil
        }
        for definition in definitions {
            let name = definition.settings.name
            let existing = feeds[name]
            if let existing, existing.settings == definition.settings { continue }
            // In a fleet, `shared` says where the generation and the cursors live (the fleet, or
            // this instance): a feed whose sharing changes is replaced like one whose pages change.
            let sharingChanged = clusterName != nil && existing.map { $0.settings.shared != definition.settings.shared } == true
            if let existing, !sharingChanged, existing.settings.shapesSamePages(as: definition.settings) {
                logger.notice("feed \(name) reconfigured; its generation \(existing.generation), cursors and subscribers stay")
                existing.handle(.reload(definition))
                continue
            }
            let shared = clusterName != nil && definition.settings.shared && definition.adapter.memberFeeds.isEmpty
            let feed = Feed(definition: definition, store: store, encoder: encoder, logger: logger, clock: clock, jitter: jitter, shared: shared)
            feed.afterTurn = afterTurn
            feed.onHealthChange = { [weak self] in self?.onChange?() }
            feed.onNewGeneration = { [weak self] in self?.memberStartedGeneration(name) }
            feeds[name] = feed
            if shared, let fleet { feed.handle(.fleet(.attached(fleet))) }
            if let existing {
                let change = !sharingChanged ? "changed" : definition.settings.shared ? "is now shared with the fleet" : "is now served by this instance alone"
                logger.with(LogFields(feed: name)).notice("feed \(name) \(change); its subscribers continue on a new generation")
                feed.adopt(existing.retire(), after: existing.generation, from: existing)
            } else {
                logger.with(LogFields(feed: name)).info("feed \(name) (\(definition.settings.source)) ready")
            }
        }
        gatheredBy = [:]
        for (name, feed) in feeds {
            for member in feed.memberFeeds { gatheredBy[member, default: []].insert(name) }
        }
        onChange?()
    }

    /// Refreshes feed `name` (SPEC §5): a feed that gathers others (`merge`) refreshes them too,
    /// and starts its own new generation once. `answer` as for ``Feed/refresh(requester:replyTo:answer:)``.
    func refresh(
        _ name: String, requester: ClientID? = nil, replyTo: ReplyTag? = nil, answer: @escaping (Result<Int, StoreError>) -> Void = { _ in }
    ) {
        guard let feed = feeds[name] else { return }
        for member in feed.memberFeeds where feeds[member] != nil {
            refreshingFor[member, default: []].insert(name)
            refresh(member) { [weak self] _ in self?.refreshingFor[member]?.remove(name) }
        }
        feed.handle(.refresh(requester: requester, replyTo: replyTo, answer: answer))
    }

    /// A member's new generation starts one of every feed that gathers it, but for one that
    /// caused it by being refreshed itself.
    private func memberStartedGeneration(_ member: String) {
        let gatherers = (gatheredBy[member] ?? []).subtracting(refreshingFor[member] ?? [])
        refreshingFor[member] = nil
        guard !gatherers.isEmpty else { return }
        let wasIdle = pendingCascade.isEmpty
        pendingCascade.formUnion(gatherers)
        guard wasIdle else { return }
        Task { @MainActor in
            let due = pendingCascade
            pendingCascade = []
            // Its members are what moved on: they are not refreshed again.
            for name in due.sorted() {
                logger.notice("feed \(name) starts a new generation: a feed it gathers did")
                feeds[name]?.handle(.refresh(requester: nil, replyTo: nil, answer: { _ in }))
            }
        }
    }

    /// Makes every shared feed, and every one configured later, part of `fleet`: each joins its
    /// generation; the generations started anywhere in it, the pages published anywhere and the
    /// consumers claimed on another instance reach the feeds they concern.
    public func attach(_ fleet: FleetLink) {
        self.fleet = fleet
        for feed in feeds.values { feed.handle(.fleet(.attached(fleet))) }
        fleetWatches = [
            Task { for await generation in fleet.generations() { self.feeds[generation.feed]?.handle(.fleet(.generationAnnounced(generation))) } },
            Task { for await page in fleet.publications() { self.feeds[page.feed]?.handle(.pagesArrived(.fleet(page))) } },
            Task { for await claim in fleet.claimsElsewhere() { self.feeds[claim.feed]?.handle(.fleet(.claimedElsewhere(consumer: claim.consumer))) } },
            Task { for await _ in fleet.connectionChanges() { self.onChange?() } },
        ]
    }

    /// Deletes `consumer`'s cursor of `feed`, also of a feed no longer configured; false if it had none.
    func forget(_ consumer: String, of feed: String) async throws(StoreError) -> Bool {
        if let running = feeds[feed] { return try await running.ledger.forget(consumer: consumer, in: store) }
        guard let store else { return false }
        return try await CursorLedger.forget(consumer: consumer, of: feed, in: store)
    }

    /// Ends every subscription and stops every feed (at shutdown).
    public func closeAll() {
        for watch in fleetWatches { watch.cancel() }
        for feed in feeds.values { feed.close() }
        feeds.removeAll()
    }
}
