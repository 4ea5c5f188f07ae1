import FeedKit
import FeedServer

/// The parameters of the feed requests (SPEC §11), checked as the socket checks its requests:
/// each problem is a `bad_request` that names the parameter.
enum RequestParameters {
    /// The most pages one `GET …/pages` may ask for.
    static let maxCount = 100

    /// `GET /v1/feeds/F/pages?after=N&count=K&consumer=C`.
    struct Pages: Equatable {
        var after: Int?
        var count = 1
        var consumer: String?
    }

    /// Reads the page request's parameters through `query` (a query parameter's decoded value).
    static func pages(_ query: (String) -> String?) throws(HTTPError) -> Pages {
        var pages = Pages()
        pages.after = try number(query("after"), "after", in: 0...FeedAccess.maximumPage)
        pages.count = try number(query("count"), "count", in: 1...maxCount) ?? 1
        pages.consumer = try consumer(query("consumer"))
        return pages
    }

    /// `after` of `GET /v1/feeds/F/events`.
    static func after(_ text: String?) throws(HTTPError) -> Int? {
        try number(text, "after", in: 0...FeedAccess.maximumPage)
    }

    /// The body of `POST /v1/feeds/F/ack`: `{"consumer":C,"page":N}`.
    static func acknowledgement(_ body: [UInt8]) throws(HTTPError) -> (consumer: String, page: Int) {
        let object: [String: JSONValue]
        do {
            guard let parsed = try JSONValue(parsing: body).objectValue else {
                throw HTTPError(status: 400, code: "bad_json", message: "the body must be a JSON object {\"consumer\":…,\"page\":…}")
            }
            object = parsed
        } catch let error as HTTPError {
            throw error
        } catch {
            throw HTTPError(status: 400, code: "bad_json", message: "the body is not JSON: \(error)")
        }
        guard case .string(let name)? = object["consumer"] else { throw .badRequest("`consumer` is required, a string") }
        guard let consumer = try consumer(name) else { throw .badRequest("`consumer` is required, a string") }
        guard let value = object["page"], let integer = value.integerValue, case .integer = value, let page = Int(exactly: integer),
            (0...FeedAccess.maximumPage).contains(page)
        else { throw .badRequest("`page` must be a whole number from 0 to \(FeedAccess.maximumPage)") }
        return (consumer, page)
    }

    private static func consumer(_ text: String?) throws(HTTPError) -> String? {
        guard let text else { return nil }
        guard ConsumerName.isValid(text) else {
            throw .badRequest("`consumer` must match \(ConsumerName.rule) (1 to \(ConsumerName.maxLength) letters, digits, '.', '_' or '-')")
        }
        return text
    }

    private static func number(_ text: String?, _ name: String, in range: ClosedRange<Int>) throws(HTTPError) -> Int? {
        guard let text else { return nil }
        // Digits only: Int("+5") and Int("-0") parse, and a page number is written plainly.
        guard !text.isEmpty, text.utf8.count <= 12, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text),
            range.contains(value)
        else { throw .badRequest("`\(name)` must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text.prefix(40))\"") }
        return value
    }
}
