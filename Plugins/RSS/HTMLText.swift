import CLibXML2

/// HTML as plain text, for `html = "text"`: read with libxml2's HTML parser (as tolerant of
/// broken markup as browsers are), tags dropped, entities decoded, scripts and style sheets
/// dropped, white space collapsed to single spaces, and a block element's edges (`<p>`, `<br>`,
/// `<li>`…) read as white space so that words on either side stay apart.
enum HTMLText {
    static func plainText(_ html: ArraySlice<UInt8>) -> [UInt8] {
        let collector = Collector()
        withExtendedLifetime(collector) {
            html.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { text in
                    withUnsafePointer(to: handler) { feedd_html_parse($0, Unmanaged.passUnretained(collector).toOpaque(), text.baseAddress, Int32(text.count)) }
                }
            }
        }
        return collector.text
    }

    /// Never changed once made (the parser copies it), so any thread may read it. Scripts' and
    /// style sheets' text comes as CDATA, which nothing reads.
    nonisolated(unsafe) private static let handler: htmlSAXHandler = {
        var handler = htmlSAXHandler()
        handler.startElement = { context, name, _ in
            if let name, isBlock(name) { collector(context).breakWords() }
        }
        handler.endElement = { context, name in
            if let name, isBlock(name) { collector(context).breakWords() }
        }
        handler.characters = { context, bytes, count in
            collector(context).append(UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        handler.cdataBlock = { _, _, _ in }
        return handler
    }()

    private static func collector(_ context: UnsafeMutableRawPointer?) -> Collector {
        Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
    }

    private static let blocks: Set<String> = [
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure", "footer", "form",
        "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "td",
        "th", "tr", "ul",
    ]

    private static func isBlock(_ name: UnsafePointer<xmlChar>) -> Bool {
        blocks.contains(String(cString: name))
    }

    /// The text so far, and whether white space is owed before the next word.
    private final class Collector {
        var text: [UInt8] = []
        private var spaceOwed = false

        func breakWords() {
            spaceOwed = !text.isEmpty
        }

        func append(_ bytes: UnsafeBufferPointer<UInt8>) {
            for byte in bytes {
                if Trimming.isSpace(byte) {
                    spaceOwed = !text.isEmpty
                    continue
                }
                if spaceOwed {
                    text.append(UInt8(ascii: " "))
                    spaceOwed = false
                }
                text.append(byte)
            }
        }
    }
}
