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
    /// Called when any feed's health changes, or feeds come and go.
    public var onChange: (() -> Void)?

    private let clock: any EngineClock
    /// The retry jitter of feeds started from now on; nil for the random one (tests fix it).
    var jitter: (@Sendable () -> Double)?

    public init(store: StateStore?, encoder: any PageEncoder, logger: Logger, clock: any EngineClock = SystemClock()) {
        self.store = store
        self.encoder = encoder
        self.logger = logger
        self.clock = clock
    }

    public var names: [String] { feeds.keys.sorted() }

    public subscript(name: String) -> Feed? { feeds[name] }

    /// Makes the running feeds those of `definitions` (SPEC §3): new ones start; removed ones end
    /// their subscriptions; one whose pages change (source, options, `wrap`) is replaced by a fresh
    /// feed whose new generation its subscribers continue on, as after a refresh; one whose pages
    /// stay the same (`timeout`, `poll`, `prefetch`, …) takes its new settings and keeps its
    /// generation, cache, cursors and subscriptions; an unchanged one is left exactly as it is.
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
            if let existing, existing.settings.shapesSamePages(as: definition.settings) {
                logger.notice("feed \(name) reconfigured; its generation \(existing.generation), cursors and subscribers stay")
                existing.reconfigure(definition)
                continue
            }
            let feed = Feed(definition: definition, store: store, encoder: encoder, logger: logger, clock: clock, jitter: jitter)
            feed.onHealthChange = { [weak self] in self?.onChange?() }
            feeds[name] = feed
            if let existing {
                logger.with(LogFields(feed: name)).notice("feed \(name) changed; its subscribers continue on a new generation")
                feed.adoptSubscriptions(of: existing)
            } else {
                logger.with(LogFields(feed: name)).info("feed \(name) (\(definition.settings.source)) ready")
            }
        }
        onChange?()
    }

    /// Ends every subscription and stops every feed (at shutdown).
    public func closeAll() {
        for feed in feeds.values { feed.close() }
        feeds.removeAll()
    }
}
