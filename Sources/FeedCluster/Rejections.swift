import FeedKit

/// Why a record read from the fleet was not used: what it was, where, and what was wrong.
public struct Rejection: Error, Sendable, CustomStringConvertible {
    /// The `reason` label of `feedd_cluster_rejected_total`.
    public enum Reason: String, Sendable, CaseIterable {
        /// A seal missing, or not made with the fleet key (any kind of record).
        case mac
        /// A page that is not exactly one page line matching its subject, or whose header is not valid.
        case page
        /// A generation out of range, or one going back.
        case generation
        /// A lease whose holder or expiry is not valid (an expiry past now + `lease`).
        case lease
        /// A cursor out of range, or on a page the fleet never published.
        case cursor
        /// A consumer claim that is not valid, or does not match its key.
        case claim
    }

    public let reason: Reason
    /// The subject, or the bucket and key, the record was read from.
    public let address: String
    public let problem: String

    public init(_ reason: Reason, at address: String, _ problem: String) {
        self.reason = reason
        self.address = address
        self.problem = problem
    }

    public var description: String { "\(address): \(problem)" }
}

/// Counts the records rejected, by reason, and logs them: at most one line per reason every
/// ``logInterval``, which then says how many more there were, so a flood of forged records
/// cannot flood the log.
public final class ClusterRejections: Sendable {
    /// The shortest time between two log lines for one reason.
    public static let logInterval: Duration = .seconds(10)

    private struct Tally {
        var total = 0
        var lastLogged: ContinuousClock.Instant?
        var unlogged = 0
    }

    private let tallies = Locked<[Rejection.Reason: Tally]>([:])
    private let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// How many records were rejected for each reason since start (every reason present).
    public var counts: [Rejection.Reason: Int] {
        tallies.withLock { tallies in
            Dictionary(uniqueKeysWithValues: Rejection.Reason.allCases.map { ($0, tallies[$0]?.total ?? 0) })
        }
    }

    /// Counts `rejection` and logs it unless a line for its reason was logged a moment ago.
    public func record(_ rejection: Rejection) {
        let now = ContinuousClock.now
        let skipped: Int? = tallies.withLock { tallies in
            var tally = tallies[rejection.reason, default: Tally()]
            tally.total += 1
            defer { tallies[rejection.reason] = tally }
            if let last = tally.lastLogged, now - last < Self.logInterval {
                tally.unlogged += 1
                return nil
            }
            defer { tally.unlogged = 0 }
            tally.lastLogged = now
            return tally.unlogged
        }
        guard let skipped else { return }
        let more = skipped > 0 ? "; \(skipped) more rejected for the same reason since the last such line" : ""
        logger.warning("rejected a record read from the fleet (\(rejection.reason.rawValue)): \(rejection)\(more)")
    }
}
