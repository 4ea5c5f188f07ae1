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
        try pages(from: request, maxPages: 1)[0].result
    }

    /// A run of pages from one opening of the file and one reader, which reads on from one page
    /// into the next: a reader far behind costs an open, a `stat` and a small read per run, not per
    /// page, and the line a page finds after itself, to tell whether more follow, is left in the
    /// reader for the next page instead of copied.
    public func fetch(_ request: PageRequest, pages maxPages: Int) async throws -> [FetchResult] {
        try pages(from: request, maxPages: maxPages).map(\.result)
    }

    /// The same run with each page's lines written straight from the reader's buffer as the page
    /// line holds them: no ``Item`` a line, nor the engine writing each again.
    public func fetch(_ request: PageRequest, writtenPages maxPages: Int) async throws -> [WrittenFetchResult] {
        try pages(from: request, maxPages: maxPages).map(\.written)
    }

    /// About how many lines, and how many bytes of them, a run frames at most before it stops
    /// after a page: the first page waits for the run's last, so a run of 20-line pages is the
    /// engine's whole run (32 pages), while a page of a thousand lines, or of long lines, comes alone.
    static let runLines = 1_000
    static let runBytes: Int64 = 1 << 20

    private func pages(from request: PageRequest, maxPages: Int) throws -> [FramedPage] {
        let file = try LineFile(path: path)
        defer { file.close() }
        let start: FilePosition
        if request.token != nil || request.page == 1 {
            start = try FilePosition(token: request.token)
        } else if let indexed = try index.start(ofPage: request.page, in: file, includeUnterminatedLast: !follow) {
            start = indexed
        } else {
            // The file has fewer pages than that (so far).
            return [follow ? .notYet : .page(PageLines(pageSize: 0), next: .end)]
        }

        var framer = PageFramer(reader: try file.lines(from: start, includeUnterminatedLast: !follow), pageSize: pageSize, follow: follow)
        var pages = [try framer.nextPage()]
        while pages.count < maxPages, pages[pages.count - 1].continues,
            framer.linesRead < Self.runLines, framer.bytesRead < Self.runBytes
        {
            // A page that cannot be read ends the run before it: the engine asks for it again,
            // alone, and that call says why.
            guard let page = try? framer.nextPage() else { break }
            pages.append(page)
        }
        return pages
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
