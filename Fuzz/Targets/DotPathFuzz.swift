// Fuzz target: a dot path (the input's first line) looked up in a JSON body (the rest), as the
// http adapter reads `items` and `id`. Invariants: neither the lookup nor the decoding crashes,
// and a value found in place is the value the tree has at the same path.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDotPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? size
    guard let path = DotPath(String(decoding: bytes[..<newline], as: UTF8.self)),
        let body = try? JSONDocument(parsing: bytes[min(size, newline + 1)...])
    else { return 0 }
    let found = body.root.value(at: path)
    precondition(found?.value == path.value(in: body.root.value), "the value at \(path) differs from the tree's")
    _ = try? HTTPJSONSource.items(in: body, at: path, ids: path, from: URL(string: "http://127.0.0.1/api")!)
    return 0
}
