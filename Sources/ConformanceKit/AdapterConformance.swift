import FeedKit

/// The checks every source adapter must pass, so an adapter's own tests are a few lines, and
/// `feedd plugin check` can hold an exec plugin to the same rules:
///
/// ```swift
/// @Test func conforms() async throws {
///     try await AdapterConformance.check(try makeAdapter(), pages: .finite(3), failing: try makeBrokenAdapter())
/// }
/// ```
///
/// - pages come in order, each a page, following the tokens the adapter hands out;
/// - ids are non-empty and unique across the pages read;
/// - a page asked for again with the same token comes back the same (for an adapter whose
///   ``SourceAdapter/reproducesPages`` promises it);
/// - a finite source reports `.end` on its last page and `.more` before it;
/// - an adapter that says its pages are ``PageAddressing/direct`` answers every page asked for
///   by its number alone (no token) with the page it gave when walked to;
/// - a broken source throws ``SourceError``, never another error.
public enum AdapterConformance {
    /// How many pages the source has, as far as the check knows.
    public enum Pages: Sendable {
        /// The source has exactly this many pages.
        case finite(Int)
        /// The source never ends; check this many pages.
        case endless(checking: Int)
        /// Unknown: walk until the source ends, or this many pages (an exec plugin under check).
        case upTo(Int)
    }

    /// Runs every check and throws the first that fails, as a ``ConformanceFailure``.
    public static func check(_ adapter: any SourceAdapter, pages: Pages, failing: (any SourceAdapter)? = nil) async throws {
        var failure: Finding?
        _ = await run(adapter, pages: pages, failing: failing) { finding in
            if !finding.passed, failure == nil { failure = finding }
        }
        if let failure { throw ConformanceFailure(finding: failure) }
    }

    /// Runs the checks in order, telling `observe` of each as it passes or fails, and stops at
    /// the first failure. Returns whether every check passed.
    public static func run(
        _ adapter: any SourceAdapter, pages: Pages, failing: (any SourceAdapter)? = nil, observe: (Finding) -> Void
    ) async -> Bool {
        var walk = PageWalk(adapter: adapter, pages: pages)
        do {
            try await walk.walk(observe)
            try await walk.askAgain(observe)
            try await walk.askByNumber(observe)
            if let failing { try await checkFailure(of: failing, observe) }
            return true
        } catch {
            observe(error)
            return false
        }
    }

    /// A broken source must throw a ``SourceError``, which the daemon knows how to retry.
    private static func checkFailure(of failing: any SourceAdapter, _ observe: (Finding) -> Void) async throws(Finding) {
        do {
            let result = try await failing.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"))
            throw Finding(failed: .brokenSourceAnswered, "the broken source", "answered \(result) instead of failing")
        } catch is SourceError {
            observe(Finding(passed: "the broken source", "failed with a SourceError"))
        } catch let finding as Finding {
            throw finding
        } catch {
            throw Finding(failed: .notASourceError, "the broken source", "threw \(type(of: error)) (\(error)), not a SourceError")
        }
    }

    /// An adapter context for tests: logs go nowhere unless a sink is given.
    public static func context(
        feed: String = "test", timeout: Duration = .seconds(5), poll: Duration? = nil, sink: any LogSink = DiscardingSink(),
        stateDirectory: String? = nil
    ) -> AdapterContext {
        AdapterContext(
            feed: feed, requestTimeout: timeout, pollInterval: poll, logger: Logger(sink: sink), transport: transport,
            stateDirectory: stateDirectory)
    }

    /// One transport for every check in the process, as the daemon has one.
    public static let transport: any HTTPTransport = CurlTransport()
}

/// One check, passed or failed: `page 2: id "7" was already given on page 1`.
public struct Finding: Error, Sendable, CustomStringConvertible {
    /// The rules a check can find broken, for whoever explains them in its own terms.
    public enum Rule: Sendable, Hashable {
        case fetchFailed
        case notAPage
        case emptyID
        case repeatedID
        case endedEarly
        case missingEnd
        case changedWhenAskedAgain
        case differsByNumber
        case brokenSourceAnswered
        case notASourceError
    }

    /// What was checked: `page 2`, `the broken source`.
    public let subject: String
    public let message: String
    /// The rule broken, or nil for a check that passed.
    public let brokenRule: Rule?

    public var passed: Bool { brokenRule == nil }

    public var description: String { "\(subject): \(message)" }

    init(passed subject: String, _ message: String) {
        self.subject = subject
        self.message = message
        brokenRule = nil
    }

    init(failed rule: Rule, _ subject: String, _ message: String) {
        self.subject = subject
        self.message = message
        brokenRule = rule
    }
}

/// The first check that failed.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    public let finding: Finding

    public var description: String { finding.description }
}
