// RFC 3339, W3C-DTF and the ISO 8601 forms feeds write, with the Hungarian and Korean variants
// some old feeds use.

extension FeedTime {
    /// A date (`2003-12-31`, `2003-12`, `2003`, `20031231`, `2003-335`, `03-12-31`, `031231`,
    /// `-0312`, `2003-012-31`), then optionally a time after `T` or spaces (`10:14`,
    /// `10:14:55.123`, `101455`) and a zone (`Z`, `±hh:mm`, `±hhmm`, `±hh`, or a name such as
    /// `UTC` or `EST`). No zone is UTC; no time is midnight.
    static func iso8601(_ scanner: inout DateScanner) -> FeedTime? {
        guard var date = isoDate(&scanner) else { return nil }
        if scanner.atEnd { return make(year: date.year, month: date.month, day: date.day) }
        let separated = scanner.skip("T") || scanner.skip("t") || scanner.skipSpaces()
        guard separated else { return nil }
        // Nate (Korean): `2004-05-25 오후 11:23:17`, Korea's time.
        var meridiem: Meridiem?
        if scanner.skip(Korean.morning) {
            meridiem = .morning
        } else if scanner.skip(Korean.afternoon) {
            meridiem = .afternoon
        }
        if meridiem != nil {
            scanner.skipSpaces()
            date.defaultOffset = Korean.offset
        }
        guard var clock = isoClock(&scanner) else { return nil }
        if let meridiem {
            guard let hour = meridiem.hour(clock.hour) else { return nil }
            clock.hour = hour
        }
        scanner.skipSpaces()
        guard let offset = zone(&scanner, default: date.defaultOffset, hoursAlone: true), scanner.atEnd else { return nil }
        return make(
            year: date.year, month: date.month, day: date.day, hour: clock.hour, minute: clock.minute, second: clock.second,
            millisecond: clock.millisecond, offsetMinutes: offset)
    }

    private struct CivilDate {
        var year: Int64
        var month: Int64 = 1
        var day: Int64 = 1
        /// The zone when none is written: UTC, but Korea's for the Korean forms.
        var defaultOffset: Int64 = 0
    }

    struct Clock {
        var hour: Int64
        var minute: Int64
        var second: Int64 = 0
        var millisecond: Int64 = 0
    }

    private static func isoDate(_ scanner: inout DateScanner) -> CivilDate? {
        if scanner.skip("-") {
            // Truncated ISO 8601 (year and month of the century): `-0312`, `-03-12`.
            guard let year = scanner.digits(exactly: 2) else { return nil }
            _ = scanner.skip("-")
            guard let month = scanner.digits(2...2) else { return nil }
            return CivilDate(year: fullYear(twoDigits: year), month: month)
        }
        switch scanner.digitRun {
        case 8:  // 20031231
            guard let year = scanner.digits(exactly: 4), let month = scanner.digits(exactly: 2), let day = scanner.digits(exactly: 2) else { return nil }
            return CivilDate(year: year, month: month, day: day)
        case 7:  // 2003335: day 335 of 2003
            guard let year = scanner.digits(exactly: 4), let ordinal = scanner.digits(exactly: 3) else { return nil }
            return ordinalDate(year: year, ordinal: ordinal)
        case 6:  // 031231
            guard let year = scanner.digits(exactly: 2), let month = scanner.digits(exactly: 2), let day = scanner.digits(exactly: 2) else { return nil }
            return CivilDate(year: fullYear(twoDigits: year), month: month, day: day)
        case 5:  // 03335
            guard let year = scanner.digits(exactly: 2), let ordinal = scanner.digits(exactly: 3) else { return nil }
            return ordinalDate(year: fullYear(twoDigits: year), ordinal: ordinal)
        case 4:
            let year = scanner.digits(exactly: 4)!
            if scanner.skip(Korean.year) { return onblogDate(&scanner, year: year) }
            guard scanner.skip("-") else { return CivilDate(year: year) }
            return monthAndDay(&scanner, year: year)
        case 2:  // 03-12-31, 03-335
            guard let year = scanner.digits(exactly: 2), scanner.skip("-") else { return nil }
            return monthAndDay(&scanner, year: fullYear(twoDigits: year))
        default:
            return nil
        }
    }

