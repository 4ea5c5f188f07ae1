// The fast walk: simdjson's DOM parser checks the text and writes its tape (a value per word, in
// the text's order), and the walk reads the tape beside stage 1's structural indexes (the
// offset of every bracket, comma, colon and value start, in the same order) to learn where each
// value lies, which the tape alone does not say. The DOM parser's second stage is several times
// as fast as On-Demand visiting every value.
//
// It reads the parser's `doc` and `implementation` members, which simdjson leaves public "for
// benchmarking access": the fuzz target checks that this walk and the On-Demand walk write the
// same index for every text both accept. The DOM parser refuses numbers beyond 64 bits and
// double range, and accepts repeated member names; a text it refuses goes to the On-Demand
// walk, and this walk looks for repeated names itself.
#include "json_walk.h"

#include <array>
#include <cstring>

using namespace simdjson;

namespace feedd {
namespace {

constexpr uint64_t payload_mask = (uint64_t(1) << 56) - 1;

// How many tape words a scalar of each type takes.
constexpr std::array<uint8_t, 256> scalar_words = [] {
    std::array<uint8_t, 256> table{};
    for (size_t type = 0; type < table.size(); type++) table[type] = type == 'l' || type == 'u' || type == 'd' ? 2 : 1;
    return table;
}();

// The tape index past the value whose first word is at `at` (past a container's closing word).
inline size_t after_value(const uint64_t *tape, size_t at) {
    uint8_t type = uint8_t(tape[at] >> 56);
    return type == '{' || type == '[' ? size_t(tape[at] & 0xFFFFFFFF) : at + scalar_words[type];
}

// The string whose tape word is `word`, from the string buffer (a 32-bit length, then the bytes).
inline std::string_view stored_string(const uint8_t *strings, uint64_t word) {
    const uint8_t *stored = strings + (word & payload_mask);
    uint32_t size;
    std::memcpy(&size, stored, sizeof size);
    return std::string_view(reinterpret_cast<const char *>(stored + sizeof size), size);
}

// The member names of one object, to find a name given twice: readers of the same bytes would
// resolve it differently. Nearly every name is new, and a bit of a 64-bit filter, picked by its
// length and end bytes, says so at a glance; only a name whose bit is already set is compared
// with the names before it, read back from the tape (they stay there, so none is copied). An
// object of many members, whose filter fills, keeps its names in a hash set instead.
class ObjectNames {
public:
    explicit ObjectNames(size_t open) : open(open) {}

    // Whether the name whose tape word is at `at` repeats one before it in the object.
    bool repeated(const uint64_t *tape, const uint8_t *strings, size_t at) {
        std::string_view name = stored_string(strings, tape[at]);
        if (many) return !many->insert(name).second;
        if (++count > filter_limit) {
            many = std::make_unique<std::unordered_set<std::string_view>>();
            for (size_t before = open + 1; before < at; before = after_value(tape, before + 1)) many->insert(stored_string(strings, tape[before]));
            return !many->insert(name).second;
        }
        uint64_t bit = uint64_t(1) << filter_bit(name);
        bool maybe = filter & bit;
        filter |= bit;
        if (!maybe) return false;
        for (size_t before = open + 1; before < at; before = after_value(tape, before + 1)) {
            if (stored_string(strings, tape[before]) == name) return true;
        }
        return false;
    }

private:
    // Past this many names the filter is mostly set, and a hash set is cheaper than the scans.
    static constexpr size_t filter_limit = 24;
    // The object's opening word on the tape.
    size_t open;
    size_t count = 0;
    uint64_t filter = 0;
    std::unique_ptr<std::unordered_set<std::string_view>> many;

    // Names of one object mostly differ in length or in their last byte.
    static unsigned filter_bit(std::string_view name) {
        return name.empty() ? 0 : unsigned(name.size() * 11 + uint8_t(name.back())) & 63;
    }
};

// A container being walked.
struct Open {
    size_t entry;
    size_t children = 0;
    bool object;
    // In an object: the next string is a member's name.
    bool expects_name;
    ObjectNames names;
};

class TapeWalk {
public:
    TapeWalk(dom::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index)
        : text(text), length(length), max_depth(max_depth), index(index), tape(parser.doc.tape.get()),
          strings(parser.doc.string_buf.get()), structurals(parser.implementation->structural_indexes.get()),
          structural_count(parser.implementation->n_structural_indexes), open(open_list()) {
        open.clear();
    }

