import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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

/// The transport feedd uses: one shared URLSession (libcurl on Linux), no caching, no cookies.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpAdditionalHeaders = ["User-Agent": "feedd/\(feeddVersion)", "Accept": "application/json"]
        session = URLSession(configuration: configuration)
    }

    public func get(_ url: URL, timeout: Duration) async throws -> HTTPResponse {
        var request = URLRequest(url: url)
        request.timeoutInterval = Double(timeout.wholeMilliseconds) / 1000
        let (data, response) = try await fetch(request)
        guard let response = response as? HTTPURLResponse else {
            throw SourceError.transient("GET \(url.absoluteString): not an HTTP response")
        }
        var headers: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return HTTPResponse(status: response.statusCode, headers: headers, body: Array(data))
    }

    /// A data task whose cancellation really cancels it: the async `data(for:)` of Linux's
    /// URLSession does not stop the transfer when its task is cancelled, and a hung request left
    /// running was seen to hold up the next one to the same host.
    private func fetch(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let holder = TaskHolder()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let data, let response {
                        continuation.resume(returning: (data, response))
                    } else {
                        continuation.resume(throwing: error ?? URLError(.unknown))
                    }
                }
                holder.start(task)
            }
        } onCancel: {
            holder.cancel()
        }
    }
}

/// The data task of one request, cancellable from another thread, even before it started.
private final class TaskHolder: Sendable {
    private let state = Mutex<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

    func start(_ task: URLSessionDataTask) {
        let cancelled = state.withLock { state in
            state.task = task
            return state.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}
