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
}

/// FNV-1a, 64 bits: a hash that is the same in every process and on every machine, for ids
/// derived from content and for record checksums. Not for security.
public enum StableHash {
    public static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The hash as 16 lowercase hex digits.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let hex = String(fnv1a64(bytes), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
