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

    /// The file's content without surrounding whitespace: one line of visible characters. The
    /// file must be a regular one that other users can neither read nor write.
    static func read(_ path: String, options: AdapterOptions) throws(OptionError) -> String {
        // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, and the config load with it.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            throw options.invalid("bearer_token_file", "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        try checkKind(of: descriptor, path, options: options)
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

    /// Judged on the open descriptor, so that what is checked is what is read.
    private static func checkKind(of descriptor: Int32, _ path: String, options: AdapterOptions) throws(OptionError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw options.invalid("bearer_token_file", "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFREG else {
            let what = [S_IFDIR: "a directory", S_IFIFO: "a FIFO", S_IFSOCK: "a socket", S_IFCHR: "a device", S_IFBLK: "a device"][kind] ?? "not a file"
            throw options.invalid(
                "bearer_token_file", "\(path) is \(what), not a regular file: a secret is kept in a file that holds it, and only it")
        }
        let permissions = status.st_mode & 0o777
        guard permissions & 0o006 == 0 else {
            let mode = String(permissions, radix: 8)
            throw options.invalid(
                "bearer_token_file",
                "\(path) can be \(permissions & 0o004 != 0 ? "read" : "written") by every user (mode 0\(mode)): a bearer token must be "
                    + "readable by feedd only, or anyone on the machine can use it (or replace it); chmod o-rw \(path)")
        }
    }
}
