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

    /// The page that starts where the last one ended, its lines not yet made items: as
    /// ``FileSource/fetch(_:)`` answers it (``FramedPage/result``) or as the page line holds them
    /// (``FramedPage/written``).
    mutating func nextPage() throws -> FramedPage {
        var lines = PageLines(pageSize: pageSize)
        try reader.appendNonBlank(to: &lines, until: pageSize)
        let next = FilePosition(offset: reader.offset, line: reader.lineNumber)
        if follow {
            // A short page reached the end of what is written: look for more only after waiting.
            if lines.count == 0 { return .notYet }
            return .page(lines, next: lines.count < pageSize ? .later(token: next.token) : .more(token: next.token))
        }
        // The next page's first line is left to it: neither copied nor read twice in a run.
        return .page(lines, next: try reader.skipToNonBlank() ? .more(token: next.token) : .end)
    }
}

/// A page a ``PageFramer`` framed: its lines, and what follows.
enum FramedPage {
    case page(PageLines, next: NextPage)
    case notYet

    /// Whether the page after it can be framed at once.
    var continues: Bool {
        if case .page(_, next: .more) = self { true } else { false }
    }

    /// The page with an ``Item`` of each line.
    var result: FetchResult {
        switch self {
        case .page(let lines, let next): .page(lines.items(), next: next)
        case .notYet: .notYet
        }
    }

    /// The page with its lines written as the page line holds them, no ``Item`` made.
    var written: WrittenFetchResult {
        switch self {
        case .page(let lines, let next): .page(lines.written(), next: next)
        case .notYet: .notYet
        }
    }
}
