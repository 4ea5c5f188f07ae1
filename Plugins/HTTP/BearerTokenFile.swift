import FeedKit
import Foundation

/// Reads the `bearer_token_file` of an `http` feed. Its messages name the file, never the token.
///
/// The token last read from each file is kept here, by path, and every request takes it from
/// here: the file is read whenever the config is loaded (at start, on every reload), but a
/// reload that leaves a feed's options alone keeps that feed's running adapter, which would
/// otherwise go on sending the token it was made with.
enum BearerTokenFile {
    private static let latest = Locked<[String: String]>([:])

    /// The token most recently read from `path`.
    static func token(in path: String) -> String? {
        latest.withLock { $0[path] }
    }

    /// More than a token plausibly needs; a larger file is someone's mistake.
    static let maximumBytes = 16_384

    /// The file's content without surrounding whitespace: one line of visible characters.
    static func read(_ path: String, options: AdapterOptions) throws(OptionError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw options.invalid("bearer_token_file", "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        let bytes: Data
        do {
            bytes = try file.read(upToCount: maximumBytes + 1) ?? Data()
        } catch {
            throw options.invalid("bearer_token_file", "cannot read \(path): \((error as NSError).localizedFailureReason ?? "read error")")
        }
        guard bytes.count <= maximumBytes else {
            throw options.invalid("bearer_token_file", "\(path) is larger than \(maximumBytes) bytes; it must hold the token alone")
        }
        let token = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw options.invalid("bearer_token_file", "\(path) is empty") }
        guard token.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
            throw options.invalid("bearer_token_file", "\(path) must hold the token alone, on one line of visible ASCII characters")
        }
        latest.withLock { $0[path] = token }
        return token
    }
}
