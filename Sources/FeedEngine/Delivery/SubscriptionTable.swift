/// A feed's subscriptions, by client: the only registry of who reads what.
///
/// A client holds at most one subscription of a feed (subscribing again replaces it), and a
/// consumer is read by at most one client of this instance (a second one takes it over). Fronts
/// and clients hold only ids; a feed replaced by a reload hands its table to its successor whole.
struct SubscriptionTable {
    private var entries: [ClientID: Subscription] = [:]
    /// Which client reads each consumer.
    private var consumers: [String: ClientID] = [:]

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var all: Dictionary<ClientID, Subscription>.Values { entries.values }
    var clients: Dictionary<ClientID, Subscription>.Keys { entries.keys }

    subscript(client: ClientID) -> Subscription? { entries[client] }

    /// Changes `client`'s subscription, if it has one; returns what `change` returned.
    @discardableResult
    func update<Value>(_ client: ClientID, _ change: (Subscription) -> Value) -> Value? {
        entries[client].map(change)
    }

    /// Adds `subscription`. Returns the subscription it replaces (the same client's) and the one
    /// it takes over (another client reading the same consumer), each removed.
    mutating func add(_ subscription: Subscription) -> (replaced: Subscription?, takenOver: Subscription?) {
        let replaced = remove(subscription.client)
        let takenOver = subscription.consumer.flatMap { remove(consumer: $0) }
        entries[subscription.client] = subscription
        if let consumer = subscription.consumer { consumers[consumer] = subscription.client }
        return (replaced, takenOver)
    }

    @discardableResult
    mutating func remove(_ client: ClientID) -> Subscription? {
        guard let removed = entries.removeValue(forKey: client) else { return nil }
        if let consumer = removed.consumer, consumers[consumer] == client { consumers[consumer] = nil }
        removed.isEnded = true
        return removed
    }

    /// Removes the subscription that reads `consumer`, if any.
    mutating func remove(consumer: String) -> Subscription? {
        consumers[consumer].flatMap { remove($0) }
    }

    /// Removes every subscription.
    mutating func removeAll() -> [Subscription] {
        defer {
            entries = [:]
            consumers = [:]
        }
        let removed = Array(entries.values)
        for subscription in removed { subscription.isEnded = true }
        return removed
    }

    /// Changes every subscription; returns each one's client and what `change` returned.
    func updateAll<Value>(_ change: (Subscription) -> Value) -> [(client: ClientID, value: Value)] {
        entries.map { ($0.key, change($0.value)) }
    }

    /// How many consumers are read here.
    var consumerCount: Int { consumers.count }

    /// Whether a client here reads `consumer`.
    func reads(consumer: String) -> Bool { consumers[consumer] != nil }

    /// The cursor of `consumer`, if a client here reads it.
    func cursor(ofConsumer consumer: String) -> Int? {
        consumers[consumer].map { entries[$0]?.cursor ?? 0 }
    }

    /// Each consumer read here, with its cursor.
    func forEachConsumer(_ body: (_ name: String, _ cursor: Int) -> Void) {
        for (name, client) in consumers { body(name, entries[client]?.cursor ?? 0) }
    }
}
