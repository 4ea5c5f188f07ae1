import FeedKit
import Foundation

/// Where a merged feed is in each of its members: the token of a `merge` page.
///
/// It is JSON, keys sorted, and names each member, so it reads the same after a restart and a
/// member added by a reload starts from its first page:
///
/// ```json
/// {"m":{"news":{"g":1,"o":5,"p":3},"users":{"e":true,"g":2,"o":0,"p":1}},"t":1}
/// ```
///
/// `m` holds each member's ``MemberPosition``, `t` whose turn is next in `round_robin` (an index
/// into the `feeds` list).
struct MergeToken: Codable, Hashable {
    var members: [String: MemberPosition]
    var turn: Int

    private enum CodingKeys: String, CodingKey {
        case members = "m"
        case turn = "t"
    }

    /// Where page 1 starts: every member at its page 1, offset 0, its generation not yet seen.
    static let start = MergeToken(members: [:], turn: 0)

    /// The token as a page hands it on.
    var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Encoding plain integers, booleans and strings cannot fail.
        return String(decoding: try! encoder.encode(self), as: UTF8.self)
    }

    /// The position of `member`: from the token, or its start when the token does not name it.
    func position(of member: String) -> MemberPosition {
        members[member] ?? MemberPosition(generation: nil, page: 1, offset: 0, ended: false)
    }

    /// Reads a token a page handed on; nil (page 1) starts every member at its beginning.
    init(_ text: String?, feed: String) throws(SourceError) {
        guard let text else {
            self = .start
            return
        }
        do {
            self = try JSONDecoder().decode(MergeToken.self, from: Data(text.utf8))
        } catch {
            throw SourceError.rejected("feed \(feed): \"\(text)\" is not a merge token")
        }
        guard members.values.allSatisfy({ $0.page >= 1 && $0.offset >= 0 }), turn >= 0 else {
            throw SourceError.rejected("feed \(feed): the merge token \"\(text)\" has a page below 1 or a negative offset")
        }
    }

    init(members: [String: MemberPosition], turn: Int) {
        self.members = members
        self.turn = turn
    }
}

/// Where a merged feed is in one member.
struct MemberPosition: Codable, Hashable {
    /// The member's generation the merged feed's generation reads; nil until a page of it is read.
    var generation: Int?
    /// The member's page holding the next item.
    var page: Int
    /// The next item's index in that page.
    var offset: Int
    /// Whether the member has ended for good: its items are all taken.
    var ended: Bool

    private enum CodingKeys: String, CodingKey {
        case generation = "g", page = "p", offset = "o", ended = "e"
    }

    init(generation: Int?, page: Int, offset: Int, ended: Bool) {
        self.generation = generation
        self.page = page
        self.offset = offset
        self.ended = ended
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        generation = try container.decodeIfPresent(Int.self, forKey: .generation)
        page = try container.decode(Int.self, forKey: .page)
        offset = try container.decode(Int.self, forKey: .offset)
        ended = try container.decodeIfPresent(Bool.self, forKey: .ended) ?? false
    }

    /// Writes `g` only once known and `e` only when true, to keep tokens short.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(generation, forKey: .generation)
        try container.encode(page, forKey: .page)
        try container.encode(offset, forKey: .offset)
        if ended { try container.encode(true, forKey: .ended) }
    }
}
