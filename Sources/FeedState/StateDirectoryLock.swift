import FeedKit
import Glibc

/// An exclusive `flock(2)` on `<state_dir>/lock`, which holds the pid of its owner: one daemon
/// (or one `feedd state repair`) per state directory. The kernel drops the lock when the process
/// dies, however it dies, so a stale lock file never blocks a restart.
public final class StateDirectoryLock: Sendable {
    public let directory: String
    /// The open lock file; -1 once released.
    private let descriptor: Locked<Int32>

    /// Takes the lock, creating the directory (mode 0700) and the lock file if needed; throws
    /// ``StoreError/Kind/locked`` naming the directory and the pid that holds it.
    public init(directory: String) throws(StoreError) {
        self.directory = directory
        try Self.createDirectory(directory)
        let path = "\(directory)/lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError(.unavailable, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        var ownRetries = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let reason = errno
            let holder = Self.readPid(descriptor)
            // Held by this very process: a lock it released a moment ago whose file a child
            // started meanwhile still has open between its fork and its exec. That copy goes
            // away at the exec, so wait a little for it rather than report ourselves.
            if reason == EWOULDBLOCK, holder == getpid(), ownRetries < 100 {
                ownRetries += 1
                usleep(10_000)
                continue
            }
            close(descriptor)
            guard reason == EWOULDBLOCK else {
                throw StoreError(.unavailable, "cannot lock \(path): \(String(cString: strerror(reason)))")
            }
            throw StoreError(.locked, "the state directory \(directory) is in use by another feedd (pid \(holder.map(String.init) ?? "unknown"), holding \(path))")
        }
        // Readers see either the old pid or the new one, never a mixture: the file is short
        // and rewritten from the start in one write.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = Locked(descriptor)
    }

    deinit {
        release()
    }

    /// Gives the directory up: closing the file drops the lock.
    public func release() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }

    /// The pid written in a lock file, if it holds one.
    private static func readPid(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingWhitespace)
    }

    /// Creates `directory` and its missing parents, mode 0700 (cursors are nobody else's business).
    static func createDirectory(_ directory: String) throws(StoreError) {
        var path = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            path += "/" + component
            if mkdir(path, 0o700) != 0, errno != EEXIST {
                throw StoreError(.unavailable, "cannot create the state directory \(path): \(String(cString: strerror(errno)))")
            }
        }
    }
}

extension String {
    var trimmingWhitespace: String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
