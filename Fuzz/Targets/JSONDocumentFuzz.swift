// Fuzz target: any bytes read as a JSONDocument, checked against Foundation's parser.
// Invariants: reading never crashes; the fast walk (DOM), the complete one (On-Demand) and the
// check without an index agree on every text; every value's bytes are one JSON text on one line
// that reads back as the same value; what is accepted, Foundation accepts too and reads as the
// same tree (but for numbers beyond a double's range, which only feedd keeps, and numbers
// Foundation types as integers where feedd reads a double).
import CSimdJSON
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONDocument(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    checkWalksAgree(bytes)
    guard let document = try? JSONDocument(parsing: bytes) else { return 0 }
    var beyondDoubles = false
    check(document.root, beyondDoubles: &beyondDoubles)
    guard !beyondDoubles else { return 0 }
    guard let tree = try? JSONValue(parsing: bytes) else { fatalError("Foundation refuses a text simdjson accepted") }
    precondition(same(document.root.value, tree), "simdjson and Foundation read different values")
    return 0
}

/// Equal values, a number being equal to the same number however it is typed (Foundation reads
/// `21E+1` as an integer, and `1E2` as a double), and within a few units in the last place where
/// Foundation typed a number past 2^53 with a fraction as an integer (it reads
/// `15555555555555533.769` as 15555555555555533, the double nearest it is ...534).
private func same(_ one: JSONValue, _ other: JSONValue) -> Bool {
    switch (one, other) {
    case (.integer(let integer), .double(let double)), (.double(let double), .integer(let integer)):
        return Double(integer) == double || abs(Double(integer) - double) <= 2 * double.ulp
    case (.array(let ones), .array(let others)): return ones.count == others.count && zip(ones, others).allSatisfy(same)
    case (.object(let ones), .object(let others)):
        return ones.count == others.count && ones.allSatisfy { key, value in others[key].map { same(value, $0) } ?? false }
    default: return one == other
    }
}

/// Both walks accept the text or both refuse it; where both accept, they write the same index.
private func checkWalksAgree(_ bytes: UnsafeBufferPointer<UInt8>) {
    let padded = Array(bytes) + Array(repeating: UInt8(ascii: " "), count: Int(FEEDD_JSON_PADDING))
    padded.withUnsafeBufferPointer { text in
        var (fastCount, completeCount) = (0, 0)
        var failure = feedd_json_failure()
        let fast = feedd_json_index(text.baseAddress, bytes.count, JSONDocument.maximumDepth, &fastCount, &failure)
        let complete = feedd_json_index_on_demand(text.baseAddress, bytes.count, JSONDocument.maximumDepth, &completeCount, &failure)
        defer {
            feedd_json_free(fast)
            feedd_json_free(complete)
        }
        precondition((fast == nil) == (complete == nil), "one walk accepts what the other refuses")
        let checked = feedd_json_is_valid(text.baseAddress, bytes.count, JSONDocument.maximumDepth) == 1
        precondition(checked == (fast != nil), "the check without an index disagrees with the walks")
        guard let fast, let complete else { return }
        precondition(fastCount == completeCount && memcmp(fast, complete, fastCount * MemoryLayout<feedd_json_entry>.stride) == 0,
            "the walks index the text differently")
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
