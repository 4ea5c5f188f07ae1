import Foundation

/// A point in time read from a feed: RFC 822 (RSS 2.0's `pubDate`) or RFC 3339 / W3C-DTF (Atom,
/// `dc:date`), written back as RFC 3339 in UTC. Read by hand, byte by byte, since Foundation's
/// date formatters are slow, locale-bound and accept more than they should. The `rss` adapter
/// reads entries' dates with it, and the `merge` adapter the `field` it orders by.
public struct FeedTime: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSinceEpoch: Int64

    /// The time `millisecondsSinceEpoch` after 1970-01-01T00:00:00Z.
    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// Earlier times compare lower.
    public static func < (lhs: FeedTime, rhs: FeedTime) -> Bool { lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch }

    /// Either form, whichever `text` is; nil for anything else.
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let time = Self.rfc3339(Array(trimmed.utf8)) ?? Self.rfc822(trimmed) else { return nil }
        self = time
    }

    /// `2026-11-30T05:00:00Z`, with milliseconds only when there are some.
    public var rfc3339: String {
        let days = millisecondsSinceEpoch >= 0 ? millisecondsSinceEpoch / 86_400_000 : (millisecondsSinceEpoch - 86_399_999) / 86_400_000
        let withinDay = millisecondsSinceEpoch - days * 86_400_000
        let (year, month, day) = Self.civilDate(daysSinceEpoch: days)
        let seconds = withinDay / 1000
        var text = "\(Self.digits(year, 4))-\(Self.digits(month, 2))-\(Self.digits(day, 2))T"
        text += "\(Self.digits(seconds / 3600, 2)):\(Self.digits(seconds / 60 % 60, 2)):\(Self.digits(seconds % 60, 2))"
        if withinDay % 1000 != 0 { text += "." + Self.digits(withinDay % 1000, 3) }
        return text + "Z"
    }

    // MARK: RFC 3339 and W3C-DTF

    /// `YYYY-MM-DD`, optionally `T` (or a space) `hh:mm[:ss[.fraction]]` and `Z` or `±hh:mm`.
    private static func rfc3339(_ bytes: [UInt8]) -> FeedTime? {
        var reader = ByteReader(bytes)
        guard let year = reader.number(digits: 4), reader.skip("-"), let month = reader.number(digits: 2), reader.skip("-"),
            let day = reader.number(digits: 2)
        else { return nil }
        var hour: Int64 = 0, minute: Int64 = 0, second: Int64 = 0, millisecond: Int64 = 0, offsetMinutes: Int64 = 0
        if reader.skip("T") || reader.skip("t") || reader.skip(" ") {
            guard let h = reader.number(digits: 2), reader.skip(":"), let m = reader.number(digits: 2) else { return nil }
            (hour, minute) = (h, m)
            if reader.skip(":") {
                guard let s = reader.number(digits: 2) else { return nil }
                second = s
                if reader.skip(".") || reader.skip(",") {
                    let fraction = reader.digitRun()
                    guard !fraction.isEmpty else { return nil }
                    millisecond = Int64((fraction + "00").prefix(3))!
                }
            }
            if reader.skip("Z") || reader.skip("z") {
            } else if let sign = reader.sign() {
                guard let h = reader.number(digits: 2) else { return nil }
                _ = reader.skip(":")
                guard let m = reader.number(digits: 2) else { return nil }
                offsetMinutes = sign * (h * 60 + m)
            } else {
                return nil
            }
        }
        guard reader.atEnd else { return nil }
        return make(year: year, month: month, day: day, hour: hour, minute: minute, second: second, millisecond: millisecond, offsetMinutes: offsetMinutes)
    }

    // MARK: RFC 822 (as RFC 1123 and real feeds write it)

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let zones: [String: Int64] = [
        "ut": 0, "utc": 0, "gmt": 0, "z": 0, "est": -300, "edt": -240, "cst": -360, "cdt": -300, "mst": -420, "mdt": -360,
        "pst": -480, "pdt": -420,
    ]

    /// `[Day,] DD Mon YYYY hh:mm[:ss] zone`, with a two-digit year read as 19xx or 20xx (before
    /// 50: 20xx), and a zone that is a name from RFC 822 or `±hhmm`; a missing zone is UTC.
    private static func rfc822(_ text: String) -> FeedTime? {
        var words = text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," }).map(String.init)
        if let first = words.first, first.first?.isLetter == true { words.removeFirst() }
        guard words.count == 4 || words.count == 5, let day = Int64(words[0]), (1...2).contains(words[0].count),
            let monthIndex = months.firstIndex(of: String(words[1].prefix(3))), words[1].count >= 3,
            var year = Int64(words[2]), words[2].count == 2 || words[2].count == 4
        else { return nil }
        if words[2].count == 2 { year += year < 50 ? 2000 : 1900 }
        let clock = words[3].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 2 || clock.count == 3, clock.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
            let hour = Int64(clock[0]), let minute = Int64(clock[1]), let second = clock.count == 3 ? Int64(clock[2]) : 0
        else { return nil }
        var offsetMinutes: Int64 = 0
        if words.count == 5 {
            let zone = words[4]
            if let named = zones[zone] {
                offsetMinutes = named
            } else {
                var reader = ByteReader(Array(zone.utf8))
                guard let sign = reader.sign(), let h = reader.number(digits: 2), let m = reader.number(digits: 2), reader.atEnd else { return nil }
                offsetMinutes = sign * (h * 60 + m)
            }
        }
        return make(year: year, month: Int64(monthIndex + 1), day: day, hour: hour, minute: minute, second: second, millisecond: 0,
            offsetMinutes: offsetMinutes)
    }

    // MARK: Arithmetic

    private static func make(
        year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64, millisecond: Int64, offsetMinutes: Int64
    ) -> FeedTime? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), abs(offsetMinutes) < 24 * 60
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetMinutes * 60
        return FeedTime(millisecondsSinceEpoch: seconds * 1000 + millisecond)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Howard Hinnant's days_from_civil: days since 1970-01-01 of a proleptic Gregorian date.
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse, civil_from_days.
    private static func civilDate(daysSinceEpoch days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func digits(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}

/// Reads ASCII digits and signs from a byte array, for the time formats above.
private struct ByteReader {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
        position += 1
        return true
    }

    /// Exactly `digits` decimal digits.
    mutating func number(digits: Int) -> Int64? {
        guard position + digits <= bytes.count else { return nil }
        var value: Int64 = 0
        for byte in bytes[position..<position + digits] {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        position += digits
        return value
    }

    /// Every digit from here on, as text (a fraction of a second may have any number of them).
    mutating func digitRun() -> String {
        let start = position
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    /// +1 for `+`, -1 for `-`, nil for anything else.
    mutating func sign() -> Int64? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }
}
