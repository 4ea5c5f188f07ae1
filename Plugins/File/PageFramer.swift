import FeedKit

/// Frames pages of `pageSize` non-blank lines, one after another, from one reader.
struct PageFramer {
    private var reader: LineReader
    private let pageSize: Int
    private let follow: Bool
    /// The next page's lines read so far: its first, read to tell whether the page before was the last.
    private var nextLines: PageLines?
    /// Lines read, blank ones included, since the first page's start.
    private(set) var linesRead = 0
    /// Where the last page framed ends, just past its last line.
    private(set) var offset: Int64

    init(reader: LineReader, pageSize: Int, follow: Bool) {
        self.reader = reader
        self.pageSize = pageSize
        self.follow = follow
        offset = reader.offset
    }

    /// The page that starts where the last one ended, as ``FileSource/fetch(_:)`` answers it.
    mutating func nextPage() throws -> FetchResult {
        let firstLine = reader.lineNumber
        defer { linesRead += reader.lineNumber - firstLine }
        var lines = nextLines ?? PageLines(pageSize: pageSize)
        nextLines = nil
        while lines.count < pageSize, let line = try reader.nextNonBlank() {
            lines.append(line)
        }
        let items = lines.items()
        let next = FilePosition(offset: reader.offset, line: reader.lineNumber)
        offset = reader.offset
        if follow {
            // A short page reached the end of what is written: look for more only after waiting.
            if items.isEmpty { return .notYet }
            return .page(items, next: items.count < pageSize ? .later(token: next.token) : .more(token: next.token))
        }
        guard let following = try reader.nextNonBlank() else { return .page(items, next: .end) }
        // Copied now, before the reader reads on over the bytes it is a view of.
        var firstOfNext = PageLines(pageSize: pageSize)
        firstOfNext.append(following)
        nextLines = firstOfNext
        return .page(items, next: .more(token: next.token))
    }
}