    Outcome run() {
        Outcome outcome;
        // The first word's payload is the index past the closing root word.
        size_t root_end = size_t(tape[0] & payload_mask) - 1;
        for (size_t at = 1; at < root_end;) {
            uint8_t type = uint8_t(tape[at] >> 56);
            const uint8_t *start = value_start(type);
            if (!start) return failure(TAPE_ERROR, nullptr);
            switch (type) {
            case '{':
            case '[':
                if (open.size() >= max_depth) return failure(DEPTH_ERROR, start);
                open.push_back(Open{add(type == '{' ? FEEDD_JSON_OBJECT : FEEDD_JSON_ARRAY, start, start), 0, type == '{', type == '{', ObjectNames(at)});
                at += 1;
                break;
            case '}':
            case ']':
                if (index) index->close(open.back().entry, start, open.back().children);
                open.pop_back();
                completed();
                at += 1;
                break;
            case '"':
                if (!string(at, start)) return failure(TAPE_ERROR, start, "an object has two members of the same name");
                at += 1;
                break;
            case 'l':
            case 'u':
            case 'd':
                add(FEEDD_JSON_NUMBER | (type != 'd' ? FEEDD_JSON_INTEGER : 0), start, scalar_end());
                completed();
                at += 2;
                break;
            case 't':
            case 'f':
            case 'n':
                add(type == 't' ? FEEDD_JSON_TRUE : type == 'f' ? FEEDD_JSON_FALSE : FEEDD_JSON_NULL, start, start + (type == 'f' ? 5 : 4));
                completed();
                at += 1;
                break;
            default:
                return failure(TAPE_ERROR, start);
            }
        }
        return outcome;
    }

private:
    const uint8_t *text;
    size_t length;
    size_t max_depth;
    Index *index;
    const uint64_t *tape;
    const uint8_t *strings;
    const uint32_t *structurals;
    size_t structural_count;
    size_t structural = 0;
    // The containers the walk is in, innermost last: one list per thread, whose memory each walk
    // reuses (a one-line text costs little more than the DOM parser's own work).
    std::vector<Open> &open;

    static std::vector<Open> &open_list() {
        thread_local std::vector<Open> list;
        return list;
    }

    static Outcome failure(error_code error, const uint8_t *at, const char *refusal = nullptr) {
        Outcome outcome;
        outcome.error = error;
        outcome.at = at;
        outcome.refusal = refusal;
        return outcome;
    }

    size_t add(uint32_t shape, const uint8_t *start, const uint8_t *end) { return index ? index->add(shape, start, end) : 0; }

    // The first byte of the value the tape is at, of type `type`. The DOM parser has checked the
    // grammar, so which structurals before it are a comma or a colon follows from where the walk
    // is, without reading them: a comma before every element and member but a container's first,
    // a colon between a member's name and its value, neither before a closing bracket.
    const uint8_t *value_start(uint8_t type) {
        if (type != '}' && type != ']' && !open.empty()) {
            const Open &container = open.back();
            structural += container.object && !container.expects_name ? 1 : container.children > 0;
        }
        return structural < structural_count ? text + structurals[structural++] : nullptr;
    }

    // The end of the scalar just started: the next token's start, less the spaces before it.
    const uint8_t *scalar_end() const {
        const uint8_t *end = text + (structural < structural_count ? structurals[structural] : length);
        while (is_space(end[-1])) end--;
        return end;
    }

    // A value is complete: its container counts it, and in an object a name comes next.
    void completed() {
        if (open.empty()) return;
        open.back().children++;
        open.back().expects_name = open.back().object;
    }

    // Records the string at `start`, whose tape word is at `at`; false if it names an object's
    // member a second time.
    bool string(size_t at, const uint8_t *start) {
        const uint8_t *end = scalar_end();
        bool escaped = size_t(end - start) != stored_string(strings, tape[at]).size() + 2;
        add(FEEDD_JSON_STRING | (escaped ? FEEDD_JSON_ESCAPED : 0), start, end);
        if (open.empty() || !open.back().expects_name) {
            completed();
            return true;
        }
        open.back().expects_name = false;
        return !open.back().names.repeated(tape, strings, at);
    }
};

// A check of the tape alone, for a text that needs no index: whether it nests deeper than
// `max_depth`, or an object names a member twice. It steps from value to value in each
// container and descends into the containers among them (at most `max_depth` calls deep, as the
// On-Demand walk does), so it reads each word once.
class TapeCheck {
public:
    TapeCheck(const dom::parser &parser, size_t max_depth) : tape(parser.doc.tape.get()), strings(parser.doc.string_buf.get()), max_depth(max_depth) {}

    Outcome run() const {
        uint8_t type = uint8_t(tape[1] >> 56);
        return type == '{' || type == '[' ? container(1, 1) : Outcome{};
    }

private:
    const uint64_t *tape;
    const uint8_t *strings;
    size_t max_depth;

    // Checks the array or object whose opening word is at `open`, `depth` deep.
    Outcome container(size_t open, size_t depth) const {
        if (depth > max_depth) return Outcome{DEPTH_ERROR, nullptr, nullptr};
        bool object = uint8_t(tape[open] >> 56) == '{';
        size_t close = size_t(tape[open] & 0xFFFFFFFF) - 1;
        ObjectNames names(open);
        for (size_t at = open + 1; at < close;) {
            if (object) {
                if (names.repeated(tape, strings, at)) return Outcome{TAPE_ERROR, "an object has two members of the same name", nullptr};
                at++;
            }
            uint8_t type = uint8_t(tape[at] >> 56);
            if (type == '{' || type == '[') {
                Outcome inner = container(at, depth + 1);
                if (inner.error) return inner;
            }
            at = after_value(tape, at);
        }
        return Outcome{};
    }
};

}  // namespace

Outcome check_tape(const dom::parser &parser, size_t max_depth) { return TapeCheck(parser, max_depth).run(); }

Outcome walk_tape(dom::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index) {
    dom::element root;
    if (auto error = parser.parse(text, length, false).get(root)) return Outcome{error, nullptr, nullptr};
    if (!index) return check_tape(parser, max_depth);
    index->reserve(length / 8 + 4);
    return TapeWalk(parser, text, length, max_depth, index).run();
}

}  // namespace feedd
