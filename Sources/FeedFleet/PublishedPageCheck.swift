import FeedCluster
import FeedEngine
import CSimdJSON
import FeedKit

/// What a page read from the fleet must be before any instance serves it, caches it or pages
/// on from it (SPEC §8): whoever published it, it is exactly one page line for its own address,
/// with a `Feedd-Page` header whose fields have the types and sizes an instance writes.
///
/// The line goes to clients as it is (it is what `next` sends), so a line is checked as a whole,
/// by simdjson (CSimdJSON's page-line check): one line, one JSON text, one object with the page line's members and
/// no others, each once (an extra `"id"` would shadow the one a reply adds), its `feed`,
/// `generation` and `page` those of its subject, and items that are objects with a string `id`
/// and a `data`.
enum PublishedPageCheck {
    /// The header's bounds: generous for any adapter's token, small for anything else.
    static let headerBytes = 16_384
    static let tokenBytes = 8_192

    /// The page `published` holds, or why it is not one.
    static func page(_ published: PublishedPage, subject: String) -> Result<FleetPage, Rejection> {
        do throws(Rejection) {
            func reject(_ problem: String) -> Rejection { Rejection(.page, at: subject, problem) }
            guard let header = published.headers[ClusterFleetLink.pageHeader] else { throw reject("it has no \(ClusterFleetLink.pageHeader) header") }
            try checkHeader(header, reject)
            let address = published.page
            guard let page = FleetPage(header: Array(header.utf8), feed: address.feed, generation: address.generation, number: address.page, line: SharedBytes(published.line))
            else { throw reject("its \(ClusterFleetLink.pageHeader) header is not one an instance writes") }
            let items = try lineItems(published.line, address: address, reject)
            guard items == page.itemCount else { throw reject("its header counts \(page.itemCount) items, its line holds \(items)") }
            return .success(page)
        } catch {
            return .failure(error)
        }
    }

    /// Whether the header's members are each of its type and within its bounds.
    private static func checkHeader(_ header: String, _ reject: (String) -> Rejection) throws(Rejection) {
        guard header.utf8.count <= headerBytes else { throw reject("its header has \(header.utf8.count) bytes, more than \(headerBytes)") }
        guard let json = try? JSONValue(parsing: header), case .object(let fields) = json else { throw reject("its header is not a JSON object") }
        guard Set(fields.keys).isSubset(of: ["items", "next", "token", "source_page"]) else { throw reject("its header has members an instance never writes") }
        guard case .integer(let items) = fields["items"], (0...Int64(Int32.max)).contains(items) else { throw reject("its header's `items` is not a count") }
        guard case .integer(let sourcePage) = fields["source_page"], (1...RecordLimits.maximumPage).contains(sourcePage) else {
            throw reject("its header's `source_page` is not a page number")
        }
        switch fields["token"] {
        case nil, .null?: break
        case .string(let token)? where token.utf8.count <= tokenBytes && fields["next"] != "end": break
        default: throw reject("its header's `token` is not a string of at most \(tokenBytes) bytes after `next` \"more\" or \"later\"")
        }
    }

    /// How many items the line holds, once it is known to be the page line of `address`.
    private static func lineItems(_ line: [UInt8], address: PageAddress, _ reject: (String) -> Rejection) throws(Rejection) -> Int {
        guard line.last == UInt8(ascii: "\n"), line.firstIndex(of: UInt8(ascii: "\n")) == line.count - 1 else {
            throw reject("its payload is not exactly one line")
        }
        guard line.count >= 3, line[line.count - 2] == UInt8(ascii: "}") else { throw reject("its line is not one JSON object") }
        var items = 0
        let problem = line.withUnsafeBufferPointer { bytes in
            address.feed.utf8CString.withUnsafeBufferPointer { feed in
                feedd_page_line_check(
                    bytes.baseAddress, bytes.count - 1, feed.baseAddress, feed.count - 1, Int64(address.generation), Int64(address.page), &items)
            }
        }
        switch problem {
        case feedd_page_line_ok: return items
        case feedd_page_line_not_an_object: throw reject("its line is not one JSON object")
        case feedd_page_line_members: throw reject("its line's members are not those of a page line, each once")
        case feedd_page_line_address: throw reject("its line's type, feed, generation and page are not those of a page line for its subject")
        case feedd_page_line_types: throw reject("its line's `items` or `last` is not of its type")
        default: throw reject("item \(items) is not an object with a string `id` and `data`")
        }
    }
}
