import FeedKit
import Foundation

/// Where each page of a file starts, so that page N is read without reading pages 1 to N − 1.
///
/// Built on first need by scanning the file for line ends with `memchr`, a chunk at a time (a
/// 57 MB file of a million lines takes a few tens of milliseconds), and extended as the file
/// grows. It keeps one position per page: 16 bytes per `page_size` lines.
final class PageIndex: Sendable {
    private struct Scan {
        /// Where the scan stopped: just past the last complete line it counted.
        var position = FilePosition(offset: 0, line: 1)
        /// Non-blank lines counted so far.
        var itemCount = 0
        /// `starts[k]`: where page k + 1 starts (page 1 starts at the file's beginning).
        var starts: [FilePosition] = [FilePosition(offset: 0, line: 1)]
    }

    private let pageSize: Int
    private let scan = Locked(Scan())

    init(pageSize: Int) {
        self.pageSize = pageSize
    }

    /// Where page `page` starts, or nil when the file (as far as it is complete) has fewer
    /// pages. An unterminated last line counts only when `includeUnterminatedLast`.
    func start(ofPage page: Int, in file: LineFile, includeUnterminatedLast: Bool) throws -> FilePosition? {
        try scan.withLock { scan in
            guard page > scan.starts.count else { return scan.starts[page - 1] }
            try extend(&scan, toPage: page, in: file, includeUnterminatedLast: includeUnterminatedLast)
            return page <= scan.starts.count ? scan.starts[page - 1] : nil
        }
    }

    private func extend(_ scan: inout Scan, toPage page: Int, in file: LineFile, includeUnterminatedLast: Bool) throws {
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var chunkOffset = scan.position.offset
        var carried = 0
        while page > scan.starts.count {
            let count = try chunk.withUnsafeMutableBytes { buffer in
                try file.read(at: chunkOffset + Int64(carried), into: UnsafeMutableRawBufferPointer(rebasing: buffer[carried...]))
            }
            let filled = carried + count
            let consumed = chunk.withUnsafeBytes { bytes in
                countLines(UnsafeRawBufferPointer(rebasing: bytes[0..<filled]), from: chunkOffset, into: &scan, untilPage: page)
            }
            if count == 0 {
                // The rest is one line without its newline, or nothing.
                if includeUnterminatedLast, filled > consumed, !LineReader.isBlank(chunk[consumed..<filled]) {
                    noteItem(startingAt: scan.position, in: &scan)
                }
                return
            }
            chunkOffset += Int64(consumed)
            carried = filled - consumed
            if carried > 0 { chunk.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[consumed..<filled])) } }
            if carried == chunk.count { chunk += [UInt8](repeating: 0, count: chunk.count) }
        }
    }

    /// Counts the complete lines in `bytes` (which start at file offset `base`, at the scan's
    /// position), and returns how many bytes they took.
    private func countLines(_ bytes: UnsafeRawBufferPointer, from base: Int64, into scan: inout Scan, untilPage page: Int) -> Int {
        var lineStart = 0
        while page > scan.starts.count, lineStart < bytes.count {
            guard let found = memchr(bytes.baseAddress! + lineStart, 0x0A, bytes.count - lineStart) else { break }
            let newline = UnsafeRawPointer(found) - bytes.baseAddress!
            let start = scan.position
            if !LineReader.isBlank(bytes[lineStart..<newline]) { noteItem(startingAt: start, in: &scan) }
            lineStart = newline + 1
            scan.position = FilePosition(offset: base + Int64(lineStart), line: start.line + 1)
        }
        return lineStart
    }

    private func noteItem(startingAt position: FilePosition, in scan: inout Scan) {
        if scan.itemCount > 0, scan.itemCount % pageSize == 0 { scan.starts.append(position) }
        scan.itemCount += 1
    }
}
