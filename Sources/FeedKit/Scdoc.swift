/// Text for scdoc(5), the man page source format: feedd.toml(5) and feedctl(1) are partly
/// printed by the programs themselves (`feedd config-keys --scdoc`, `feedctl help --scdoc`).
public enum Scdoc {
    /// `text` with scdoc's markup characters (`*` bold, `_` underline, `\`) taken literally.
    public static func escaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "\\" || character == "*" || character == "_" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }
}
