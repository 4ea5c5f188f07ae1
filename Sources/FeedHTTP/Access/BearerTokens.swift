import CSodium
import FeedEngine

/// The bearer tokens of `tokens_dir` (SPEC §11): a feed with a `FEED.token` file needs
/// `Authorization: Bearer <token>`, and `_metrics.token` guards `GET /metrics`.
///
/// Only a digest of each token is kept (BLAKE2b, libsodium's `crypto_generichash`), and a
/// presented token is digested the same way and compared with `sodium_memcmp`, in constant
/// time: how long a refusal takes tells nothing of the token, not even its length.
struct BearerTokens {
    private var digests: [String: [UInt8]] = [:]

    /// What a request may do with a resource.
    enum Verdict: Equatable {
        case allowed
        /// The resource needs a token and the request has none.
        case missing
        /// The request's token is not the resource's.
        case refused
    }

    init(_ tokens: [String: SecretText]) {
        precondition(sodium_init() >= 0, "libsodium cannot initialize")
        for (name, token) in tokens { digests[name] = Self.digest(token.bytes[...]) }
    }

    func isProtected(_ resource: String) -> Bool { digests[resource] != nil }

    /// Whether `authorization` (the request's `Authorization` field, if any) opens `resource`.
    func verdict(for resource: String, authorization: String?) -> Verdict {
        guard let expected = digests[resource] else { return .allowed }
        guard let presented = authorization.flatMap(Self.bearerToken) else { return .missing }
        let digest = Self.digest(presented)
        let equal = digest.withUnsafeBytes { a in expected.withUnsafeBytes { b in sodium_memcmp(a.baseAddress, b.baseAddress, a.count) } }
        return equal == 0 ? .allowed : .refused
    }

    /// The token of `Bearer <token>` (the scheme in any case, RFC 7235); nil for another scheme.
    static func bearerToken(_ authorization: String) -> ArraySlice<UInt8>? {
        let bytes = Array(authorization.utf8)
        let scheme = Array("bearer".utf8)
        guard bytes.count > scheme.count, bytes[scheme.count] == UInt8(ascii: " "),
            zip(bytes, scheme).allSatisfy({ $0 | 0x20 == $1 })
        else { return nil }
        let token = bytes[(scheme.count + 1)...].drop { $0 == UInt8(ascii: " ") }
        return token.isEmpty ? nil : token
    }

    private static func digest(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(crypto_generichash_BYTES))
        bytes.withUnsafeBufferPointer { input in
            _ = crypto_generichash(&digest, digest.count, input.baseAddress, UInt64(input.count), nil, 0)
        }
        return digest
    }
}
