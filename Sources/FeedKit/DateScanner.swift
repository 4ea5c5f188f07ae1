/// Reads a date's UTF-8 bytes left to right without allocating: digits, words, signs, literals.
/// Every reading function leaves the position where it was when it fails.
struct DateScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    private(set) var position = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    var atEnd: Bool { position == bytes.count }

    /// The byte `offset` places ahead, if there is one.
    func peek(_ offset: Int = 0) -> UInt8? {
        position + offset < bytes.count ? bytes[position + offset] : nil
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// An ASCII letter, or a byte of a character beyond ASCII (Greek and Hungarian month names).
    static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte >= 0x80
    }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard peek() == UInt8(ascii: character) else { return false }
        position += 1
        return true
    }

    /// Skips `literal`'s bytes if they come next.
    mutating func skip(_ literal: [UInt8]) -> Bool {
        guard position + literal.count <= bytes.count else { return false }
        for (index, byte) in literal.enumerated() where bytes[position + index] != byte { return false }
        position += literal.count
        return true
    }

    /// Skips to just past the next `character`; false, with nothing skipped, when there is none.
    mutating func skip(through character: Unicode.Scalar) -> Bool {
        guard let index = bytes[position...].firstIndex(of: UInt8(ascii: character)) else { return false }
        position = index + 1
        return true
    }

    /// Skips white space; whether there was any.
    @discardableResult
    mutating func skipSpaces() -> Bool {
        let start = position
        while let byte = peek(), Self.isSpace(byte) { position += 1 }
        return position > start
    }

    /// Skips white space and commas (`Thu, 01 Jan 2004`, `13 Feb, 2012`).
    mutating func skipSeparators() {
        while let byte = peek(), Self.isSpace(byte) || byte == UInt8(ascii: ",") { position += 1 }
    }

    /// How many digits follow.
    var digitRun: Int {
        var count = 0
        while let byte = peek(count), Self.isDigit(byte) { count += 1 }
        return count
    }

    /// The whole run of digits that follows, if it has `range.lowerBound` to `range.upperBound` digits.
    mutating func digits(_ range: ClosedRange<Int>) -> Int64? {
        let count = digitRun
        guard range.contains(count) else { return nil }
        var value: Int64 = 0
        for index in position..<position + count { value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0")) }
        position += count
        return value
    }

    /// Exactly `count` digits, whatever follows them.
    mutating func digits(exactly count: Int) -> Int64? {
        guard position + count <= bytes.count else { return nil }
        var value: Int64 = 0
        for index in position..<position + count {
            guard Self.isDigit(bytes[index]) else { return nil }
            value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
        }
        position += count
        return value
    }

    /// A fraction of a second after its `.` or `,`, in milliseconds (further digits dropped).
    mutating func milliseconds() -> Int64? {
        guard let mark = peek(), mark == UInt8(ascii: ".") || mark == UInt8(ascii: ","), let first = peek(1), Self.isDigit(first) else { return nil }
        position += 1
        var value: Int64 = 0
        var count = 0
        while let byte = peek(), Self.isDigit(byte) {
            if count < 3 { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            count += 1
            position += 1
        }
        for _ in count..<max(count, 3) { value *= 10 }
        return value
    }

    /// The run of letters that follows (possibly empty).
    mutating func word() -> UnsafeBufferPointer<UInt8> {
        let start = position
        while let byte = peek(), Self.isLetter(byte) { position += 1 }
        return UnsafeBufferPointer(rebasing: bytes[start..<position])
    }

    /// +1 for `+`, -1 for `-`, nil for anything else.
    mutating func sign() -> Int64? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }

    /// `±hh:mm`, `±hhmm` or (when `hoursAlone`) `±hh`, as minutes east of UTC.
    mutating func offset(hoursAlone: Bool) -> Int64? {
        let start = position
        guard let sign = sign(), let hours = digits(exactly: 2) else {
            position = start
            return nil
        }
        let colon = skip(":")
        if let minutes = digits(exactly: 2) { return sign * (hours * 60 + minutes) }
        guard hoursAlone, !colon, digitRun == 0 else {
            position = start
            return nil
        }
        return sign * hours * 60
    }

    /// Up to eight ASCII letters (or `/`), lowercased, packed into an integer: a name to look up
    /// in a table with one comparison; nil for a longer or a non-ASCII word.
    static func key(_ word: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard word.count <= 8 else { return nil }
        var key: UInt64 = 0
        for byte in word {
            guard byte < 0x80 else { return nil }
            key = key << 8 | UInt64(byte | 0x20)
        }
        return key
    }

    /// ``key(_:)`` of a name written in the source.
    static func key(_ name: StaticString) -> UInt64 {
        key(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))!
    }

    /// Whether `word` is `name` or its beginning of at least `minimum` letters, ignoring ASCII case.
    static func word(_ word: UnsafeBufferPointer<UInt8>, abbreviates name: StaticString, minimum: Int = 3) -> Bool {
        guard word.count >= minimum, word.count <= name.utf8CodeUnitCount else { return false }
        let letters = name.utf8Start
        for index in 0..<word.count where word[index] | 0x20 != letters[index] { return false }
        return true
    }

    /// Whether `word` is `name`, ignoring ASCII case.
    static func word(_ word: UnsafeBufferPointer<UInt8>, is name: StaticString) -> Bool {
        word.count == name.utf8CodeUnitCount && Self.word(word, abbreviates: name, minimum: 0)
    }

    /// Whether `word` is exactly the UTF-8 bytes `name`.
    static func word(_ word: UnsafeBufferPointer<UInt8>, equals name: [UInt8]) -> Bool {
        word.count == name.count && word.elementsEqual(name)
    }
}
