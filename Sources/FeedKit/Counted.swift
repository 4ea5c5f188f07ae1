/// `count` and the noun in the number that fits: `counted(1, "client")` is "1 client",
/// `counted(3, "client")` is "3 clients", `counted(2, "entry", plural: "entries")` is "2 entries".
public func counted(_ count: Int, _ singular: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
}
