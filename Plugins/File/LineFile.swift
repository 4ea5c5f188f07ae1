import FeedKit
import Foundation

/// A file opened for reading lines from a known position.
final class LineFile {
    private let path: String
    private let descriptor: Int32

    init(path: String) throws {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw SourceError.transient("cannot open \(path): \(String(cString: strerror(errno)))")
        }
    }

    func close() {
        _ = Foundation.close(descriptor)
    }

    func lines(from position: FilePosition, includeUnterminatedLast: Bool) throws -> LineReader {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw SourceError.transient("cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        guard Int64(info.st_size) >= position.offset else {
            throw SourceError.rejected("\(path) is shorter (\(info.st_size) bytes) than where its feed had read to (\(position.offset)); was it truncated?")
        }
        return LineReader(file: self, position: position, includeUnterminatedLast: includeUnterminatedLast)
    }

    /// Reads what fits in `buffer` from `offset`; 0 at the end of the file.
    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw SourceError.transient("cannot read \(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// Reads complete lines one after another, tracking the byte offset and line number after each.
struct LineReader {
    struct Line {
        let number: Int
        /// The line without its line break (and a carriage return before it): a view of the
        /// reader's buffer.
        let text: ArraySlice<UInt8>
    }

    private let file: LineFile
    private let includeUnterminatedLast: Bool
    private var chunk: [UInt8] = []
    private var chunkStart = 0
    private var chunkOffset: Int64
    private var atEndOfFile = false
    private var nextReadSize = 4 << 10
    /// The byte offset just past the last line returned.
    private(set) var offset: Int64
    /// The number of the line that starts at `offset`.
    private(set) var lineNumber: Int

    fileprivate init(file: LineFile, position: FilePosition, includeUnterminatedLast: Bool) {
        self.file = file
        self.includeUnterminatedLast = includeUnterminatedLast
        offset = position.offset
        chunkOffset = position.offset
        lineNumber = position.line
    }

    /// Appends the lines with anything but white space on them to `lines` until it holds
    /// `count`, or the file ends. One call a page with the loop inside it: a call a line that
    /// returned a `Line?` stayed out of line in the page framer, and destroying each optional
    /// through its type's value witness cost about 100 instructions a line (`perf record` of the
    /// 1,000-line drain).
    mutating func appendNonBlank(to lines: inout PageLines, until count: Int) throws {
        while lines.count < count, let line = try nextLine() {
            if !Self.isBlank(line.text) { lines.append(line) }
        }
    }

    /// Skips blank lines up to the next line with anything but white space on it, and leaves
    /// that line unread; whether there is one. A page learns so whether another follows it
    /// without taking the next page's first line, which the next page reads as any other.
    mutating func skipToNonBlank() throws -> Bool {
        while let bounds = try nextLineBounds() {
            if !Self.isBlank(chunk[chunkStart..<bounds.end]) { return true }
            _ = take(upTo: bounds.end, consumed: bounds.consumed)
        }
        return false
    }

    private mutating func nextLine() throws -> Line? {
        guard let bounds = try nextLineBounds() else { return nil }
        return take(upTo: bounds.end, consumed: bounds.consumed)
    }

    /// Where the next line's text ends in the chunk, and where the line after it starts, reading
    /// on as needed; nil at the end of the file.
    private mutating func nextLineBounds() throws -> (end: Int, consumed: Int)? {
        while true {
            if let newline = nextLineBreak() { return (newline, newline + 1) }
            if atEndOfFile {
                guard includeUnterminatedLast, chunkStart < chunk.count else { return nil }
                return (chunk.count, chunk.count)
            }
            try readMore()
        }
    }

    /// Where the chunk's next line break is, from `chunkStart`. By `memchr`: the byte loop of
    /// `firstIndex(of:)` cost a drain about 350 instructions a 67-byte line (callgrind).
    private func nextLineBreak() -> Int? {
        guard chunkStart < chunk.count else { return nil }
        return chunk.withUnsafeBytes { bytes in
            memchr(bytes.baseAddress! + chunkStart, 0x0A, bytes.count - chunkStart).map { UnsafeRawPointer($0) - bytes.baseAddress! }
        }
    }

    private mutating func take(upTo end: Int, consumed: Int) -> Line {
        var text = chunk[chunkStart..<end]
        if text.last == UInt8(ascii: "\r") { text.removeLast() }
        let line = Line(number: lineNumber, text: text)
        offset += Int64(consumed - chunkStart)
        chunkStart = consumed
        lineNumber += 1
        return line
    }

    /// Reads on straight into the chunk, 4 KiB first and twice as much each time after (up to
    /// 256 KiB): a page of short lines costs one small read, a page of long ones a few reads, and
    /// neither copies much more of the file than it uses.
    private mutating func readMore() throws {
        chunk.removeFirst(chunkStart)
        chunkOffset += Int64(chunkStart)
        chunkStart = 0
        let filled = chunk.count
        let readSize = nextReadSize
        nextReadSize = min(nextReadSize * 2, 256 << 10)
        chunk.append(contentsOf: repeatElement(0, count: readSize))
        let count = try chunk.withUnsafeMutableBytes { bytes in
            try file.read(at: chunkOffset + Int64(filled), into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
        }
        chunk.removeLast(readSize - count)
        if count == 0 { atEndOfFile = true }
    }

    /// Whether a line has nothing but white space on it (such lines are skipped).
    static func isBlank(_ line: some Collection<UInt8>) -> Bool {
        !line.contains { !isWhiteSpace($0) }
    }

    private static func isWhiteSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0B || byte == 0x0C
    }
}
