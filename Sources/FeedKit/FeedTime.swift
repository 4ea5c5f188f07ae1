/// A point in time read from a feed, written back as RFC 3339 in UTC.
///
/// Reads what feeds write (see the README's list of date forms): RFC 3339, W3C-DTF and ISO 8601
/// with their partial and compact forms (`2003`, `2003-12`, `20031231`, `2003-335`,
/// `2004-07-08 23:56:58`), RFC 822 as RSS writes it and its real-world variants (two-digit years,
/// named zones such as `PT` or `MET`, `GMT-01:01`, missing seconds or time, long month names,
/// month and day swapped), asctime, Perforce's `2006/09/15`, and the Greek, Hungarian and
/// Korean forms some old feeds use. A time without a zone is UTC. Anything else, and any field out
/// of range, is no time at all: a date is never guessed.
///
/// Read byte by byte without allocating, since a large document has tens of thousands of dates
/// and Foundation's formatters are slow, locale-bound and accept more than they should. The
/// `rss` adapter reads entries' dates with it, and the `merge` adapter the `field` it orders by.
public struct FeedTime: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    public static func < (lhs: FeedTime, rhs: FeedTime) -> Bool { lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch }

    /// The time `text` gives in any of the forms above; nil for anything else.
    public init?(_ text: String) {
        var text = text
        guard let time = text.withUTF8({ FeedTime(utf8: $0) }) else { return nil }
        self = time
    }

    /// The time the UTF-8 bytes give in any of the forms above; nil for anything else.
    /// Surrounding white space is ignored.
    public init?(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        var start = 0
        var end = bytes.count
        while start < end, DateScanner.isSpace(bytes[start]) { start += 1 }
        while end > start, DateScanner.isSpace(bytes[end - 1]) { end -= 1 }
        guard start < end else { return nil }
        let trimmed = UnsafeBufferPointer(rebasing: bytes[start..<end])
        var iso = DateScanner(trimmed)
        if let time = Self.iso8601(&iso) {
            self = time
            return
        }
        var rfc822 = DateScanner(trimmed)
        guard let time = Self.rfc822(&rfc822) else { return nil }
        self = time
    }

    /// `2026-11-30T05:00:00Z`, with milliseconds only when there are some.
    public var rfc3339: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendRFC3339(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``rfc3339``'s UTF-8 bytes to `bytes`, for a writer that builds JSON text directly.
    public func appendRFC3339(to bytes: inout [UInt8]) {
        let days = millisecondsSinceEpoch >= 0 ? millisecondsSinceEpoch / 86_400_000 : (millisecondsSinceEpoch - 86_399_999) / 86_400_000
        let withinDay = millisecondsSinceEpoch - days * 86_400_000
        let (year, month, day) = Self.civilDate(daysSinceEpoch: days)
        let seconds = withinDay / 1000
        let milliseconds = withinDay % 1000
        // Written into a fixed buffer first, then appended at once.
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let length = withUnsafeMutableBytes(of: &text) { buffer -> Int in
            var end = 0
            func put(_ value: Int64, digits: Int) {
                var rest = value
                for index in (0..<digits).reversed() {
                    buffer[end + index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                end += digits
            }
            func put(_ character: Unicode.Scalar) {
                buffer[end] = UInt8(ascii: character)
                end += 1
            }
            put(year, digits: 4)
            put("-")
            put(month, digits: 2)
            put("-")
            put(day, digits: 2)
            put("T")
            put(seconds / 3600, digits: 2)
            put(":")
            put(seconds / 60 % 60, digits: 2)
            put(":")
            put(seconds % 60, digits: 2)
            if milliseconds != 0 {
                put(".")
                put(milliseconds, digits: 3)
            }
            put("Z")
            return end
        }
        withUnsafeBytes(of: &text) { bytes.append(contentsOf: $0.prefix(length)) }
    }

    // MARK: Arithmetic

    /// The instant of a civil date and time at `offsetMinutes` east of UTC; nil when a field is out
    /// of range (a 31 February, a 25th hour, an offset of a day or more). A leap second counts as
    /// the second before it.
    static func make(
        year: Int64, month: Int64, day: Int64, hour: Int64 = 0, minute: Int64 = 0, second: Int64 = 0, millisecond: Int64 = 0,
        offsetMinutes: Int64 = 0
    ) -> FeedTime? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), abs(offsetMinutes) < 24 * 60
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetMinutes * 60
        return FeedTime(millisecondsSinceEpoch: seconds * 1000 + millisecond)
    }

    /// The date of day `ordinal` (from 1) of `year`; nil past the year's last day.
    static func monthAndDay(ordinal: Int64, year: Int64) -> (month: Int64, day: Int64)? {
        var remaining = ordinal
        guard remaining >= 1 else { return nil }
        for month in Int64(1)...12 {
            let length = daysIn(month: month, year: year)
            if remaining <= length { return (month, remaining) }
            remaining -= length
        }
        return nil
    }

    /// A two-digit year as RFC 5322 reads it: 00–49 are 2000–2049, 50–99 are 1950–1999.
    static func fullYear(twoDigits year: Int64) -> Int64 {
        year < 50 ? 2000 + year : 1900 + year
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
}
