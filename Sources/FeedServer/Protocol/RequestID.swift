import FeedKit

/// A request's `id`, kept as the exact JSON text the client sent, so that every reply echoes it
/// byte for byte (SPEC §5): `123456789012345678901234567890` stays that integer, `1.50` stays `1.50`.
public struct RequestID: Sendable, Hashable, CustomStringConvertible {
    /// The id's JSON text, without surrounding whitespace.
    public let json: [UInt8]

    public init(json: [UInt8]) {
        self.json = json
    }

    public var description: String { String(decoding: json, as: UTF8.self) }
}
