import FeedKit

/// What a plugin's answer to `fetch` means (SPEC §4, exec protocol).
enum ExecResponse: Equatable {
    /// A page: `{"items": [{"id": …, "data": …}, …], "next": token-or-null}`.
    case page(FetchResult)
    /// `{"error": "why", "retryable": bool}`: the plugin's source failed; the plugin is fine.
    case pluginError(SourceError)
    /// Not a valid answer: the plugin is misbehaving and is restarted.
    case invalid(String)

    /// What `document`, the program's answer line, means; items keep the bytes the program wrote.
    static func decodeFetch(_ document: JSONDocument) -> ExecResponse {
        let response = document.root
        if let error = response["error"] {
            let message = "plugin error: \(error.stringValue ?? error.jsonText)"
            return .pluginError(response["retryable"]?.boolValue == false ? .rejected(message) : .transient(message))
        }
        guard let entries = response["items"]?.elements else {
            return .invalid("answered a fetch without an \"items\" array: \(response.jsonText.prefix(200))")
        }
        var items: [Item] = []
        items.reserveCapacity(entries.count)
        for entry in entries {
            guard let data = entry["data"] else { return .invalid("sent an item without \"data\": \(entry.jsonText.prefix(200))") }
            items.append(Item(id: entry["id"], data: data))
        }
        guard let next = response["next"], !next.isNull else { return .page(.page(items, next: .end)) }
        return .page(.page(items, next: .more(token: next.stringValue ?? next.jsonText)))
    }
}
