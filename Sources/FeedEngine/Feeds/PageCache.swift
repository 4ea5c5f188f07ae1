/// A feed's fetched pages, bounded by a page count and by the bytes they take in memory.
///
/// Which page to give up is the feed's choice (it knows who wants what); the cache keeps the
/// pages and the accounting, so the bounds are checked in one place.
struct PageCache {
    struct Limits: Equatable {
        var pages: Int
        var bytes: Int
    }

    private var pages: [Int: Page] = [:]
    /// The memory the cached pages take, as ``Page/cost`` counts it.
    private(set) var byteCount = 0

    var count: Int { pages.count }
    var isEmpty: Bool { pages.isEmpty }
    /// Cached page numbers, lowest first.
    var numbers: [Int] { pages.keys.sorted() }

    subscript(number: Int) -> Page? { pages[number] }

    mutating func insert(_ page: Page) {
        if let replaced = pages.updateValue(page, forKey: page.number) { byteCount -= replaced.cost }
        byteCount += page.cost
    }

    mutating func remove(_ number: Int) {
        if let removed = pages.removeValue(forKey: number) { byteCount -= removed.cost }
    }

    mutating func removeAll() {
        pages = [:]
        byteCount = 0
    }

    /// Whether one more page of `cost` bytes would take the cache past either limit.
    func wouldExceed(_ limits: Limits, adding cost: Int) -> Bool {
        pages.count + 1 > limits.pages || byteCount + cost > limits.bytes
    }

    /// Whether the cache is past either limit now.
    func exceeds(_ limits: Limits) -> Bool {
        pages.count > limits.pages || byteCount > limits.bytes
    }

    /// What a page is likely to cost: the average of those cached, or nothing when there are none.
    var averageCost: Int { pages.isEmpty ? 0 : byteCount / pages.count }
}
