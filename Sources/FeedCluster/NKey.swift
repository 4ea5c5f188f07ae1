import CSodium

/// A NATS NKey seed (`SU…`, as `nk -gen user` writes it), and the public key (`U…`) it stands for.
///
/// libnats signs the server's nonce with the seed file itself (`natsOptions_SetNKeyFromSeed`), but
/// must be told the public key too, and exports no way to compute it. An NKey is Base32 (RFC 4648,
/// no padding) of a prefix, the raw key and a CRC-16/XMODEM; the key behind a seed is the Ed25519
/// public key of its 32 bytes, which libsodium computes. Only this encoding is done here.
public struct NKey: Sendable {
    /// What a key belongs to: the prefix byte of its public form.
    public enum Role: UInt8, Sendable {
        case `operator` = 112  // 'O'
        case account = 0  // 'A'
        case user = 160  // 'U'
    }

    static let seedPrefix: UInt8 = 144  // 'S'

    public let role: Role
    /// The seed's 32 bytes: the Ed25519 private key's seed.
    let seed: [UInt8]

    /// The seed in `text` (its first word that is one); nil if it holds none.
    public init?(seedText text: String) {
        for word in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == " " || $0 == "\t" }) where word.hasPrefix("S") {
            guard let raw = Self.base32Decoded(word.utf8), raw.count == 36, Self.checksumMatches(raw),
                raw[0] & 0b1111_1000 == Self.seedPrefix,
                let role = Role(rawValue: (raw[0] & 0b111) << 5 | (raw[1] & 0b1111_1000) >> 3)
            else { continue }
            self.role = role
            seed = Array(raw[2..<34])
            return
        }
        return nil
    }

    /// A new key of `role`, from libsodium's random bytes (what `nk -gen` does).
    public static func generate(_ role: Role) -> NKey {
        _ = Sodium.ready
        var seed = [UInt8](repeating: 0, count: Int(crypto_sign_SEEDBYTES))
        randombytes_buf(&seed, seed.count)
        return NKey(role: role, seed: seed)
    }

    init(role: Role, seed: [UInt8]) {
        self.role = role
        self.seed = seed
    }

    /// The public key, such as `UCARKS2E3KVB7YORL2DG34XLT7PUCOL2SVM7YXV6ETHLW6Z46UUJ2VZ3`.
    public var publicKey: String {
        withKeyPair { publicBytes, _ in Self.encoded([role.rawValue] + publicBytes) }
    }

    /// The Ed25519 signature of `message` by this key, as NATS JWTs and nonces are signed.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        withKeyPair { _, secretBytes in
            var signature = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
            _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), secretBytes)
            return signature
        }
    }

    /// `body` with the Ed25519 key pair of the seed; the secret half is wiped afterwards.
    private func withKeyPair<Value>(_ body: ([UInt8], [UInt8]) -> Value) -> Value {
        var publicBytes = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        var secretBytes = [UInt8](repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
        _ = Sodium.ready
        _ = crypto_sign_seed_keypair(&publicBytes, &secretBytes, seed)
        defer { sodium_memzero(&secretBytes, secretBytes.count) }
        return body(publicBytes, secretBytes)
    }

    /// The seed's own text, `S` and the role's letter first, as a seed file holds it.
    public var seedText: String {
        Self.encoded([Self.seedPrefix | role.rawValue >> 5, (role.rawValue & 0b1_1111) << 3] + seed)
    }

    /// `bytes` and their checksum, in Base32.
    static func encoded(_ bytes: [UInt8]) -> String {
        let checksum = crc16(bytes)
        return base32(bytes + [UInt8(checksum & 0xFF), UInt8(checksum >> 8)])
    }

    private static func checksumMatches(_ raw: [UInt8]) -> Bool {
        let checksum = crc16(raw.dropLast(2))
        return raw[raw.count - 2] == UInt8(checksum & 0xFF) && raw[raw.count - 1] == UInt8(checksum >> 8)
    }

    /// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as NKeys check themselves with.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? crc << 1 ^ 0x1021 : crc << 1 }
        }
        return crc
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    static func base32(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        var buffer = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | Int(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                text.append(alphabet[buffer >> bits & 0b1_1111])
            }
        }
        if bits > 0 { text.append(alphabet[buffer << (5 - bits) & 0b1_1111]) }
        return String(decoding: text, as: UTF8.self)
    }

    static func base32Decoded(_ text: some Sequence<UInt8>) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = 0
        var bits = 0
        for character in text {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = (buffer << 5 | value) & 0xFFFF
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(buffer >> bits & 0xFF))
            }
        }
        return bytes
    }
}

/// libsodium, initialised once before its first use (`sodium_init` is safe to call again, but
/// not concurrently with other calls).
enum Sodium {
    static let ready: Bool = sodium_init() >= 0
}
