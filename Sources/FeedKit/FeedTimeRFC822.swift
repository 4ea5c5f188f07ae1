// RFC 822 as RSS writes it, its real-world variants, asctime and Perforce's form.

extension FeedTime {
    /// `[Day,] DD Month YYYY [hh:mm[:ss] [zone]]`, with the month and day swapped too
    /// (`Thu Aug 30 2012 17:26:16 +0200`), asctime (`Sun Jan  4 16:29:06 2004`, also with a zone
    /// before the year) and Perforce's `Fri, 2006/09/15 08:19:53 EDT`. Months and days are named in
    /// English, in full or abbreviated (or in Greek); a year of two digits is read as RFC 5322
    /// says. The zone is a name (see ``namedZones``), `±hhmm`, `±hh:mm`, `GMT±hh:mm` or
    /// `Etc/GMT`, optionally followed by a comment in parentheses; none is UTC.
    static func rfc822(_ scanner: inout DateScanner) -> FeedTime? {
        scanner.skipSeparators()
        var word = scanner.word()
        if !word.isEmpty {
            guard isDayName(word) else { return monthFirst(&scanner, month: word) }
            _ = scanner.skip(".")
            scanner.skipSeparators()
            word = scanner.word()
            if !word.isEmpty { return monthFirst(&scanner, month: word) }
        }
        if scanner.digitRun == 4, scanner.peek(4) == UInt8(ascii: "/") { return perforce(&scanner) }
        guard let day = scanner.digits(1...2) else { return nil }
        _ = scanner.skip("-")
        scanner.skipSeparators()
        guard let month = month(named: scanner.word()) else { return nil }
        _ = scanner.skip(".") || scanner.skip("-")
        scanner.skipSeparators()
        guard let year = year(&scanner) else { return nil }
        return timeAndZone(&scanner, year: year, month: month, day: day)
    }

    /// After a month named first: `Aug 30 2012 [time [zone]]` or asctime's `Jan  4 16:29:06 [zone] 2004`.
    private static func monthFirst(_ scanner: inout DateScanner, month name: UnsafeBufferPointer<UInt8>) -> FeedTime? {
        guard let month = month(named: name) else { return nil }
        _ = scanner.skip(".")
        scanner.skipSeparators()
        guard let day = scanner.digits(1...2) else { return nil }
        scanner.skipSeparators()
        guard scanner.peek(scanner.digitRun) == UInt8(ascii: ":") else {
            guard let year = year(&scanner) else { return nil }
            return timeAndZone(&scanner, year: year, month: month, day: day)
        }
        guard let clock = colonClock(&scanner, minuteDigits: 1...2) else { return nil }
        scanner.skipSpaces()
        var offset: Int64 = 0
        if scanner.digitRun == 0 {
            guard let written = zone(&scanner, default: 0) else { return nil }
            offset = written
            scanner.skipSpaces()
        }
        guard let year = year(&scanner), scanner.atEnd else { return nil }
        return make(
            year: year, month: month, day: day, hour: clock.hour, minute: clock.minute, second: clock.second,
            millisecond: clock.millisecond, offsetMinutes: offset)
    }

    /// `2006/09/15 08:19:53 EDT`.
    private static func perforce(_ scanner: inout DateScanner) -> FeedTime? {
        guard let year = scanner.digits(exactly: 4), scanner.skip("/"), let month = scanner.digits(1...2), scanner.skip("/"),
            let day = scanner.digits(1...2)
        else { return nil }
        return timeAndZone(&scanner, year: year, month: month, day: day)
    }

    /// What may follow a date: nothing (midnight UTC), or a time, a zone and a comment.
    private static func timeAndZone(_ scanner: inout DateScanner, year: Int64, month: Int64, day: Int64) -> FeedTime? {
        scanner.skipSeparators()
        guard !scanner.atEnd else { return make(year: year, month: month, day: day) }
        guard let clock = colonClock(&scanner, minuteDigits: 1...2) else { return nil }
        scanner.skipSpaces()
        guard let offset = zone(&scanner, default: 0) else { return nil }
        scanner.skipSpaces()
        guard skipComment(&scanner), scanner.atEnd else { return nil }
        return make(
            year: year, month: month, day: day, hour: clock.hour, minute: clock.minute, second: clock.second,
            millisecond: clock.millisecond, offsetMinutes: offset)
    }

    /// A year of four digits, or of two read as RFC 5322 says.
    private static func year(_ scanner: inout DateScanner) -> Int64? {
        switch scanner.digitRun {
        case 4: return scanner.digits(exactly: 4)
        case 2: return fullYear(twoDigits: scanner.digits(exactly: 2)!)
        default: return nil
        }
    }

