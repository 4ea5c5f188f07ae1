/// Bytes made from a page, made once per page rather than once per request or per stream: a
/// page goes to a thousand followers, or to every reader that asks for it, one after another
/// and interleaved with the pages next to it.
///
/// It remembers what it made for the last ``capacity`` pages, each with the page's bytes, so
/// that no other page's can take their address while they are remembered.
@MainActor
struct PageMemo {
    private var entries: [(page: PageBytes, variant: Bool, made: PageBytes)] = []
    private var oldest = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// What `make` makes for `page` (and `variant`, such as whether the answer ends the feed),
    /// made now only if it is not remembered.
    mutating func bytes(for page: PageBytes, variant: Bool = false, make: () -> [UInt8]) -> PageBytes {
        if let entry = entries.first(where: { $0.page === page && $0.variant == variant }) { return entry.made }
        let made = PageBytes(make())
        if entries.count < capacity {
            entries.append((page, variant, made))
        } else {
            entries[oldest] = (page, variant, made)
            oldest = (oldest + 1) % capacity
        }
        return made
    }
}
