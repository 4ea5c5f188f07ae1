import FeedKit
import Testing

/// "Did you mean": close names are suggested, far ones are not (issue 28).
@Suite struct SpellingSuggestionTests {
    @Test func a_typo_finds_the_name_meant() {
        #expect(SpellingSuggestion.closest(to: "pagesize", among: ["path", "page_size", "follow"]) == "page_size")
        #expect(SpellingSuggestion.closest(to: "fiel", among: ["exec", "file", "http"]) == "file", "a swap is one edit")
        #expect(SpellingSuggestion.closest(to: "randomuzer", among: ["randomuser", "rss"]) == "randomuser")
        #expect(SpellingSuggestion.closest(to: "--jsn", among: ["--json", "--socket"]) == "--json")
        #expect(SpellingSuggestion.closest(to: "Prefetch", among: ["prefetch"]) == "prefetch", "case does not count")
        #expect(SpellingSuggestion.closest(to: "page-size", among: ["page_size"]) == "page_size", "- and _ are the same")
        #expect(SpellingSuggestion.closest(to: "warn", among: ["info", "warning"]) == "warning", "the beginning of a name")
    }

    @Test func a_name_far_from_every_candidate_finds_none() {
        #expect(SpellingSuggestion.closest(to: "colour", among: ["prefetch", "socket", "log_level"]) == nil)
        #expect(SpellingSuggestion.closest(to: "x", among: ["wrap", "poll"]) == nil)
        #expect(SpellingSuggestion.closest(to: "file", among: ["file"]) == nil, "a name that is right is no typo")
        #expect(SpellingSuggestion.closest(to: "abc", among: [String]()) == nil)
    }

    @Test func the_closest_wins_and_the_first_breaks_a_tie() {
        #expect(SpellingSuggestion.closest(to: "cache_page", among: ["cache_bytes", "cache_pages"]) == "cache_pages")
        #expect(SpellingSuggestion.closest(to: "bat", among: ["cat", "hat"]) == "cat")
    }

    @Test func did_you_mean_ends_a_message_or_adds_nothing() {
        #expect(SpellingSuggestion.didYouMean("stauts", among: ["status", "next"]) == "; did you mean \"status\"?")
        #expect(SpellingSuggestion.didYouMean("zzz", among: ["status"]) == "")
    }

    @Test func counted_nouns_agree_with_their_number() {
        #expect(counted(1, "client") == "1 client")
        #expect(counted(0, "client") == "0 clients")
        #expect(counted(2, "entry", plural: "entries") == "2 entries")
    }
}
