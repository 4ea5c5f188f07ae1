import Glibc

/// Reads config files and the drop-in directory with errors in plain words that name the path:
/// "is a symbolic link to a missing file", "is a FIFO, not a regular file", "Permission denied".
enum ConfigFileReader {
    /// The text of the regular file at `path` (symbolic links followed).
    static func read(_ path: String) throws(ConfigError) -> String {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw ConfigError([problem(path, openError: errno)]) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ConfigError([ConfigProblem(file: path, message: "cannot read: \(reason(errno))")]) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw ConfigError([ConfigProblem(file: path, message: "cannot read: it is \(kind(of: info.st_mode)), not a regular file")])
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ConfigError([ConfigProblem(file: path, message: "cannot read: \(reason(errno))")])
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError([ConfigProblem(file: path, message: "cannot read: the file is not valid UTF-8")])
        }
        return text
    }

    /// The `*.toml` files in the drop-in directory, in name order; none if it does not exist.
    /// A directory that exists but cannot be listed is an error: its drop-ins may restrict access.
    static func dropIns(in directory: String) throws(ConfigError) -> [String] {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            if errno == ENOENT { return [] }
            throw ConfigError([ConfigProblem(file: directory, message: "cannot read the drop-in directory: \(reason(errno))")])
        }
        guard stat(directory, &info) == 0 else { throw ConfigError([problem(directory, openError: errno, what: "the drop-in directory")]) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ConfigError([ConfigProblem(file: directory, message: "cannot read the drop-in directory: it is \(kind(of: info.st_mode)), not a directory")])
        }
        guard let stream = opendir(directory) else {
            throw ConfigError([ConfigProblem(file: directory, message: "cannot read the drop-in directory: \(reason(errno))")])
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name.hasSuffix(".toml"), !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted().map { "\(directory)/\($0)" }
    }

    /// Why opening `path` failed, telling a dangling or looping symbolic link from a missing file.
    private static func problem(_ path: String, openError: Int32, what: String = "") -> ConfigProblem {
        let prefix = what.isEmpty ? "cannot read" : "cannot read \(what)"
        var info = stat()
        if openError == ENOENT, lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
            return ConfigProblem(file: path, message: "\(prefix): it is a symbolic link to a missing file")
        }
        if openError == ELOOP { return ConfigProblem(file: path, message: "\(prefix): it is a symbolic link loop") }
        if openError == ENOENT { return ConfigProblem(file: path, message: "\(prefix): no such file") }
        return ConfigProblem(file: path, message: "\(prefix): \(reason(openError))")
    }

    private static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFREG: "a regular file"
        default: "a special file"
        }
    }

    private static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}
