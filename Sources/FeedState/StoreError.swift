/// Why the durable state could not be read or written, in plain words that name the file or the
/// feed concerned. A write that throws changed nothing, on disk or in memory.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure, for callers that answer differently (a rejected write is a bug or a
    /// stale request; an unavailable store may recover by itself; a damaged one needs `feedd state repair`).
    public struct Kind: Sendable, Equatable, CustomStringConvertible {
        private enum Raw: String {
            case rejected, unavailable, damaged, locked
        }

        private let raw: Raw

        /// The write contradicts what is stored: a generation going backwards, a cursor past
        /// the pages known, a feed the store has never heard of.
        public static let rejected = Kind(raw: .rejected)
        /// The disk refused: full, read-only, an I/O error. Retrying later may work.
        public static let unavailable = Kind(raw: .unavailable)
        /// The store file is empty, truncated or otherwise not a feedd state database.
        public static let damaged = Kind(raw: .damaged)
        /// Another process holds the state directory.
        public static let locked = Kind(raw: .locked)

        public var description: String { raw.rawValue }
    }

    public let kind: Kind
    /// What is wrong, without what to do about it.
    public let problem: String
    /// What the administrator can do (run `feedd state repair`), told where the error reaches
    /// them; left out where they are doing it already.
    public let advice: String?

    init(_ kind: Kind, _ problem: String, advice: String? = nil) {
        self.kind = kind
        self.problem = problem
        self.advice = advice
    }

    /// The problem and the advice.
    public var description: String { advice.map { "\(problem); \($0)" } ?? problem }

    /// The advice for a damaged store file.
    static let repairAdvice = "see `feedd state check` and `feedd state repair`"

    /// A store that cannot be reached now, such as a fleet's cluster (SPEC §8): retrying later may work.
    public static func unavailable(_ description: String) -> StoreError {
        StoreError(.unavailable, description)
    }
}
