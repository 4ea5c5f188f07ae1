// Fuzz target: a page of the S3 feed. Invariant: decoding never crashes.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzS3Body(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzJSONBody(data, size) { _ = try S3FeedSource.decode($0, from: URL(string: "http://127.0.0.1/feed-1.json")!) }
}
