import Foundation
import FeedKit
import FeedServer

/// Gathers the pages of one `GET /v1/feeds/F/pages` from its reading: `count` pages, or fewer
/// and then `end`, like `next`. A page the feed must fetch first is awaited (the request waits,
/// suspended); a failing source ends the gathering with what it has, or with the error.
@MainActor
final class PageGathering: FeedEventSink {
    /// How the gathering ended.
    enum Outcome {
        /// The pages, and whether the feed has no page after the last (for now, on a live source).
        /// `complete`: the reading answered everything asked of it, so it may serve the next request.
        case pages([DeliveredPage], generation: Int, end: Bool, complete: Bool)
        case failed(HTTPError)
    }

    private let count: Int
    private let feed: String
    private var pages: [DeliveredPage] = []
    private var onOutcome: ((Outcome) -> Void)?

    init(feed: String, count: Int, onOutcome: @escaping (Outcome) -> Void) {
        self.feed = feed
        self.count = count
        self.onOutcome = onOutcome
    }

    var isFinished: Bool { onOutcome == nil }

    /// Ends the gathering now (the store failed, the client left).
    func fail(_ error: HTTPError) {
        finish(.failed(error))
    }

    // MARK: FeedEventSink

    /// The pages are only references to the feed's cached ones, at most `count` (≤ 100) of them.
    var canTakePage: Bool { !isFinished }

    func receive(_ event: FeedEvent, from reading: FeedReading) {
        guard !isFinished else { return }
        switch event {
        case .page(let page):
            pages.append(page)
            if pages.count == count { finish(.pages(pages, generation: page.generation, end: page.isLast, complete: true)) }
        case .end:
            finish(.pages(pages, generation: pages.last?.generation ?? reading.generation, end: true, complete: true))
        case .upstreamFailing(let message, let retryIn):
            // What is here is worth having now; the rest the client asks for again.
            if let last = pages.last {
                finish(.pages(pages, generation: last.generation, end: false, complete: false))
            } else {
                finish(.failed(.upstream(message, feed: feed, retryIn: retryIn)))
            }
        case .refreshed:
            // Pages of two generations never share an answer: those of the old one go out now;
            // with none yet, the request is answered from the new generation.
            if let last = pages.last { finish(.pages(pages, generation: last.generation, end: false, complete: false)) }
        case .ended(let code, let message):
            if let last = pages.last {
                finish(.pages(pages, generation: last.generation, end: false, complete: false))
            } else {
                finish(.failed(code == "unknown_feed" ? .unknownFeed(feed, known: []) : HTTPError(status: 409, code: code, message: message, feed: feed)))
            }
        }
    }

    func flush() {}

    private func finish(_ outcome: Outcome) {
        guard let onOutcome else { return }
        self.onOutcome = nil
        onOutcome(outcome)
    }

    // MARK: The answer

    /// `{"feed","generation","pages":[…],"end"}`: each page is the object of its `page` line,
    /// sent from the feed's own bytes.
    nonisolated static func body(feed: String, pages: [DeliveredPage], generation: Int, end: Bool) -> [PageBytes] {
        var head = Message()
        head.field("feed", feed)
        head.field("generation", generation)
        var pieces = [PageBytes(head.openBody() + Array(#","pages":["#.utf8))]
        for (index, page) in pages.enumerated() {
            pieces.append(page.openBody)
            pieces.append(index == pages.count - 1 ? Closings.last : Closings.between)
        }
        pieces.append(end ? Closings.ended : Closings.notEnded)
        return pieces
    }

    /// The body of a one-page answer as one piece, made once per page (and `end`): the answer a
    /// reader scrolling page by page gets, which libmicrohttpd sends in the write of its header.
    static func onePageBody(feed: String, page: DeliveredPage, end: Bool) -> PageBytes {
        onePageAnswers.bytes(for: page.openBody, variant: end) {
            let pieces = body(feed: feed, pages: [page], generation: page.generation, end: end)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(pieces.reduce(0) { $0 + $1.count })
            for piece in pieces { bytes.append(contentsOf: piece.buffer) }
            return bytes
        }
    }

    private static var onePageAnswers = PageMemo(capacity: 16)

    /// The bytes between and after the pages, shared by every answer.
    private enum Closings {
        static let between = PageBytes(Array("},".utf8))
        static let last = PageBytes(Array("}".utf8))
        static let ended = PageBytes(Array(#"],"end":true}"#.utf8))
        static let notEnded = PageBytes(Array(#"],"end":false}"#.utf8))
    }

    /// Names an answer by what it holds: pages of a generation never change, so the generation,
    /// the first and last page and `end` say whether a client's copy is current.
    nonisolated static func entityTag(generation: Int, after: Int, pages: [DeliveredPage], end: Bool) -> String {
        let first = pages.first?.number ?? after
        let last = pages.last?.number ?? after
        return "\"\(generation)-\(first)-\(last)\(end ? "-end" : "")\""
    }

    /// Whether `ifNoneMatch` (a request's `If-None-Match`) names `tag`, or is `*`.
    nonisolated static func matches(_ ifNoneMatch: String?, _ tag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        return ifNoneMatch.split(separator: ",").contains { candidate in
            var candidate = candidate.trimmingCharacters(in: .whitespaces)
            if candidate == "*" { return true }
            // A weak comparison (RFC 9110 §13.1.2): W/ does not matter for If-None-Match.
            if candidate.hasPrefix("W/") { candidate.removeFirst(2) }
            return candidate == tag
        }
    }
}
