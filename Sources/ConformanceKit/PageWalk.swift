import FeedKit

/// Walks an adapter's pages in order, as the engine would, remembering what each answered, so
/// the later checks can ask for pages again and compare.
struct PageWalk {
    let adapter: any SourceAdapter
    let pages: AdapterConformance.Pages
    /// The token each page was asked for with, and what it answered, in page order.
    private var walked: [(token: String?, result: FetchResult)] = []
    /// The page on which each id was first seen.
    private var firstPageOfID: [String: Int] = [:]

    init(adapter: any SourceAdapter, pages: AdapterConformance.Pages) {
        self.adapter = adapter
        self.pages = pages
    }

    private var limit: Int {
        switch pages {
        case .finite(let total): total
        case .endless(let checking): checking
        case .upTo(let most): most
        }
    }

    /// Pages 1, 2, … following the tokens, checking each page's ids and whether it says the end
    /// where it should.
    mutating func walk(_ observe: (Finding) -> Void) async throws(Finding) {
        var token: String?
        for page in 1...limit {
            let result = try await fetch(page, token: token)
            guard case .page(let items, let next) = result else {
                throw Finding(failed: .notAPage, "page \(page)", "answered \(result) instead of a page")
            }
            walked.append((token, result))
            try checkIDs(items, page: page)
            let subject = "page \(page)"
            switch (next, pages) {
            case (.end, .finite(let total)) where page < total:
                throw Finding(failed: .endedEarly, subject, "the source ended after \(page) pages, not \(total)")
            case (.end, .endless):
                throw Finding(failed: .endedEarly, subject, "the source ended, but it should never end")
            case (.end, _):
                observe(Finding(passed: subject, "\(counted(items.count, "item")), the last page"))
                return
            case (.more, .finite(let total)) where page == total, (.later, .finite(let total)) where page == total:
                throw Finding(failed: .missingEnd, subject, "the last page does not say that the source ends")
            case (.more(let nextToken), _), (.later(let nextToken), _):
                observe(Finding(passed: subject, "\(counted(items.count, "item")), \(Self.describe(next))"))
                token = nextToken
            }
        }
    }

    /// The first and last pages again, with the same tokens: the same items must come back.
    func askAgain(_ observe: (Finding) -> Void) async throws(Finding) {
        guard adapter.reproducesPages else {
            observe(Finding(passed: "pages asked for again", "not checked: the source says its pages do not come back the same"))
            return
        }
        for page in Set([1, walked.count]).sorted() {
            let again = try await fetch(page, token: walked[page - 1].token)
            guard again == walked[page - 1].result else {
                throw Finding(failed: .changedWhenAskedAgain, "page \(page)", "came back different when asked for again with the same token")
            }
            observe(Finding(passed: "page \(page)", "came back the same when asked for again"))
        }
    }

    /// For an adapter that addresses pages by number: every page asked for without a token,
    /// last first, must be the page walked to.
    func askByNumber(_ observe: (Finding) -> Void) async throws(Finding) {
        guard adapter.pageAddressing == .direct else { return }
        for page in (1...walked.count).reversed() {
            let direct = try await fetch(page, token: nil)
            guard direct == walked[page - 1].result else {
                throw Finding(failed: .differsByNumber, "page \(page)", "asked for by its number alone differs from page \(page) walked to")
            }
        }
        observe(Finding(passed: "pages by number", "each of the \(counted(walked.count, "page")) is the same asked for by its number alone"))
    }

    private mutating func checkIDs(_ items: [Item], page: Int) throws(Finding) {
        for (index, item) in items.enumerated() {
            guard !item.id.isEmpty else { throw Finding(failed: .emptyID, "page \(page)", "item \(index + 1) has an empty id") }
            if let first = firstPageOfID[item.id] {
                let place = first == page ? "earlier on this page" : "on page \(first)"
                throw Finding(failed: .repeatedID, "page \(page)", "id \"\(item.id)\" was already given \(place); ids must be unique across the pages")
            }
            firstPageOfID[item.id] = page
        }
    }

    private func fetch(_ page: Int, token: String?) async throws(Finding) -> FetchResult {
        do {
            return try await adapter.fetch(PageRequest(page: page, token: token, generation: 1, seed: "test"))
        } catch {
            throw Finding(failed: .fetchFailed, "page \(page)", "the fetch failed: \(error)")
        }
    }

    private static func describe(_ next: NextPage) -> String {
        switch next {
        case .more(let token): "more follow (next token \(token.map { "\"\($0)\"" } ?? "null"))"
        case .later(let token): "more may follow later (next token \(token.map { "\"\($0)\"" } ?? "null"))"
        case .end: "the last page"
        }
    }
}
