/// Chooses what a feed asks its upstream for next, from what its subscriptions want.
///
/// Fetching is demand-driven: the lowest page some subscription waits for, else the lowest it
/// wants prefetched, one request at a time, so any number of subscribers at the same page cause
/// one upstream request and nothing is fetched while nobody moves.
struct FetchPlanner {
    /// How deep subscriptions look ahead: `prefetch` pages, and at most `limit` (half the cache).
    struct Demand {
        let prefetch: Int
        let limit: Int

        init(prefetch: Int, cachePages: Int) {
            self.prefetch = prefetch
            limit = max(cachePages / 2, 1)
        }
    }

    /// What to do next.
    enum Plan: Equatable {
        /// Fetch `step` on the way to `target`; `urgent` when a subscription waits for it.
        case fetch(GenerationPaging.Step, target: Int, urgent: Bool)
        /// The step is a live source's newest page: wait until it may have more.
        case waitForNewData(GenerationPaging.Step)
    }

    /// The most pages one run of calls may bring (see ``PageFetch``).
    static let maxRunPages = 32

    /// What a look at every subscription depends on beyond the subscriptions' own positions:
    /// the pages a call brings and a cache eviction (both only under a new call, the eviction
    /// before its fetch), a new generation, a new subscription. Anything else calls ``forget()``.
    struct Look: Equatable {
        let callID: Int
        let generation: Int
        let subscriptionCount: Int
    }

    /// Set when a look at every subscription found no page missing, to what that look depended on.
    private var lastFullLook: Look?

    /// Something changed that a full look depends on.
    mutating func forget() {
        lastFullLook = nil
    }

    /// Whether planning can be skipped after only `moved` moved: since a look at every
    /// subscription found nothing missing, no call started, no generation began and no
    /// subscription came, so only its pages can be missing. A thousand consumers stepping page by
    /// page cost a thousand looks, not a million.
    func canSkip(after moved: Subscription, look: Look, demand: Demand, cache: PageCache, paging: GenerationPaging) -> Bool {
        lastFullLook == look && firstMissingWantedPage(of: moved, demand: demand, cache: cache, paging: paging) == nil
    }

    /// What to fetch next; nil when nothing is missing (remembered as `look`) or nothing can be done.
    mutating func plan(
        _ subscriptions: SubscriptionTable, demand: Demand, cache: PageCache, paging: GenerationPaging, look: Look
    ) -> Plan? {
        lastFullLook = nil
        let awaited = lowestMissingAwaitedPage(subscriptions, cache: cache, paging: paging)
        guard let wanted = awaited ?? lowestMissingWantedPage(subscriptions, demand: demand, cache: cache, paging: paging) else {
            lastFullLook = look
            return nil
        }
        guard let step = paging.step(toward: wanted) else { return nil }
        if step.page == paging.caughtUpAt { return .waitForNewData(step) }
        return .fetch(step, target: wanted, urgent: awaited != nil)
    }

    /// How many pages a run starting at `first` may bring: `first` (which has room already),
    /// then those after it that are on the way to `target` or wanted, and missing, as long as
    /// the cache has room for them on a prefetch's terms.
    static func runLength(
        from first: Int, toward target: Int, cache: inout PageCache, limits: PageCache.Limits, paging: GenerationPaging,
        wanted: (Int) -> Bool
    ) -> Int {
        var count = 1
        while count < maxRunPages {
            let number = first + count
            guard cache[number] == nil, !paging.isPastEnd(number), number <= target || wanted(number) else { break }
            var hasRoom = true
            while hasRoom, cache.wouldExceed(limits, adding: cache.averageCost * (count + 1), pages: count + 1) {
                hasRoom = cache.evictOne(urgent: false, wanted: wanted, awaited: { _ in true })
            }
            guard hasRoom else { break }
            count += 1
        }
        return count
    }

    // MARK: Who wants what

    static func isWanted(_ number: Int, by subscriptions: SubscriptionTable, demand: Demand) -> Bool {
        subscriptions.all.contains { $0.wantedPages(prefetch: demand.prefetch, limit: demand.limit)?.contains(number) == true }
    }

    /// Whether a subscription is waiting for page `number` right now (not merely prefetching it).
    static func isAwaited(_ number: Int, by subscriptions: SubscriptionTable) -> Bool {
        subscriptions.all.contains { $0.awaitedPage == number }
    }

    /// The lowest page a subscription is waiting for right now that is not cached, if any.
    private func lowestMissingAwaitedPage(_ subscriptions: SubscriptionTable, cache: PageCache, paging: GenerationPaging) -> Int? {
        var lowest: Int?
        for subscription in subscriptions.all {
            guard let number = subscription.awaitedPage, cache[number] == nil, !paging.isPastEnd(number) else { continue }
            if lowest.map({ number < $0 }) ?? true { lowest = number }
        }
        return lowest
    }

    /// The lowest page some subscription wants (prefetch included) that is not cached, if any.
    private func lowestMissingWantedPage(_ subscriptions: SubscriptionTable, demand: Demand, cache: PageCache, paging: GenerationPaging) -> Int? {
        var lowest: Int?
        for subscription in subscriptions.all {
            if let number = firstMissingWantedPage(of: subscription, below: lowest, demand: demand, cache: cache, paging: paging) {
                lowest = number
            }
        }
        return lowest
    }

    /// The first page below `bound` that `subscription` wants (prefetch included, so its awaited
    /// page too) and that is not cached, if any.
    private func firstMissingWantedPage(
        of subscription: Subscription, below bound: Int? = nil, demand: Demand, cache: PageCache, paging: GenerationPaging
    ) -> Int? {
        guard let wanted = subscription.wantedPages(prefetch: demand.prefetch, limit: demand.limit) else { return nil }
        for number in wanted {
            if paging.isPastEnd(number) { return nil }
            if let bound, number >= bound { return nil }
            if cache[number] == nil { return number }
        }
        return nil
    }
}
