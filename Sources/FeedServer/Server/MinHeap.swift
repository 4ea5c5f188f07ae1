/// A binary min-heap: the smallest element first, added and taken in O(log n).
///
/// The loop's turn order and its timers both keep one, and neither removes from the middle: an
/// element that is no longer wanted is skipped when it surfaces, or dropped by ``removeAll(where:)``.
struct MinHeap<Element: Comparable> {
    private var elements: [Element] = []

    var count: Int { elements.count }
    var first: Element? { elements.first }

    mutating func push(_ element: Element) {
        elements.append(element)
        var child = elements.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child] < elements[parent] else { break }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func popFirst() -> Element? {
        guard let first = elements.first else { return nil }
        let last = elements.removeLast()
        guard !elements.isEmpty else { return first }
        elements[0] = last
        siftDown(0)
        return first
    }

    /// Drops the elements `shouldBeRemoved` picks, and restores the order bottom-up in O(n).
    mutating func removeAll(where shouldBeRemoved: (Element) -> Bool) {
        elements.removeAll(where: shouldBeRemoved)
        for parent in stride(from: elements.count / 2 - 1, through: 0, by: -1) { siftDown(parent) }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < elements.count else { return }
            let right = left + 1
            let smaller = right < elements.count && elements[right] < elements[left] ? right : left
            guard elements[smaller] < elements[parent] else { return }
            elements.swapAt(smaller, parent)
            parent = smaller
        }
    }
}
