import FeedKit

/// What a feed knows of its current generation's pages: how to ask the source for each, and
/// where the feed ends (for good, or for now on a live source).
struct GenerationPaging {
    let number: Int
    /// The generation's ``PageRequest/seed``.
    let seed: String
    private let addressing: PageAddressing
    private let wraps: Bool
    /// How to ask for pages whose predecessor has been fetched (and page 1). For a directly
    /// addressable source only the one after the furthest fetched is kept: any other is built
    /// from its number.
    private var requests: [Int: PageRequest] = [:]
    /// The highest page whose request is known; on a sequential source every page up to it is.
    private var furthestKnown = 1
    /// The last page, once a source that ends has said so.
    private(set) var lastPage: Int?
    /// A live source said page N does not exist yet; `next` past N − 1 answers `end` until it does.
    var caughtUpAt: Int?
    /// The highest page filed in this generation (read from the store after a restart).
    private(set) var furthestFiled = 0

    /// `storedTokens[k − 1]`: the token page k returned, as the store kept it, so the pages
    /// after it can be asked for again after a restart (a `wrap` feed starts from page 1: its
    /// feed page numbers do not say which source page comes next).
    init(number: Int, addressing: PageAddressing, wraps: Bool, seed: String = GenerationPaging.randomSeed(), storedTokens: [String?] = []) {
        self.number = number
        self.seed = seed
        self.addressing = addressing
        self.wraps = wraps
        requests[1] = PageRequest(page: 1, token: nil, generation: number, seed: seed)
        guard !wraps, addressing == .sequential else { return }
        for (index, token) in storedTokens.enumerated() where index + 2 <= PageNumber.maximum {
            requests[index + 2] = PageRequest(page: index + 2, token: token, generation: number, seed: seed)
        }
        furthestKnown = storedTokens.count + 1
        furthestFiled = storedTokens.count
    }

    /// The token page `page` returned, if the feed still knows it (a directly addressable
    /// source needs none: its pages are asked for by number).
    func token(returnedBy page: Int) -> String? {
        requests[page + 1]?.token
    }

    /// Whether what the store keeps of pages 1 to `page` (the token each returned) is known: a
    /// directly addressable source's pages need no token, any other's must have been fetched.
    func knowsTokens(through page: Int) -> Bool {
        (addressing == .direct && !wraps) || page <= furthestFiled
    }

    static func randomSeed() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    func isPastEnd(_ page: Int) -> Bool {
        lastPage.map { page > $0 } ?? false
    }

    /// The fetch that brings the feed closer to `page`: that page itself where its request is
    /// known or can be built (`jumped`: built from its number, no page before it fetched), else
    /// (on a sequential source) the first page not yet fetched.
    func step(toward page: Int) -> Step? {
        if let request = requests[page] { return Step(page: page, request: request, jumped: false) }
        if addressing == .direct, !wraps {
            return Step(page: page, request: PageRequest(page: page, token: nil, generation: number, seed: seed), jumped: true)
        }
        guard furthestKnown < page, let request = requests[furthestKnown] else { return nil }
        return Step(page: furthestKnown, request: request, jumped: false)
    }

    /// One page to ask the source for, on the way to a wanted one.
    struct Step: Equatable {
        let page: Int
        let request: PageRequest
        /// Asked for by number alone, its predecessor never fetched.
        let jumped: Bool
    }

    /// Files what a fetch of `page` said about the pages after it.
    mutating func record(page: Int, request: PageRequest, next: NextPage, isEmpty: Bool, jumped: Bool) {
        if caughtUpAt == page { caughtUpAt = nil }
        furthestFiled = max(furthestFiled, page)
        let following: PageRequest?
        switch next {
        case .more(let token):
            following = PageRequest(page: request.page + 1, token: token, generation: number, seed: seed)
        case .later(let token):
            following = PageRequest(page: request.page + 1, token: token, generation: number, seed: seed)
            caughtUpAt = page + 1
        case .end where wraps && !(isEmpty && request.page == 1):
            following = PageRequest(page: 1, token: nil, generation: number, seed: seed)
        case .end:
            following = nil
            // A page jumped to past the source's end comes back empty: the feed ends before it.
            // Otherwise this page is the last.
            let endsBefore = isEmpty && jumped && page > 1
            let last = endsBefore ? page - 1 : page
            lastPage = min(lastPage ?? last, last)
        }
        if addressing == .direct, !wraps { requests[page] = nil }
        if let following, page < PageNumber.maximum {
            requests[page + 1] = following
            furthestKnown = max(furthestKnown, page + 1)
        }
    }
}
