/// Cuts a byte stream into request lines, each byte looked at once however the stream is chunked.
///
/// A line longer than `maxLineBytes` is reported once and skipped up to its newline, without
/// keeping its bytes.
struct LineSplitter {
    enum Piece {
        case line(ArraySlice<UInt8>)
        case tooLong
    }

    let maxLineBytes: Int
    /// The start of a line whose newline has not arrived yet.
    private var partial: [UInt8] = []
    private var discarding = false

    init(maxLineBytes: Int) {
        self.maxLineBytes = maxLineBytes
    }

    /// Hands each complete line in `bytes` to `handle`, until `handle` returns false; the rest of
    /// `bytes` is then left alone. Returns how many bytes were consumed.
    mutating func split(_ bytes: UnsafeRawBufferPointer, handle: (Piece) -> Bool) -> Int {
        var start = 0
        while start < bytes.count {
            guard let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                if let piece = keep(bytes[start...]) { _ = handle(piece) }
                return bytes.count
            }
            let segment = bytes[start..<newline]
            start = newline + 1
            if discarding {
                discarding = false
                continue
            }
            let piece: Piece
            if partial.isEmpty {
                piece = segment.count > maxLineBytes ? .tooLong : .line(Array(segment)[...])
            } else if partial.count + segment.count > maxLineBytes {
                partial = []
                piece = .tooLong
            } else {
                partial.append(contentsOf: segment)
                piece = .line(partial[...])
                partial = []
            }
            if !handle(piece) { return start }
        }
        return start
    }

    /// The client ended its input: a last line without its newline, if any.
    mutating func finish() -> ArraySlice<UInt8>? {
        defer { partial = [] }
        return discarding || partial.isEmpty ? nil : partial[...]
    }

    /// Keeps the start of an unfinished line; reports it once if it grows too long.
    private mutating func keep(_ bytes: Slice<UnsafeRawBufferPointer>) -> Piece? {
        guard !discarding else { return nil }
        guard partial.count + bytes.count <= maxLineBytes else {
            partial = []
            discarding = true
            return .tooLong
        }
        partial.append(contentsOf: bytes)
        return nil
    }
}
