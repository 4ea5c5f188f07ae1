import FeedKit

/// A key the daemon reads itself (`[daemon]`, a feed's common keys): its declaration, and how
/// its value lands in the settings. A table is a list of these, in reading order, so the key
/// that is documented is the key that is read.
struct SettingKey<Settings>: Sendable {
    let declaration: ConfigKey
    let read: @Sendable (ConfigTable, inout Settings) throws(OptionError) -> Void

    init(
        _ name: String, _ type: ConfigValueType, _ defaultValue: ConfigDefault, _ summary: String,
        read: @escaping @Sendable (ConfigTable, inout Settings) throws(OptionError) -> Void
    ) {
        declaration = ConfigKey(name, type, defaultValue, summary)
        self.read = read
    }
}

extension Array {
    /// The declarations of a table of setting keys.
    func declarations<Settings>() -> [ConfigKey] where Element == SettingKey<Settings> {
        map(\.declaration)
    }

    /// Reads every key into `settings`, keeping on past a problem so that all of them are found;
    /// `report` places each problem where its key is written. Returns the keys that had one.
    @discardableResult
    func read<Settings>(
        from table: ConfigTable, into settings: inout Settings, report: (OptionError) -> Void
    ) -> Set<String> where Element == SettingKey<Settings> {
        var failed: Set<String> = []
        for key in self {
            do {
                try key.read(table, &settings)
            } catch {
                failed.insert(error.key)
                report(error)
            }
        }
        return failed
    }
}

extension ConfigTable {
    /// A size such as `"512KiB"`, `"64MiB"` or `"1GiB"` (or a plain number of bytes) within `range`.
    func byteSize(_ key: String, in range: ClosedRange<Int>) throws(OptionError) -> Int? {
        guard let value = value(key) else { return nil }
        let bytes: Int?
        if case .integer(let integer) = value {
            bytes = Int(exactly: integer)
        } else if let text = value.stringValue {
            bytes = ByteSize.parse(text)
        } else {
            bytes = nil
        }
        guard let bytes else { throw invalid(key, "expected a size such as \"512KiB\", \"64MiB\" or \"1GiB\"") }
        guard range.contains(bytes) else {
            throw invalid(key, "must be from \(ByteSize.format(range.lowerBound)) to \(ByteSize.format(range.upperBound))")
        }
        return bytes
    }

    /// A duration longer than zero.
    func positiveDuration(_ key: String) throws(OptionError) -> Duration? {
        guard let duration = try duration(key) else { return nil }
        guard duration > .zero else { throw invalid(key, "must be longer than zero") }
        return duration
    }

    /// The message for each key of the table that is not its own, with the closest of `known`.
    func unknownKeyMessages(known: [ConfigKey], saying what: String = "unknown key") -> [(key: String, message: String)] {
        let names = known.filter { !$0.isOtherKeys }.map(\.name)
        return unknownKeys.map { key in (key, "\(name).\(key): \(what)\(SpellingSuggestion.didYouMean(key, among: names))") }
    }
}
