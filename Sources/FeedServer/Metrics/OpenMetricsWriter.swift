import FeedEngine

/// Writes the OpenMetrics text exposition format: metric families, each a `# TYPE` and a
/// `# HELP` line and its samples, then `# EOF`.
///
/// A counter's family is named after its `_total` sample, as in the Prometheus text format that
/// `promtool check metrics` and node_exporter's textfile collector read (they would otherwise see
/// a `_total` sample without a type or help). Prometheus's own OpenMetrics parser accepts it too.
struct OpenMetricsWriter {
    /// One sample's labels, in order, e.g. `[("feed", "users")]`.
    typealias Labels = [(name: String, value: String)]

    private(set) var text = ""

    /// The two kinds of metric that are one number per sample.
    enum ScalarKind: String {
        /// Only grows; `name` must end in `_total`.
        case counter
        /// Goes up and down.
        case gauge
    }

    mutating func scalar(_ name: String, _ kind: ScalarKind, help: String, samples: [(labels: Labels, value: Int)]) {
        family(name, type: kind.rawValue, help: help)
        for sample in samples { line(name, sample.labels, String(sample.value)) }
    }

    /// `name` ends in its unit, e.g. `_seconds`; each sample gets its `_bucket`s, `_count` and `_sum`.
    mutating func histogram(_ name: String, unit: String, help: String, samples: [(labels: Labels, histogram: DurationHistogram)]) {
        family(name, type: "histogram", help: help)
        text += "# UNIT \(name) \(unit)\n"
        for sample in samples {
            let histogram = sample.histogram
            for (bound, count) in zip(DurationHistogram.bounds.map(Self.number) + ["+Inf"], histogram.cumulativeCounts) {
                line(name + "_bucket", sample.labels + [("le", bound)], String(count))
            }
            line(name + "_count", sample.labels, String(histogram.count))
            line(name + "_sum", sample.labels, Self.number(histogram.sum))
        }
    }

    /// Ends the exposition; nothing may follow.
    mutating func end() {
        text += "# EOF\n"
    }

    private mutating func family(_ name: String, type: String, help: String) {
        text += "# TYPE \(name) \(type)\n# HELP \(name) \(Self.escaped(help, quote: false))\n"
    }

    private mutating func line(_ name: String, _ labels: Labels, _ value: String) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.name)=\"\(Self.escaped($0.value, quote: true))\"" }.joined(separator: ",") + "}"
        }
        text += " \(value)\n"
    }

    /// Backslash, newline and (in label values) double quote are the characters the format escapes.
    static func escaped(_ text: String, quote: Bool) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where quote: escaped += "\\\""
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// A float as the format spells it: `0.25`, `1.0`, `30.0`.
    static func number(_ value: Double) -> String {
        value.description
    }
}
