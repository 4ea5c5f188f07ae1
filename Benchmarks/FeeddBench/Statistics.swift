/// A figure measured once per run: reported as its median and its spread over the runs.
struct Figure {
    let name: String
    let unit: String
    var values: [Double] = []

    var median: Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    var spread: String {
        guard let low = values.min(), let high = values.max() else { return "-" }
        return "\(format(low))–\(format(high))"
    }
}

func format(_ value: Double) -> String {
    if value.isNaN { return "n/a" }
    if value >= 100 { return String(Int(value.rounded())) }
    if value >= 10 { return String(Double(Int(value * 10)) / 10) }
    return String(Double(Int(value * 1000)) / 1000)
}

/// The `fraction` quantile (0.5 for the median) of `samples`.
func quantile(_ samples: [Double], _ fraction: Double) -> Double {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded(.up)))]
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1_000 + Double(components.attoseconds) / 1e15 }
    var seconds: Double { milliseconds / 1_000 }
}
