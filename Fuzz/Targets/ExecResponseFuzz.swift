// Fuzz target: an exec plugin's answer to fetch. Invariant: decoding never crashes.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzExecResponse(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzJSONBody(data, size) { _ = ExecResponse.decodeFetch($0) }
}
