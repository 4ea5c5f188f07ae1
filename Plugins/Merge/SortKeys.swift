import FeedKit

/// The `newest` order's sort keys of the members' current items, worked out once per item (an
/// item holding JSON text is parsed to read its field).
struct SortKeys {
    private var known: [String: Double?] = [:]

    /// Seconds since the epoch for an RFC 3339 time, the number itself for a number; nil for
    /// anything else or nothing.
    mutating func key(of item: Item, at field: DotPath) -> Double? {
        if let key = known[item.id] { return key }
        let key: Double?
        switch field.value(in: item.data) {
        case .integer(let number)?: key = Double(number)
        case .double(let number)?: key = number
        case .string(let text)?: key = FeedTime(text).map { Double($0.millisecondsSinceEpoch) / 1000 }
        default: key = nil
        }
        known[item.id] = key
        return key
    }
}
