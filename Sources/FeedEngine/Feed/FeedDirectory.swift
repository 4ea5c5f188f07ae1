import FeedKit
import FeedState

/// Every running feed, by name; applies a new configuration's feeds on reload.
@MainActor
public final class FeedDirectory {
    public private(set) var feeds: [String: Feed] = [:]
    private let logger: Logger
    private let encoder: any PageEncoder
    /// Consumer cursors, generations and their pages; they outlive reloads here, so cursors of
    /// a removed feed are still there when it comes back.
    public let store: StateStore?
    /// The `[cluster]` name of a daemon in a fleet (SPEC §8), from start-up on, before the
    /// fleet is reached; nil for a daemon on its own.
    public var clusterName: String?
    /// The fleet the shared feeds are part of, once connecting to it has begun.
    public private(set) var fleet: FleetLink?
    /// What the directory follows of the fleet: generations, consumer claims, its connection.
    private var fleetWatches: [Task<Void, Never>] = []
    /// Called when any feed's health changes, feeds come and go, or the fleet is reached or lost.
    public var onChange: (() -> Void)?

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

    public init(store: StateStore?, encoder: any PageEncoder, logger: Logger, clock: any EngineClock = SystemClock()) {
        self.store = store
        self.encoder = encoder
        self.logger = logger
        self.clock = clock
    }

    public var names: [String] { feeds.keys.sorted() }

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
            let sharingChanged = fleet != nil && existing.map { $0.settings.shared != definition.settings.shared } == true
            if let existing, !sharingChanged, existing.settings.shapesSamePages(as: definition.settings) {
                logger.notice("feed \(name) reconfigured; its generation \(existing.generation), cursors and subscribers stay")
                existing.reconfigure(definition)
                continue
            }
            let feed = Feed(definition: definition, store: store, encoder: encoder, logger: logger, clock: clock, jitter: jitter)
            feed.onHealthChange = { [weak self] in self?.onChange?() }
            feed.onNewGeneration = { [weak self] in self?.memberStartedGeneration(name) }
            feeds[name] = feed
            if let fleet { feed.attach(to: fleet) }
            if let existing {
                let change = !sharingChanged ? "changed" : definition.settings.shared ? "is now shared with the fleet" : "is now served by this instance alone"
                logger.with(LogFields(feed: name)).notice("feed \(name) \(change); its subscribers continue on a new generation")
                feed.adoptSubscriptions(of: existing)
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
    /// and starts its own new generation once. `completion` as for ``Feed/refresh(requester:replyTo:completion:)``.
    public func refresh(
        _ name: String, requester: Subscription? = nil, replyTo: JSONValue? = nil,
        completion: @escaping (Result<Int, StoreError>) -> Void = { _ in }
    ) {
        guard let feed = feeds[name] else { return }
        for member in feed.memberFeeds where feeds[member] != nil {
            refreshingFor[member, default: []].insert(name)
            refresh(member) { [weak self] _ in self?.refreshingFor[member]?.remove(name) }
        }
        feed.refresh(requester: requester, replyTo: replyTo, completion: completion)
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
                feeds[name]?.refresh()
            }
        }
    }

    /// Makes every shared feed, and every one configured later, part of `fleet`: each joins its
    /// generation, adopts the generations started anywhere in it, and gives up a consumer
    /// claimed on another instance.
    public func attach(_ fleet: FleetLink) {
        self.fleet = fleet
        for feed in feeds.values { feed.attach(to: fleet) }
        fleetWatches = [
            Task { for await generation in fleet.generations() { self.feeds[generation.feed]?.adoptFleetGeneration(generation) } },
            Task { for await claim in fleet.claimsElsewhere() { self.feeds[claim.feed]?.takeOver(claim.consumer) } },
            Task { for await _ in fleet.connectionChanges() { self.onChange?() } },
        ]
    }

    /// Ends every subscription and stops every feed (at shutdown).
    public func closeAll() {
        for watch in fleetWatches { watch.cancel() }
        for feed in feeds.values { feed.close() }
        feeds.removeAll()
    }
}
