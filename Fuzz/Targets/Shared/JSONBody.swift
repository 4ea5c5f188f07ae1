// Shared by the body-decoder targets: inputs that are not JSON are the parser's business (the
// json-document target's), not the decoder's, so only bodies that parse reach `decode`.

func fuzzJSONBody(_ data: UnsafePointer<UInt8>, _ size: Int, _ decode: (JSONDocument) throws -> Void) -> CInt {
    guard let body = try? JSONDocument(parsing: UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    try? decode(body)
    return 0
}
