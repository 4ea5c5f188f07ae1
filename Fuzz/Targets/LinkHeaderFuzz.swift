// Fuzz target: an HTTP Link header field. Invariants: parsing never crashes, every target is
// what stood between < and >, and the next link found is one of the links parsed.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLinkHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let field = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let header = LinkHeader(field)
    for link in header.links {
        precondition(!link.target.contains(">"), "a target holds '>'")
        _ = link.relations
    }
    if let next = header.target(relation: "next") {
        precondition(header.links.contains { $0.target == next }, "the next target is not among the links")
    }
    return 0
}
