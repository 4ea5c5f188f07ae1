/// One entry of a page: a stable id chosen by the adapter and the source's JSON value.
///
/// The id is what lets a subscriber recognise an item again (randomuser's `login.uuid`, the S3
/// feed's `id`, a file's 1-based line number). It is always a string on the wire.
public struct Item: Sendable, Hashable {
    public let id: String
    public let data: JSONValue

    public init(id: String, data: JSONValue) {
        self.id = id
        self.data = data
    }
}
