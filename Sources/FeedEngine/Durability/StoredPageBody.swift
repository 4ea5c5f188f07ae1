import FeedKit
import FeedState

/// A page of a source that cannot fetch it again (``SourceAdapter/reproducesPages`` false), as the
/// state directory keeps it in `pages.body`: the page's ``FleetPage/header`` on one line, then the
/// page's line exactly as subscribers were sent it. Served from there after a restart, or once the
/// cache gave it up, the page is the same bytes, and the feed pages on from it as the source said:
///
/// ```
/// {"items":2,"next":"more","source_page":3,"token":"after-3"}
/// {"type":"page","feed":"custom","generation":1,"page":3,"items":[…],"last":false}
/// ```
enum StoredPageBody {
    /// The page to record, with the token of the page after it: its header line is the body,
    /// and its line the body's tail, stored from the page's own buffer.
    static func record(_ page: FleetPage) -> NewPage {
        NewPage(token: page.next.token, body: Array(page.header.utf8) + [UInt8(ascii: "\n")], bodyTail: page.line)
    }

    /// The page stored as `body`, with what its source said of the page after it; nil if `body`
    /// is not a stored page.
    static func decode(_ body: [UInt8], feed: String, generation: Int, number: Int, wrap: Bool) -> (page: Page, next: NextPage)? {
        guard let newline = body.firstIndex(of: UInt8(ascii: "\n")),
            let stored = FleetPage(
                header: body[..<newline], feed: feed, generation: generation, number: number,
                line: body.withUnsafeBytes { SharedBytes(copying: UnsafeRawBufferPointer(rebasing: $0[(newline + 1)...])) }),
            let page = Page(stored, wrap: wrap)
        else { return nil }
        return (page, stored.next)
    }
}

extension StoredFeed {
    /// Whether the store holds the items of page `number`, so it is read from there, not fetched.
    func keepsItems(of number: Int) -> Bool {
        number >= 1 && number <= pages.count && pages[number - 1].hasBody
    }

    /// Whether page `number` had its items stored and lost them to `daemon.state_page_bytes`:
    /// its source cannot give them again.
    func lostItems(of number: Int) -> Bool {
        number <= bodiesDroppedThrough
    }

    /// The tokens the feed pages on with after a restart. When the last stored page's items are
    /// kept, its token is left out: that page is read from the store first, and says how its
    /// source went on (it may have ended, or had nothing more yet), which its token alone does not.
    var tokensToPageOnWith: [String?] {
        (pages.last?.hasBody == true ? pages.dropLast() : pages[...]).map(\.token)
    }
}

extension SharedBytes: FixedBytes {}

extension NextPage {
    /// The token that fetches the page after, if one may follow.
    var token: String? {
        switch self {
        case .more(let token), .later(let token): token
        case .end: nil
        }
    }
}
