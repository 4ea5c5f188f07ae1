import FeedKit
import FeedState

/// The feed's durable consumers as one roster, for `status`, the `consumers` op, the metrics and
/// `max_consumers`: those the state directory keeps and those read here, each once.
///
/// Nothing here is kept: every figure is read from its owner (the ``CursorLedger`` for stored
/// cursors and acknowledgement times, the ``SubscriptionTable`` for live ones) when asked, in one
/// pass that neither copies nor sorts every consumer.
extension Feed {
    /// The newest page of the current generation the feed knows (0: none yet), what a consumer's
    /// `behind` counts up to.
    var newestKnownPage: Int { paging.furthestFiled }

    /// Visits every consumer once: each one stored (its cursor in the current generation, 0 for
    /// one stored in an earlier generation), with the live cursor of the client reading it if
    /// any, then those read here whose start is not stored yet.
    func forEachConsumer(_ body: (_ name: String, _ after: Int, _ connected: Bool) -> Void) {
        let stored = ledger.storedCursors
        let (generation, anyConnected) = (generation, subscriptions.consumerCount > 0)
        for (name, cursor) in stored {
            if anyConnected, let live = subscriptions.cursor(ofConsumer: name) {
                body(name, live, true)
            } else {
                body(name, cursor.generation == generation ? PageNumber.clamped(cursor.cursor) : 0, false)
            }
        }
        guard anyConnected else { return }
        subscriptions.forEachConsumer { name, cursor in
            if stored[name] == nil { body(name, cursor, true) }
        }
    }

    /// The consumers summed up, and the first `limit` by name past `after`, in one pass.
    func consumerRoster(listing limit: Int, after: String? = nil) -> (lag: ConsumerLag, first: ConsumerPage) {
        var lag = ConsumerLag()
        var first = FirstConsumers(limit: limit, after: after)
        let newest = newestKnownPage
        forEachConsumer { name, cursor, connected in
            lag.count(behind: max(0, newest - cursor))
            first.offer(name, after: cursor, connected: connected)
        }
        let figures = first.entries.map { entry in
            ConsumerFigures(
                name: entry.name, after: entry.after, behind: max(0, newest - entry.after), connected: entry.connected,
                lastAck: ledger.lastAcknowledged(entry.name))
        }
        return (lag, ConsumerPage(feed: name, consumers: figures, next: first.moreFollow ? figures.last?.name : nil))
    }

    /// Every consumer's name and pages behind, by name (the metrics' per-consumer series).
    func consumerLags() -> [(name: String, behind: Int)] {
        var lags: [(name: String, behind: Int)] = []
        let newest = newestKnownPage
        forEachConsumer { name, cursor, _ in lags.append((name, max(0, newest - cursor))) }
        return lags.sorted { $0.name < $1.name }
    }

    /// Whether `consumer` may subscribe under `max_consumers`: one the feed knows always may; a
    /// new one only while the feed has fewer. The consumers read here but not stored yet are
    /// counted only near the limit, so a subscribe far from it costs two look-ups.
    func admitsConsumer(_ consumer: String) -> Bool {
        if subscriptions.reads(consumer: consumer) { return true }
        let stored = ledger.storedCursors
        if stored[consumer] != nil { return true }
        guard stored.count + subscriptions.consumerCount >= settings.maxConsumers else { return true }
        var known = stored.count
        subscriptions.forEachConsumer { name, _ in
            if stored[name] == nil { known += 1 }
        }
        return known < settings.maxConsumers
    }
}
