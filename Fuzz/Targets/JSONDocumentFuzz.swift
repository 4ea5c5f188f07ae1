// Fuzz target: any bytes read as a JSONDocument, checked against Foundation's parser.
// Invariants: reading never crashes; every value's bytes are one JSON text on one line that reads
// back as the same value; what is accepted, Foundation accepts too and reads as the same tree
// (but for numbers beyond a double's range, which only feedd keeps, and numbers Foundation
// types as integers where feedd reads a double).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONDocument(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let document = try? JSONDocument(parsing: bytes) else { return 0 }
    var beyondDoubles = false
    check(document.root, beyondDoubles: &beyondDoubles)
    guard !beyondDoubles else { return 0 }
    guard let tree = try? JSONValue(parsing: bytes) else { fatalError("Foundation refuses a text simdjson accepted") }
    precondition(same(document.root.value, tree), "simdjson and Foundation read different values")
    return 0
}

/// Equal values, a number being equal to the same number however it is typed (Foundation reads
/// `21E+1` as an integer, and `1E2` as a double).
private func same(_ one: JSONValue, _ other: JSONValue) -> Bool {
    switch (one, other) {
    case (.integer(let integer), .double(let double)), (.double(let double), .integer(let integer)): return Double(integer) == double
    case (.array(let ones), .array(let others)): return ones.count == others.count && zip(ones, others).allSatisfy(same)
    case (.object(let ones), .object(let others)):
        return ones.count == others.count && ones.allSatisfy { key, value in others[key].map { same(value, $0) } ?? false }
    default: return one == other
    }
}

private func check(_ element: JSONElement, beyondDoubles: inout Bool) {
    let raw = element.raw
    precondition(!raw.bytes.contains(UInt8(ascii: "\n")) && !raw.bytes.contains(UInt8(ascii: "\r")), "a value's bytes span lines")
    guard let again = try? JSONDocument(parsing: raw.bytes) else { fatalError("a value's bytes are not one JSON text") }
    precondition(again.root.canonicalText == element.canonicalText, "a value's bytes read back as another value")
    switch element.kind {
    case .array: for child in element.elements! { check(child, beyondDoubles: &beyondDoubles) }
    case .object: for (_, child) in element.members! { check(child, beyondDoubles: &beyondDoubles) }
    case .number: if element.doubleValue?.isFinite != true { beyondDoubles = true }
    default: break
    }
}
