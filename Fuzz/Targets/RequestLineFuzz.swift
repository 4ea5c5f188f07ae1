// Fuzz target: a request line, as a client sends it (JSON or the inline words form).
// Invariants: decoding never crashes, and what the writer makes of any parsed JSON reads back and
// writes again as the same bytes. (Not "parses back to the same value": Foundation reads a huge
// integer literal such as 2222…0523486256 to a slightly different Double than its shortest
// decimal form, which the first fuzz run found; the writer's own output must be a fixed point.)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestLine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let line = Array(UnsafeBufferPointer(start: data, count: size))
    _ = RequestDecoder.decode(line[...])
    if let value = try? JSONValue(parsing: line) {
        let written = value.serialized
        guard let again = try? JSONValue(parsing: written), again.serialized == written else {
            fatalError("the writer's output for \(value) does not read back as itself")
        }
    }
    return 0
}
