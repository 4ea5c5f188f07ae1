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

// A container being walked.
struct Open {
    size_t entry;
    size_t children = 0;
    bool object;
    // In an object: the next string is a member's name.
    bool expects_name;
    size_t names_mark;
    std::unique_ptr<std::unordered_set<std::string_view>> seen;
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
            const uint8_t *start = next_value_start();
            if (!start) return failure(TAPE_ERROR, nullptr);
            switch (type) {
            case '{':
            case '[':
                if (open.size() >= max_depth) return failure(DEPTH_ERROR, start);
                open.push_back(Open{add(type == '{' ? FEEDD_JSON_OBJECT : FEEDD_JSON_ARRAY, start, start), 0, type == '{', type == '{', names.mark(), nullptr});
                at += 1;
                break;
            case '}':
            case ']':
                if (open.back().object) names.leave(open.back().names_mark);
                if (index) index->close(open.back().entry, start, open.back().children);
                open.pop_back();
                completed();
                at += 1;
                break;
            case '"':
                if (!string(tape[at] & payload_mask, start)) return failure(TAPE_ERROR, start, "an object has two members of the same name");
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
    Names names;

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

    // The first byte of the value the tape is at: the next structural that is not a comma or a colon.
    const uint8_t *next_value_start() {
        while (structural < structural_count && (text[structurals[structural]] == ',' || text[structurals[structural]] == ':')) structural++;
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

    // Records the string at `start`, whose value is at `offset` in the string buffer (a 32-bit
    // length, then the bytes); false if it names an object's member a second time.
    bool string(uint64_t offset, const uint8_t *start) {
        uint32_t size;
        std::memcpy(&size, strings + offset, sizeof size);
        const uint8_t *end = scalar_end();
        bool escaped = size_t(end - start) != size_t(size) + 2;
        add(FEEDD_JSON_STRING | (escaped ? FEEDD_JSON_ESCAPED : 0), start, end);
        if (open.empty() || !open.back().expects_name) {
            completed();
            return true;
        }
        open.back().expects_name = false;
        std::string_view name(reinterpret_cast<const char *>(strings + offset + sizeof size), size);
        return !names.repeated(name, open.back().names_mark, open.back().seen);
    }
};

// What a tape word's type means to a check: how many words it takes, how it moves the depth.
struct Step {
    uint8_t words;
    int8_t depth;
};

constexpr std::array<Step, 256> steps = [] {
    std::array<Step, 256> table{};
    for (size_t type = 0; type < table.size(); type++) table[type] = Step{uint8_t(type == 'l' || type == 'u' || type == 'd' ? 2 : 1), 0};
    table['{'].depth = table['['].depth = 1;
    table['}'].depth = table[']'].depth = -1;
    return table;
}();

// A check of the tape alone, for a text that needs no index: whether it nests deeper than
// `max_depth`, or an object of two members or more names one twice (its names are found by
// stepping from member to member over the values between). Branch-free but for objects: a
// one-line text is mostly a handful of words of unpredictable types.
Outcome check_tape(const dom::parser &parser, size_t max_depth) {
    const uint64_t *tape = parser.doc.tape.get();
    const uint8_t *strings = parser.doc.string_buf.get();
    size_t end = size_t(tape[0] & payload_mask) - 1;
    auto name = [strings](uint64_t word) {
        uint32_t size;
        std::memcpy(&size, strings + (word & payload_mask), sizeof size);
        return std::string_view(reinterpret_cast<const char *>(strings + (word & payload_mask) + sizeof size), size);
    };
    long depth = 0;
    long deepest = 0;
    for (size_t at = 1; at < end;) {
        uint64_t word = tape[at];
        Step step = steps[word >> 56];
        depth += step.depth;
        deepest = depth > deepest ? depth : deepest;
        if ((word >> 56) == '{' && ((word >> 32) & 0xFFFFFF) >= 2) {
            Names names;
            std::unique_ptr<std::unordered_set<std::string_view>> seen;
            size_t close = size_t(word & 0xFFFFFFFF) - 1;
            for (size_t member = at + 1; member < close;) {
                if (names.repeated(name(tape[member]), 0, seen)) return Outcome{TAPE_ERROR, "an object has two members of the same name", nullptr};
                uint64_t value = tape[member + 1];
                bool container = (value >> 56) == '{' || (value >> 56) == '[';
                member = container ? size_t(value & 0xFFFFFFFF) : member + 1 + steps[value >> 56].words;
            }
        }
        at += step.words;
    }
    return size_t(deepest) > max_depth ? Outcome{DEPTH_ERROR, nullptr, nullptr} : Outcome{};
}

}  // namespace

Outcome walk_tape(dom::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index) {
    dom::element root;
    if (auto error = parser.parse(text, length, false).get(root)) return Outcome{error, nullptr, nullptr};
    if (!index) return check_tape(parser, max_depth);
    index->reserve(length / 8 + 4);
    return TapeWalk(parser, text, length, max_depth, index).run();
}

}  // namespace feedd
