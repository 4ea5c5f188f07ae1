import FeedKit
import Foundation

/// The `file` adapter: the lines of a local file, `page_size` to a page.
///
/// Each non-blank line is an item whose id is its 1-based line number; a line that is valid JSON
/// is used as it is, any other line becomes a JSON string. With `follow = true` the feed never
/// ends: lines appended later (complete lines only) become new pages. Pages are addressed by
/// number: page N is found through a ``PageIndex`` of the file, without reading the pages before it.
///
/// Options: `path` (required), `page_size` (default 20), `follow` (default false).
public struct FileSource: SourceAdapter {
    public static let sourceName = "file"
    public static let configKeys = [
        ConfigKey("path", .path(.file), .required(example: "\"/var/lib/feedd/notes.ndjson\""), "absolute path of the file, one item a line"),
        ConfigKey("page_size", .integer, .value("20"), "lines per page"),
        ConfigKey("follow", .boolean, .value("false"), "publish lines appended later as new pages, like tail -f"),
    ]

    let path: String
    let pageSize: Int
    let follow: Bool
    /// Where each page starts, built the first time a page is asked for by number alone.
    private let index: PageIndex

    public init(options: AdapterOptions, context: AdapterContext) throws {
        path = try options.requiredString("path")
        pageSize = try options.integer("page_size", in: 1...1_000_000) ?? 20
        follow = try options.bool("follow") ?? false
        index = PageIndex(pageSize: pageSize)
        guard path.hasPrefix("/") else {
            throw options.invalid("path", "must be an absolute path, got \"\(path)\"")
        }
    }

    public var pageAddressing: PageAddressing { .direct }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        let file = try LineFile(path: path)
        defer { file.close() }
        let start: FilePosition
        if request.token != nil || request.page == 1 {
            start = try FilePosition(token: request.token)
        } else if let indexed = try index.start(ofPage: request.page, in: file, includeUnterminatedLast: !follow) {
            start = indexed
        } else {
            // The file has fewer pages than that (so far).
            return follow ? .notYet : .page([], next: .end)
        }

        var reader = try file.lines(from: start, includeUnterminatedLast: !follow)
        var lines = PageLines(pageSize: pageSize)
        while lines.count < pageSize, let line = try reader.nextNonBlank() {
            lines.append(line)
        }
        let items = lines.items()
        let next = FilePosition(offset: reader.offset, line: reader.lineNumber)
        if follow {
            // A short page reached the end of what is written: look for more only after waiting.
            if items.isEmpty { return .notYet }
            return .page(items, next: items.count < pageSize ? .later(token: next.token) : .more(token: next.token))
        }
        let moreFollow = try reader.nextNonBlank() != nil
        return .page(items, next: moreFollow ? .more(token: next.token) : .end)
    }

    public func waitForNewData(after request: PageRequest, pollInterval: Duration) async throws {
        // Checking the size is a single stat(2): cheap enough to do often, so appended lines are
        // published within a tenth of a second while the configured poll still bounds the wait.
        let offset = try FilePosition(token: request.token).offset
        let deadline = ContinuousClock.now + pollInterval
        while ContinuousClock.now < deadline {
            var info = stat()
            if stat(path, &info) == 0, Int64(info.st_size) != offset { return }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// Where the next page starts: a byte offset and the number of the line found there.
struct FilePosition: Hashable {
    var offset: Int64
    var line: Int

    init(offset: Int64, line: Int) {
        self.offset = offset
        self.line = line
    }

    init(token: String?) throws {
        guard let token else {
            self.init(offset: 0, line: 1)
            return
        }
        // Read as bytes: `split`, `String` index checks and integers parsed from substrings, with
        // the interpolated token, cost a drain about 16,000 instructions a page (callgrind), a
        // third of what a page cost beyond its items.
        let bytes = token.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), let offset = Self.decimal(bytes[..<colon]),
            let line = Self.decimal(bytes[bytes.index(after: colon)...]), line >= 1
        else {
            throw SourceError.rejected("invalid file position token \"\(token)\"")
        }
        self.init(offset: offset, line: Int(line))
    }

    /// The value of 1 to 18 decimal digits (so it fits), else nil.
    private static func decimal(_ digits: Substring.UTF8View) -> Int64? {
        guard (1...18).contains(digits.count) else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    var token: String { String(offset) + ":" + String(line) }
}
