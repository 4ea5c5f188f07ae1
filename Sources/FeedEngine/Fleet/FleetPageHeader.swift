import FeedKit

extension FleetPage {
    /// What a page's line alone does not say, as one JSON object: `items` (how many), `next`
    /// (`more`, `later` or `end`, as the source answered), `token` (the next page's token, if any)
    /// and `source_page` (the source page it was asked for as). A fleet publishes it beside each
    /// page, and a page kept in the state directory is stored with it (``StoredPageBody``), so an
    /// instance that did not fetch the page, or a daemon after a restart, pages on from it.
    public var header: String {
        var fields: [String: JSONValue] = ["items": .integer(Int64(itemCount)), "source_page": .integer(Int64(sourcePage))]
        switch next {
        case .more(let token):
            fields["next"] = "more"
            fields["token"] = token.map(JSONValue.string)
        case .later(let token):
            fields["next"] = "later"
            fields["token"] = token.map(JSONValue.string)
        case .end:
            fields["next"] = "end"
        }
        return String(decoding: JSONValue.object(fields).serialized, as: UTF8.self)
    }

    /// The page whose ``header`` is `header` and whose line is `line`; nil if the header is not
    /// one, or if its numbers are out of range (a page holds at most 2^31 items and is at most
    /// source page 2^40), which a header from the fleet or the state directory may be.
    public init?(header: some Collection<UInt8>, feed: String, generation: Int, number: Int, line: SharedBytes) {
        guard let fields = try? JSONValue(parsing: Array(header)), let items = fields["items"]?.integerValue,
            let sourcePage = fields["source_page"]?.integerValue, (0...Int64(Int32.max)).contains(items),
            (1...Int64(PageNumber.maximum)).contains(sourcePage)
        else { return nil }
        let token = fields["token"]?.stringValue
        let next: NextPage
        switch fields["next"]?.stringValue {
        case "more": next = .more(token: token)
        case "later": next = .later(token: token)
        case "end": next = .end
        default: return nil
        }
        self.init(feed: feed, generation: generation, number: number, line: line, itemCount: Int(items), next: next, sourcePage: Int(sourcePage))
    }
}
