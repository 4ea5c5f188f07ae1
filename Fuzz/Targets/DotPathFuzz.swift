// Fuzz target: a dot path (the input's first line) looked up in a JSON body (the rest), as the
// http adapter reads `items` and `id`. Invariant: neither the lookup nor the decoding crashes.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDotPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? size
    guard let path = DotPath(String(decoding: bytes[..<newline], as: UTF8.self)),
        let body = try? JSONValue(parsing: bytes[min(size, newline + 1)...])
    else { return 0 }
    _ = path.value(in: body)
    _ = try? HTTPJSONSource.items(in: body, at: path, ids: path, from: URL(string: "http://127.0.0.1/api")!)
    return 0
}
