import CSodium
import Foundation

/// The fleet key (`[cluster] key_file`): a secret every instance of a fleet shares, with which each
/// one seals what it writes (pages, generations, leases, claims, cursors) and checks what it reads.
/// A NATS user who may publish but does not have the key cannot make any instance use a record.
///
/// The seal is HMAC-SHA-512-256 (libsodium's `crypto_auth`) over the record's kind, its address
/// (key or subject) and its bytes, so a record cannot be moved to another address or kind. The
/// file holds one key per line, 64 hex digits (`openssl rand -hex 32`): the first seals, and a
/// second one is accepted too, so a fleet rotates its key without a pause: give every instance
/// `old` then `new` (each accepts the new key before any seals with it), then `new` then `old`,
/// then `new` alone.
public struct FleetKey: Sendable {
    /// The current key, then the previous one if any; 32 bytes each.
    private let keys: [[UInt8]]

    /// Hex digits in a seal.
    static let tagLength = 2 * Int(crypto_auth_hmacsha512256_BYTES)

    init(keys: [[UInt8]]) {
        precondition(!keys.isEmpty && keys.allSatisfy { $0.count == Int(crypto_auth_hmacsha512256_KEYBYTES) })
        self.keys = keys
        _ = Sodium.ready
    }

    /// Reads the key file at `path`.
    public init(contentsOf path: String) throws(NATSError) {
        let operation = "read the fleet key file \(path)"
        let text = try ConnectionSecrets.text(of: path, "fleet key")
        var keys: [[UInt8]] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = line.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            guard let key = Self.bytes(fromHex: line.utf8), key.count == Int(crypto_auth_hmacsha512256_KEYBYTES) else {
                throw NATSError(.failed, operation: operation, reason: "line \(index + 1) is not a key: 64 hex digits expected (openssl rand -hex 32)")
            }
            keys.append(key)
        }
        guard (1...2).contains(keys.count) else {
            throw NATSError(.failed, operation: operation, reason: "it must hold the current key, and at most the previous one after it (\(keys.count) found)")
        }
        self.init(keys: keys)
    }

    /// The seal of a record: 64 lowercase hex digits.
    func seal(kind: String, address: String, _ parts: [UInt8]...) -> String {
        Self.hex(tag(keys[0], kind: kind, address: address, parts))
    }

    /// Whether `seal` is the seal of the record by the current or the previous key.
    func verifies(_ seal: some Collection<UInt8>, kind: String, address: String, _ parts: [UInt8]...) -> Bool {
        guard seal.count == Self.tagLength, let expected = Self.bytes(fromHex: seal) else { return false }
        return keys.contains { key in
            var computed = tag(key, kind: kind, address: address, parts)
            return sodium_memcmp(&computed, expected, computed.count) == 0
        }
    }

    /// Each field is length-prefixed, so no two different records feed the MAC the same bytes.
    private func tag(_ key: [UInt8], kind: String, address: String, _ parts: [[UInt8]]) -> [UInt8] {
        var state = crypto_auth_hmacsha512256_state()
        _ = crypto_auth_hmacsha512256_init(&state, key, key.count)
        for field in [Array("feedd fleet record 1".utf8), Array(kind.utf8), Array(address.utf8)] + parts {
            var length = UInt64(field.count).littleEndian
            withUnsafeBytes(of: &length) { _ = crypto_auth_hmacsha512256_update(&state, $0.baseAddress, 8) }
            _ = crypto_auth_hmacsha512256_update(&state, field, UInt64(field.count))
        }
        var tag = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha512256_BYTES))
        _ = crypto_auth_hmacsha512256_final(&state, &tag)
        return tag
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: bytes.count * 2 + 1)
        _ = sodium_bin2hex(&text, text.count, bytes, bytes.count)
        return FeedCluster.text(of: text)
    }

    private static func bytes(fromHex text: some Collection<UInt8>) -> [UInt8]? {
        let digits = Array(text)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: digits.count / 2)
        var length = 0
        let status = digits.withUnsafeBufferPointer { digits in
            digits.withMemoryRebound(to: CChar.self) { characters in
                sodium_hex2bin(&bytes, bytes.count, characters.baseAddress, characters.count, nil, &length, nil)
            }
        }
        return status == 0 && length == bytes.count ? bytes : nil
    }
}
