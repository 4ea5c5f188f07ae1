// Fuzz target: a randomuser.me response body. Invariant: decoding never crashes.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRandomUserBody(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzJSONBody(data, size) { _ = try RandomUserSource.decode($0, from: URL(string: "http://127.0.0.1/api/")!) }
}
