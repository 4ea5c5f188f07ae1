/// "Did you mean …?": the closest of the names someone could have meant by a name they mistyped.
///
/// Closeness is the optimal string alignment distance (edits of one character: insert, delete,
/// replace, or swap two neighbours), ignoring case and counting `-` and `_` as the same. A
/// name is suggested only within a third of its length (at least one edit, at most three), or
/// when it begins with the three or more characters typed, so `pagesize` finds `page_size`,
/// `fiel` finds `file` and `warn` finds `warning`, but `x` finds nothing.
public enum SpellingSuggestion {
    /// The candidate closest to `typed`, the first of them on a tie; nil when none is close.
    public static func closest(to typed: String, among candidates: some Sequence<String>) -> String? {
        let typedKey = normalized(typed)
        let limit = min(3, max(1, typedKey.count / 3))
        var best: (name: String, distance: Int)?
        for candidate in candidates where candidate != typed {
            let candidateKey = normalized(candidate)
            let isPrefix = typedKey.count >= 3 && candidateKey.starts(with: typedKey)
            let distance = isPrefix ? limit : Self.distance(typedKey, candidateKey, limit: limit)
            guard distance <= limit, distance < (best?.distance ?? .max) else { continue }
            best = (candidate, distance)
        }
        return best?.name
    }

    /// `; did you mean "NAME"?` for the closest candidate, or the empty string: for the end of a message.
    public static func didYouMean(_ typed: String, among candidates: some Sequence<String>) -> String {
        closest(to: typed, among: candidates).map { "; did you mean \"\($0)\"?" } ?? ""
    }

    private static func normalized(_ name: String) -> [Character] {
        name.lowercased().map { $0 == "-" ? "_" : $0 }
    }

    /// The optimal string alignment distance between `a` and `b`, or more than `limit` once
    /// it is sure to exceed it.
    private static func distance(_ a: [Character], _ b: [Character], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], beforePrevious[j - 2] + 1)
                }
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return previous[b.count]
    }
}
