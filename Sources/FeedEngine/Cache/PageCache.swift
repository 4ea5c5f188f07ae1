/// A feed's fetched pages, bounded by a page count and by the bytes they take in memory.
///
/// The cache keeps the pages, the accounting and the rule for giving pages up (below); who wants
/// which page is the feed's to say, through the `wanted` and `awaited` questions it passes in.
struct PageCache {
    struct Limits: Equatable {
        var pages: Int
        var bytes: Int
    }

    private var pages: [Int: Page] = [:]
    /// Cached page numbers, lowest first. Kept sorted as pages come (almost always at the end),
    /// since choosing a page to give up walks them in order on every fetch of a busy feed.
    private(set) var numbers: [Int] = []
    /// The memory the cached pages take, as ``Page/cost`` counts it.
    private(set) var byteCount = 0

    var count: Int { pages.count }
    var isEmpty: Bool { pages.isEmpty }

    subscript(number: Int) -> Page? { pages[number] }

    mutating func insert(_ page: Page) {
        if let replaced = pages.updateValue(page, forKey: page.number) {
            byteCount -= replaced.cost
        } else {
            numbers.insert(page.number, at: insertionIndex(of: page.number))
        }
        byteCount += page.cost
    }

    mutating func remove(_ number: Int) {
        guard let removed = pages.removeValue(forKey: number) else { return }
        byteCount -= removed.cost
        numbers.remove(at: insertionIndex(of: number))
    }

    mutating func removeAll() {
        pages = [:]
        numbers = []
        byteCount = 0
    }

    /// Where `number` is or would go in ``numbers``.
    private func insertionIndex(of number: Int) -> Int {
        if let last = numbers.last, last < number { return numbers.count }
        var low = 0
        var high = numbers.count
        while low < high {
            let middle = (low + high) / 2
            if numbers[middle] < number { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether `count` more pages of `cost` bytes together would take the cache past either limit.
    func wouldExceed(_ limits: Limits, adding cost: Int, pages count: Int = 1) -> Bool {
        pages.count + count > limits.pages || byteCount + cost > limits.bytes
    }

    /// Whether the cache is past either limit now.
    func exceeds(_ limits: Limits) -> Bool {
        pages.count > limits.pages || byteCount > limits.bytes
    }

    /// What a page is likely to cost: the average of those cached, or nothing when there are none.
    var averageCost: Int { pages.isEmpty ? 0 : byteCount / pages.count }

    // MARK: Giving pages up

    /// Keeps the cache within `limits` before a fetch. A prefetch only ever replaces pages nobody
    /// wants, or is skipped (false). A page a subscriber is waiting for (`urgent`, or one on the
    /// way to it) may also replace prefetched pages, furthest first, and is fetched even when
    /// every cached page is awaited: the limit is then exceeded by at most one page per
    /// subscription, since refusing it would stall those subscribers for good.
    mutating func makeRoom(within limits: Limits, urgent: Bool, wanted: (Int) -> Bool, awaited: (Int) -> Bool) -> Bool {
        while wouldExceed(limits, adding: averageCost) {
            guard evictOne(urgent: urgent, wanted: wanted, awaited: awaited) else { return urgent }
        }
        return true
    }

    /// Gives up pages while the cache is over its limits (after a page arrived, or a reload
    /// lowered them), on a prefetch's terms.
    mutating func trim(to limits: Limits, wanted: (Int) -> Bool) {
        while exceeds(limits), evictOne(urgent: false, wanted: wanted, awaited: { _ in true }) {}
    }

    /// Gives up one page nobody wants, else (when `urgent`) the furthest one nobody waits for;
    /// false if there is none.
    mutating func evictOne(urgent: Bool, wanted: (Int) -> Bool, awaited: (Int) -> Bool) -> Bool {
        if let unwanted = numbers.first(where: { !wanted($0) }) {
            remove(unwanted)
            return true
        }
        if urgent, let prefetched = numbers.last(where: { !awaited($0) }) {
            remove(prefetched)
            return true
        }
        return false
    }
}
