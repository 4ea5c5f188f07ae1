/// Parses a config duration: a decimal number and a unit, `ms`, `s`, `m` or `h` (`"250ms"`,
/// `"10s"`, `"1.5m"`). Returns `nil` for anything else, including negative values.
package func parseDuration(_ text: String) -> Duration? {
    let units: [(suffix: String, milliseconds: Double)] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)]
    for unit in units where text.hasSuffix(unit.suffix) {
        guard let amount = Double(text.dropLast(unit.suffix.count)), amount >= 0, amount.isFinite else { return nil }
        let milliseconds = amount * unit.milliseconds
        guard milliseconds < 1e12 else { return nil }
        return .milliseconds(Int64(milliseconds.rounded()))
    }
    return nil
}

extension Duration {
    /// The duration in whole milliseconds, rounded down.
    public var wholeMilliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }
}
