/// One entry of a page: a stable id chosen by the adapter and the source's JSON value.
///
/// The id is what lets a subscriber recognise an item again (randomuser's `login.uuid`, the S3
/// feed's `id`, a file's 1-based line number). It is always a string on the wire. The data is a
/// parsed ``JSONValue`` or, where the source gives JSON text, that text as it came (``RawJSON``);
/// two items are equal when their ids and values are, however each was made.
public struct Item: Sendable, Hashable {
    /// The item's stable id, unique within its feed.
    public let id: String
    /// The feed an item was taken from, on a feed that gathers others' items (`merge`); sent as
    /// the item's `"feed"`.
    public let feed: String?
    private let storage: Storage

    private enum Storage: Sendable {
        case value(JSONValue)
        case text(RawJSON)
    }

    /// An item with `id` and `data`; `feed` names the member feed it came from, for a `merge` feed's items.
    public init(id: String, data: JSONValue, feed: String? = nil) {
        self.id = id
        self.feed = feed
        storage = .value(data)
    }

    /// An item whose data is JSON text the adapter already has; it is sent as it is.
    public init(id: String, json: RawJSON, feed: String? = nil) {
        self.id = id
        self.feed = feed
        storage = .text(json)
    }

    /// This item as a feed that gathers others' items has it: id `FEED:ID`, and `feed` naming
    /// where it came from.
    public func gathered(from feed: String) -> Item {
        Item(id: "\(feed):\(id)", storage: storage, feed: feed)
    }

    private init(id: String, storage: Storage, feed: String?) {
        self.id = id
        self.feed = feed
        self.storage = storage
    }

    /// The item's data as a value (parsed now if the item holds JSON text).
    public var data: JSONValue {
        switch storage {
        case .value(let value): value
        case .text(let text): text.value
        }
    }

    /// Writes `items` as a page line's `items`: `[{"id":…,"feed":…,"data":…},…]`, with `feed`
    /// only for an item taken from another feed, and the data encoded (a value) or copied (JSON
    /// text). Here, beside the storage, so that each item is read where it lies in the array: a
    /// caller in another module copies every item out of the array to read it, and destroys
    /// the copy after.
    package static func write(_ items: [Item], to writer: inout JSONWriter) {
        writer.raw(UInt8(ascii: "["))
        for index in items.indices {
            if index > 0 { writer.raw(UInt8(ascii: ",")) }
            writer.raw("{\"id\":")
            writer.string(items[index].id)
            if let feed = items[index].feed {
                writer.raw(",\"feed\":")
                writer.string(feed)
            }
            writer.raw(",\"data\":")
            items[index].writeData(to: &writer)
            writer.raw(UInt8(ascii: "}"))
        }
        writer.raw(UInt8(ascii: "]"))
    }

    /// About how many bytes ``write(_:to:)`` writes for `items`, to size a page's buffer.
    package static func estimatedSize(of items: [Item]) -> Int {
        var size = 2
        for index in items.indices { size += 32 + items[index].id.utf8.count + items[index].estimatedDataSize }
        return size
    }

    /// Writes the data: a value encoded, JSON text copied.
    package func writeData(to writer: inout JSONWriter) {
        switch storage {
        case .value(let value): writer.value(value)
        case .text(let text): writer.bytes.append(contentsOf: text.bytes)
        }
    }

    /// About how many bytes the data takes as JSON.
    private var estimatedDataSize: Int {
        switch storage {
        case .value: 128
        case .text(let text): text.bytes.count
        }
    }

    /// Equal when their ids, feeds and values are.
    public static func == (lhs: Item, rhs: Item) -> Bool {
        lhs.id == rhs.id && lhs.feed == rhs.feed && lhs.data == rhs.data
    }

    /// Hashes what ``==`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(feed)
        hasher.combine(data)
    }
}

extension Item {
    /// An item whose id comes from a field of the source: a string as it is, an integer in
    /// decimal, anything else (or nothing) a hash of the data.
    public init(id field: JSONValue?, data: JSONValue) {
        switch field {
        case .string(let id)?: self.init(id: id, data: data)
        case .integer(let id)?: self.init(id: String(id), data: data)
        default: self.init(hashing: data)
        }
    }

    /// An item whose source gives it no id: the id is a hash of its JSON, so the same data keeps
    /// the same id (FNV-1a, 64 bits, in hex).
    public init(hashing data: JSONValue) {
        self.init(id: StableHash.hex(data.serialized), data: data)
    }

    /// An item whose data is a value of a source's body, kept as the source wrote it, with its id
    /// from a field of the source: a string as it is, an integer in decimal (of any size),
    /// anything else (or nothing) a hash of the data.
    public init(id field: JSONElement?, data: JSONElement) {
        if let field, let id = field.stringValue {
            self.init(id: id, json: data.raw)
        } else if let field, field.isInteger {
            self.init(id: field.integerValue.map { String($0) } ?? field.jsonText, json: data.raw)
        } else {
            self.init(hashing: data)
        }
    }

    /// An item of a source's value that has no id: the id is the hash ``init(hashing:)-(JSONValue)``
    /// gives the same data, whatever its spacing, member order or escapes.
    public init(hashing data: JSONElement) {
        self.init(id: StableHash.hex(data.canonicalText), json: data.raw)
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every process and on every machine, for ids
/// derived from content and for record checksums. Not for security.
package enum StableHash {
    /// The 64-bit FNV-1a hash of `bytes`.
    package static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        // Contiguous bytes (a native string's, an array's) go through the one loop compiled here,
        // not a generic iterator call per byte in the caller's module.
        bytes.withContiguousStorageIfAvailable(fnv1a64) ?? fnv1a64(Array(bytes))
    }

    /// The 64-bit FNV-1a hash of `bytes`.
    package static func fnv1a64(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The hash as 16 lowercase hex digits.
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let hex = String(fnv1a64(bytes), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
