import FeedCluster
import FeedEngine
import FeedKit

/// What a page read from the fleet must be before any instance serves it, caches it or pages
/// on from it (SPEC §8): whoever published it, it is exactly one page line for its own address,
/// with a `Feedd-Page` header whose fields have the types and sizes an instance writes.
///
/// The line goes to clients as it is (it is what `next` sends), so a line is checked as a whole:
/// one line, one JSON text (simdjson), one object with the page line's members and no others
/// (an extra `"id"` would shadow the one a reply adds), its `feed`, `generation` and `page`
/// those of its subject, and items that are objects with a string `id` and a `data`.
enum PublishedPageCheck {
    /// The header's bounds: generous for any adapter's token, small for anything else.
    static let headerBytes = 16_384
    static let tokenBytes = 8_192

    static let pageMembers: Set<String> = ["type", "feed", "generation", "page", "items", "last"]
    static let itemMembers: Set<String> = ["id", "feed", "data"]

    /// The page `published` holds, or why it is not one.
    static func page(_ published: PublishedPage, subject: String) -> Result<FleetPage, Rejection> {
        do throws(Rejection) {
            func reject(_ problem: String) -> Rejection { Rejection(.page, at: subject, problem) }
            guard let header = published.headers[ClusterFleetLink.pageHeader] else { throw reject("it has no \(ClusterFleetLink.pageHeader) header") }
            try checkHeader(header, reject)
            let address = published.page
            guard let page = FleetPage(header: Array(header.utf8), feed: address.feed, generation: address.generation, number: address.page, line: published.line)
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
        guard line.count >= 3, line[line.count - 2] == UInt8(ascii: "}"), RawJSON(validating: line.dropLast()) != nil,
            let json = try? JSONValue(parsing: line.dropLast()), case .object(let members) = json
        else { throw reject("its line is not one JSON object") }
        guard Set(members.keys) == pageMembers, members["type"] == "page" else {
            throw reject("its line is not a page line (members \(members.keys.sorted().joined(separator: ", ")))")
        }
        guard members["feed"] == .string(address.feed), members["generation"] == .integer(Int64(address.generation)),
            members["page"] == .integer(Int64(address.page))
        else { throw reject("its line's feed, generation and page are not those of its subject") }
        guard case .bool = members["last"], case .array(let items) = members["items"] else { throw reject("its line's `items` or `last` is not of its type") }
        for (index, item) in items.enumerated() {
            guard case .object(let fields) = item, Set(fields.keys).isSubset(of: itemMembers), case .string = fields["id"], fields["data"] != nil
            else { throw reject("item \(index) is not an object with a string `id` and `data`") }
            switch fields["feed"] {
            case nil, .string?: break
            default: throw reject("item \(index)'s `feed` is not a string")
            }
        }
        return items.count
    }
}
