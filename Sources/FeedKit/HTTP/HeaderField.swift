/// One header line of a response, `Name: value`, split as HTTP has it (RFC 9110, section 5):
/// the name lowercased, the value without the whitespace around it. Byte by byte, without
/// Foundation: it runs for every header line of every response, on the one thread all of
/// feedd's HTTP shares.
package enum HeaderField {
    /// The line's name and value; nil for a line without a colon (the blank line that ends the
    /// header, or anything malformed).
    package static func split(_ line: UnsafeRawBufferPointer) -> (name: String, value: String)? {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let name = trimmed(line[..<colon]).map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }
        return (String(decoding: name, as: UTF8.self), String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self))
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return bytes[bytes.startIndex..<bytes.startIndex]
        }
        return bytes[first...last]
    }
}
