import FeedKit

/// The bounds every record read from the fleet is held to, whoever wrote it.
public enum RecordLimits {
    /// Generations run from 1 to 2^40: far more than any fleet refreshes (a refresh a second for
    /// 30,000 years), and far from where adding to one overflows.
    public static let maximumGeneration: Int64 = 1 << 40
    /// Page numbers, likewise.
    public static let maximumPage: Int64 = 1 << 40
    static let feedBytes = 64
    static let consumerBytes = 128
    static let instanceBytes = 256
    static let seedBytes = 1_024
    static let fingerprintBytes = 256

    /// A feed name as the configuration allows it: `[a-z0-9][a-z0-9_-]{0,63}`, a NATS subject token.
    static func isFeedName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...feedBytes).contains(bytes.count) else { return false }
        func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        return isLowerAlphanumeric(bytes[0]) && bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }
}

/// Reads the fields of one JSON object record, each checked for its type and bounds; every
/// failure is a ``Rejection`` that says which field and why.
struct RecordFields {
    private let bytes: [UInt8]
    private let reason: Rejection.Reason
    private let address: String

    init(_ bytes: [UInt8], _ reason: Rejection.Reason, at address: String) {
        self.bytes = bytes
        self.reason = reason
        self.address = address
    }

    /// `body` applied to the record's fields; a rejection if the record is not one JSON object.
    func get<Value>(_ body: ([String: JSONValue]) throws(Rejection) -> Value) -> Result<Value, Rejection> {
        do throws(Rejection) {
            guard bytes.count <= 4_096 else { throw rejection("\(bytes.count) bytes, more than any record of its kind") }
            guard let json = try? JSONValue(parsing: bytes), case .object(let fields) = json else { throw rejection("not a JSON object") }
            return .success(try body(fields))
        } catch {
            return .failure(error)
        }
    }

    func rejection(_ problem: String) -> Rejection {
        Rejection(reason, at: address, problem)
    }

    func string(_ fields: [String: JSONValue], _ name: String, maximumBytes: Int, allowEmpty: Bool = false) throws(Rejection) -> String {
        guard case .string(let value) = fields[name] else { throw rejection("`\(name)` is missing or not a string") }
        guard value.utf8.count <= maximumBytes, allowEmpty || !value.isEmpty else {
            throw rejection("`\(name)` must be \(allowEmpty ? "" : "1 to ")\(maximumBytes) bytes at most (it has \(value.utf8.count))")
        }
        return value
    }

    func integer(_ fields: [String: JSONValue], _ name: String, in range: ClosedRange<Int64>) throws(Rejection) -> Int64 {
        guard case .integer(let value) = fields[name] else { throw rejection("`\(name)` is missing or not a whole number") }
        guard range.contains(value) else { throw rejection("`\(name)` is \(value), outside \(range.lowerBound)…\(range.upperBound)") }
        return value
    }
}
