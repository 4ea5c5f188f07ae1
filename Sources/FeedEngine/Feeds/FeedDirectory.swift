import FeedKit

/// Every running feed, by name; applies a new configuration's feeds on reload.
@MainActor
public final class FeedDirectory {
    public private(set) var feeds: [String: Feed] = [:]
    private let logger: Logger
    private let encoder: any PageEncoder
    /// Consumer cursors and generations; feeds outlive reloads here, so cursors of a removed
    /// feed are still there when it comes back.
    public let store: ConsumerStore?
    /// Called when any feed's health changes, or feeds come and go.
    public var onChange: (() -> Void)?

    public init(store: ConsumerStore?, encoder: any PageEncoder, logger: Logger) {
        self.store = store
        self.encoder = encoder
        self.logger = logger
    }

    public var names: [String] { feeds.keys.sorted() }

    public subscript(name: String) -> Feed? { feeds[name] }

    /// Makes the running feeds those of `definitions`: new ones start, removed ones end their
    /// subscriptions, changed ones are replaced by a fresh feed whose new generation their
    /// subscribers continue on (as after a refresh), and unchanged ones are left exactly as they are.
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
            let feed = Feed(definition: definition, store: store, encoder: encoder, logger: logger)
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