    /// What follows `YYYY-`: `MM`, `MM-DD`, `DDD` (a day of the year), `0MM-DD` (Google's extra
    /// zero) or a Hungarian month name and its day (`július-13`).
    private static func monthAndDay(_ scanner: inout DateScanner, year: Int64) -> CivilDate? {
        switch scanner.digitRun {
        case 2:
            let month = scanner.digits(exactly: 2)!
            guard scanner.skip("-") else { return CivilDate(year: year, month: month) }
            guard let day = scanner.digits(2...2) else { return nil }
            return CivilDate(year: year, month: month, day: day)
        case 3 where scanner.peek() == UInt8(ascii: "0") && scanner.peek(3) == UInt8(ascii: "-"):
            let month = scanner.digits(exactly: 3)!
            _ = scanner.skip("-")
            guard let day = scanner.digits(2...2) else { return nil }
            return CivilDate(year: year, month: month, day: day)
        case 3:
            return ordinalDate(year: year, ordinal: scanner.digits(exactly: 3)!)
        case 0:
            let name = scanner.word()
            guard let month = Hungarian.months.first(where: { DateScanner.word(name, equals: $0.name) })?.month, scanner.skip("-"),
                let day = scanner.digits(1...2)
            else { return nil }
            return CivilDate(year: year, month: month, day: day)
        default:
            return nil
        }
    }

    private static func ordinalDate(year: Int64, ordinal: Int64) -> CivilDate? {
        guard let (month, day) = monthAndDay(ordinal: ordinal, year: year) else { return nil }
        return CivilDate(year: year, month: month, day: day)
    }

    /// OnBlog (Korean): `2004년 05월 28일  01:31:15`, after the year and its `년`.
    private static func onblogDate(_ scanner: inout DateScanner, year: Int64) -> CivilDate? {
        scanner.skipSpaces()
        guard let month = scanner.digits(1...2), scanner.skip(Korean.month) else { return nil }
        scanner.skipSpaces()
        guard let day = scanner.digits(1...2), scanner.skip(Korean.day) else { return nil }
        return CivilDate(year: year, month: month, day: day, defaultOffset: Korean.offset)
    }

    /// `hh:mm[:ss[.fff]]` (an hour of one digit too), or `hhmm[ss[.fff]]`.
    private static func isoClock(_ scanner: inout DateScanner) -> Clock? {
        let run = scanner.digitRun
        if run == 4 || run == 6 {
            var clock = Clock(hour: scanner.digits(exactly: 2)!, minute: scanner.digits(exactly: 2)!)
            if run == 6 { clock.second = scanner.digits(exactly: 2)! }
            clock.millisecond = scanner.milliseconds() ?? 0
            return clock
        }
        return colonClock(&scanner, minuteDigits: 2...2)
    }

    /// `h:mm`, `hh:mm:ss`, `hh:mm:ss.fff`; a third colon is no time.
    static func colonClock(_ scanner: inout DateScanner, minuteDigits: ClosedRange<Int>) -> Clock? {
        guard let hour = scanner.digits(1...2), scanner.skip(":"), let minute = scanner.digits(minuteDigits) else { return nil }
        var clock = Clock(hour: hour, minute: minute)
        if scanner.skip(":") {
            guard let second = scanner.digits(minuteDigits) else { return nil }
            clock.second = second
            clock.millisecond = scanner.milliseconds() ?? 0
        }
        guard scanner.peek() != UInt8(ascii: ":") else { return nil }
        return clock
    }

    private enum Meridiem {
        case morning, afternoon

        /// The hour of the day of `hour` on a 12-hour clock.
        func hour(_ hour: Int64) -> Int64? {
            guard (1...12).contains(hour) else { return nil }
            switch self {
            case .morning: return hour == 12 ? 0 : hour
            case .afternoon: return hour == 12 ? 12 : hour + 12
            }
        }
    }

    private enum Korean {
        static let year: [UInt8] = Array("년".utf8)
        static let month: [UInt8] = Array("월".utf8)
        static let day: [UInt8] = Array("일".utf8)
        static let morning: [UInt8] = Array("오전".utf8)
        static let afternoon: [UInt8] = Array("오후".utf8)
        /// Korea Standard Time, +09:00.
        static let offset: Int64 = 540
    }

    private enum Hungarian {
        /// With the misspellings feedparser also reads (`februári`, `máujus`).
        static let months: [(name: [UInt8], month: Int64)] = [
            ("január", 1), ("február", 2), ("februári", 2), ("március", 3), ("április", 4), ("május", 5), ("máujus", 5),
            ("június", 6), ("július", 7), ("augusztus", 8), ("szeptember", 9), ("október", 10), ("november", 11), ("december", 12),
        ].map { (Array($0.0.utf8), $0.1) }
    }
}
