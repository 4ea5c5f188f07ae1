import FeedKit
import Glibc

/// Paths in the config that cannot work yet, though the config is valid: a file a feed reads
/// that is not there (it may come later), a file to write in a directory that does not exist.
/// `check-config` prints them on stderr and still exits 0; the daemon logs them.
enum PathWarnings {
    /// A warning for each declared path key of `values` whose path cannot work yet; `place`
    /// puts a message where its key is written.
    static func check(
        _ values: [String: JSONValue], declared: [ConfigKey], table: String, place: (String, String) -> ConfigProblem
    ) -> [ConfigProblem] {
        declared.sorted { $0.name < $1.name }.compactMap { key -> ConfigProblem? in
            guard case .path(let use) = key.type, let path = values[key.name]?.stringValue, !path.isEmpty else { return nil }
            switch use {
            case .file where !exists(path):
                return place(key.name, "\(table).\(key.name): \(path) does not exist (yet)")
            case .fileToWrite:
                let directory = directory(of: path)
                guard !exists(directory) else { return nil }
                return place(key.name, "\(table).\(key.name): the directory \(directory) does not exist, so \(path) cannot be written")
            default:
                return nil
            }
        }
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
