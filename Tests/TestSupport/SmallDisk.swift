import Foundation
import Glibc

/// A 16 MiB tmpfs for a test that fills a disk, mounted in a new directory of `directory`:
///
/// ```swift
/// guard let disk = SmallDisk(in: directory) else { return }   // not root: skipped
/// defer { disk.unmount() }
/// ```
///
/// Unmounted explicitly, not on release: a value may be released after its last use, while a
/// daemon still writes there.
public final class SmallDisk {
    public let path: String

    public init?(in directory: TemporaryDirectory, name: String = "small") {
        path = directory.path(name)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard (try? ChildProcess.run("/usr/bin/env", ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", path]))?.status == 0 else {
            print("skipped: cannot mount a tmpfs here")
            return nil
        }
    }

    public func unmount() {
        _ = try? ChildProcess.run("/usr/bin/env", ["umount", "-l", path])
    }

    /// Writes zeros to the file `name` until the file system says it is full; returns its path,
    /// which frees the room again once removed.
    @discardableResult
    public func fill(_ name: String = "filler") -> String {
        let file = "\(path)/\(name)"
        let descriptor = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0, count: 64 << 10)
        while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        return file
    }
}
