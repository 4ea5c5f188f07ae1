import Foundation

/// Sizes as the config writes them: a whole number and a binary unit, `B`, `KiB`, `MiB`, `GiB`, `TiB`.
enum ByteSize {
    private static let units: [(suffix: String, shift: Int)] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)]

    static func parse(_ text: String) -> Int? {
        for unit in units where text.hasSuffix(unit.suffix) {
            let number = text.dropLast(unit.suffix.count).trimmingCharacters(in: .whitespaces)
            guard let value = Int(number), value >= 0, value <= (Int.max >> unit.shift) else { return nil }
            return value << unit.shift
        }
        return nil
    }

    static func format(_ bytes: Int) -> String {
        for unit in units where bytes >= (1 << unit.shift) && bytes % (1 << unit.shift) == 0 {
            return "\(bytes >> unit.shift)\(unit.suffix)"
        }
        return "\(bytes)B"
    }
}
