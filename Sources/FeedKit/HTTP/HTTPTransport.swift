import Foundation

/// An HTTP response as adapters see it.
public struct HTTPResponse: Sendable {
    public let status: Int
    /// Header fields with lowercased names.
    public let headers: [String: String]
    public let body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Performs HTTP GETs: the seam between network adapters and the network.
public protocol HTTPTransport: Sendable {
    /// GETs `url`; throws for transport failures (no connection, reset, timeout), not for HTTP statuses.
    func get(_ url: URL, timeout: Duration) async throws -> HTTPResponse
}
