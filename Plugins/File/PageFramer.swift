import FeedKit

/// Frames pages of `pageSize` non-blank lines, one after another, from one reader.
struct PageFramer {
    private var reader: LineReader
    private let pageSize: Int
    private let follow: Bool
    private let firstLineNumber: Int
    private let firstOffset: Int64

    init(reader: LineReader, pageSize: Int, follow: Bool) {
        self.reader = reader
        self.pageSize = pageSize
        self.follow = follow
        firstLineNumber = reader.lineNumber
        firstOffset = reader.offset
    }

    /// Lines read, blank ones included, since the first page's start.
    var linesRead: Int { reader.lineNumber - firstLineNumber }
    /// Bytes read since the first page's start.
    var bytesRead: Int64 { reader.offset - firstOffset }

    /// The page that starts where the last one ended, as ``FileSource/fetch(_:)`` answers it.
    mutating func nextPage() throws -> FetchResult {
        var lines = PageLines(pageSize: pageSize)
        try reader.appendNonBlank(to: &lines, until: pageSize)
        let items = lines.items()
        let next = FilePosition(offset: reader.offset, line: reader.lineNumber)
        if follow {
            // A short page reached the end of what is written: look for more only after waiting.
            if items.isEmpty { return .notYet }
            return .page(items, next: items.count < pageSize ? .later(token: next.token) : .more(token: next.token))
        }
        // The next page's first line is left to it: neither copied nor read twice in a run.
        return .page(items, next: try reader.skipToNonBlank() ? .more(token: next.token) : .end)
    }
}
