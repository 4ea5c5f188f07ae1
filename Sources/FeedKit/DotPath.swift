/// A path into a JSON value written with dots: `data.posts`, `data.0.id`, `user.name`.
///
/// Each component is an object member's name, or, where the value at that point is an array, a
/// decimal index from 0. The empty path is the value itself. Member names containing a dot
/// cannot be reached.
public struct DotPath: Sendable, Hashable, CustomStringConvertible {
    /// The path as written.
    public let description: String
    let components: [Substring]

    /// Reads `text`; nil when a component is empty (`"a..b"`, `".a"`, `"a."`).
    public init?(_ text: String) {
        description = text
        components = text.isEmpty ? [] : text.split(separator: ".", omittingEmptySubsequences: false)
        guard !components.contains(where: \.isEmpty) else { return nil }
    }

    /// The value at this path in `value`, or nil where a member or an index is missing.
    public func value(in value: JSONValue) -> JSONValue? {
        var current = value
        for component in components {
            switch current {
            case .object(let members):
                guard let member = members[String(component)] else { return nil }
                current = member
            case .array(let elements):
                guard component.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                    let index = Int(component), elements.indices.contains(index)
                else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }
}
