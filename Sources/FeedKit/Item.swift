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

extension Item {
    /// An item whose source gives it no id: the id is a hash of its JSON, so the same data keeps
    /// the same id (FNV-1a, 64 bits, in hex).
    public init(hashing data: JSONValue) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data.serialized {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        self.init(id: String(repeating: "0", count: 16 - hex.count) + hex, data: data)
    }
}
