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
}