    /// A zone, if one follows, as minutes east of UTC: `Z`, `±hh:mm`, `±hhmm` (and `±hh` where
    /// ISO 8601 allows it, `hoursAlone`), a name, `GMT±hh:mm`, `Etc/GMT`; `fallback` when none
    /// follows. Nil for an unknown name or a malformed offset: an unknown zone is never taken for UTC.
    static func zone(_ scanner: inout DateScanner, default fallback: Int64, hoursAlone: Bool = false) -> Int64? {
        guard let next = scanner.peek(), next != UInt8(ascii: "(") else { return fallback }
        if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { return scanner.offset(hoursAlone: hoursAlone) }
        var name = scanner.word()
        if DateScanner.word(name, is: "etc"), scanner.skip("/") { name = scanner.word() }
        guard let named = namedZone(name) else { return nil }
        guard named == 0, let key = DateScanner.key(name), Self.universalKeys.contains(key),
            let next = scanner.peek(), next == UInt8(ascii: "+") || next == UInt8(ascii: "-")
        else { return named }
        return scanner.offset(hoursAlone: false)
    }

    private static let universalKeys: [UInt64] = [DateScanner.key("gmt"), DateScanner.key("utc"), DateScanner.key("ut")]

    /// A comment in parentheses, as RFC 822 allows after the zone (`+0000 (UTC)`); true when
    /// there is none.
    private static func skipComment(_ scanner: inout DateScanner) -> Bool {
        guard scanner.skip("(") else { return true }
        guard scanner.skip(through: ")") else { return false }
        scanner.skipSpaces()
        return true
    }

    private static let monthNames: [StaticString] = [
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
    ]
    private static let dayNames: [StaticString] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    /// The first three letters of each name, as ``DateScanner/key(_:)`` packs them.
    private static let monthKeys = monthNames.map { prefixKey($0) }
    private static let dayKeys = dayNames.map { prefixKey($0) }

    private static func prefixKey(_ name: StaticString) -> UInt64 {
        DateScanner.key(UnsafeBufferPointer(start: name.utf8Start, count: 3))!
    }

    /// The index in `names` of the name `word` is or abbreviates (to three letters at least).
    private static func index(of word: UnsafeBufferPointer<UInt8>, in names: [StaticString], keys: [UInt64]) -> Int? {
        guard word.count >= 3, let key = DateScanner.key(UnsafeBufferPointer(rebasing: word[0..<3])), let index = keys.firstIndex(of: key),
            word.count == 3 || DateScanner.word(word, abbreviates: names[index])
        else { return nil }
        return index
    }

    private static func month(named word: UnsafeBufferPointer<UInt8>) -> Int64? {
        if let index = index(of: word, in: monthNames, keys: monthKeys) { return Int64(index + 1) }
        guard word.contains(where: { $0 >= 0x80 }) else { return nil }
        return Greek.months.first { DateScanner.word(word, equals: $0.name) }?.month
    }

    private static func isDayName(_ word: UnsafeBufferPointer<UInt8>) -> Bool {
        index(of: word, in: dayNames, keys: dayKeys) != nil || Greek.days.contains { DateScanner.word(word, equals: $0) }
    }

    /// Zones by name, in minutes east of UTC: RFC 822's, the North American ones without their
    /// S/D (`ET`, `PT`, as some feeds write them), and the unambiguous names of Europe, Asia and
    /// Oceania. Military letters and ambiguous names (`IST`) are not zones here.
    static let namedZones: [(name: StaticString, offset: Int64)] = [
        ("z", 0), ("ut", 0), ("utc", 0), ("gmt", 0), ("wet", 0), ("west", 60), ("bst", 60),
        ("met", 60), ("mest", 120), ("cet", 60), ("cest", 120), ("mez", 60), ("mesz", 120), ("eet", 120), ("eest", 180), ("msk", 180),
        ("ast", -240), ("adt", -180), ("at", -240), ("est", -300), ("edt", -240), ("et", -300), ("cst", -360), ("cdt", -300),
        ("ct", -360), ("mst", -420), ("mdt", -360), ("mt", -420), ("pst", -480), ("pdt", -420), ("pt", -480),
        ("akst", -540), ("akdt", -480), ("hst", -600),
        ("jst", 540), ("kst", 540), ("hkt", 480), ("sgt", 480), ("awst", 480), ("acst", 570), ("acdt", 630), ("aest", 600),
        ("aedt", 660), ("nzst", 720), ("nzdt", 780),
    ]

    private static let zoneKeys = namedZones.map { DateScanner.key($0.name) }

    private static func namedZone(_ word: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard let key = DateScanner.key(word), let index = zoneKeys.firstIndex(of: key) else { return nil }
        return namedZones[index].offset
    }

    /// Greek names, as feedparser reads them (with their variant spellings).
    private enum Greek {
        static let months: [(name: [UInt8], month: Int64)] = [
            ("Ιαν", 1), ("Φεβ", 2), ("Μάώ", 3), ("Μαώ", 3), ("Απρ", 4), ("Μάι", 5), ("Μαϊ", 5), ("Μαι", 5), ("Ιούν", 6), ("Ιον", 6),
            ("Ιούλ", 7), ("Ιολ", 7), ("Αύγ", 8), ("Αυγ", 8), ("Σεπ", 9), ("Οκτ", 10), ("Νοέ", 11), ("Νοε", 11), ("Δεκ", 12),
        ].map { (Array($0.0.utf8), $0.1) }
        static let days: [[UInt8]] = ["Κυρ", "Δευ", "Τρι", "Τετ", "Πεμ", "Παρ", "Σαβ"].map { Array($0.utf8) }
    }
}
