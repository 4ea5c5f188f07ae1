// The JSON index behind FeedKit's JSONDocument: a text is checked in full and each of its values
// noted where it lies, so that items keep the upstream's bytes. Two walks write the same index
// (json_walk.h): the tape walk reads the DOM parser's output, fast; the On-Demand walk accepts
// numbers the DOM parser refuses (beyond 64 bits or a double's range) and says where a refused
// text goes wrong. A text goes to the second when the first refuses it, or is large.
#include "json_walk.h"

#include <cstring>

using namespace simdjson;

static_assert(FEEDD_JSON_PADDING >= SIMDJSON_PADDING, "FEEDD_JSON_PADDING must cover simdjson's padding");

namespace {

// A thread keeps one parser of each kind for texts up to this size, so small bodies cost no
// allocation; a larger text gets a parser of its own, freed with it, so that no thread holds on
// to the buffers of the largest body it ever read (several times that body). A large text goes
// straight to the On-Demand walk, whose buffers are the smaller.
constexpr size_t kept_parser_capacity = 1 << 20;

template <typename Parser>
Parser &kept_parser() {
    thread_local Parser parser;
    return parser;
}

// Describes simdjson's error codes in feedd's words.
const char *describe(error_code error) {
    switch (error) {
    case UTF8_ERROR: return "it is not valid UTF-8";
    case DEPTH_ERROR: return "it nests arrays and objects too deeply";
    case STRING_ERROR: return "a string holds an invalid escape sequence";
    case UNESCAPED_CHARS: return "a string holds an unescaped control character";
    case UNCLOSED_STRING: return "a string is not closed";
    case NUMBER_ERROR: return "a number is not written as JSON numbers are";
    case T_ATOM_ERROR:
    case F_ATOM_ERROR:
    case N_ATOM_ERROR:
    case INCORRECT_TYPE: return "a value is not a string, number, object, array, true, false or null";
    case EMPTY: return "it holds no value";
    case TRAILING_CONTENT: return "more follows the first value";
    case TAPE_ERROR:
    case INCOMPLETE_ARRAY_OR_OBJECT: return "a comma, colon, bracket or brace is missing or out of place";
    case CAPACITY: return "it is too large";
    case MEMALLOC: return "there is not enough memory to read it";
    default: return error_message(error);
    }
}

// The On-Demand walk, with a parser fit for the text's size.
feedd::Outcome on_demand(const uint8_t *text, size_t length, size_t max_depth, feedd::Index *index) {
    if (length <= kept_parser_capacity) return feedd::walk_on_demand(kept_parser<ondemand::parser>(), text, length, max_depth, index);
    ondemand::parser own;
    return feedd::walk_on_demand(own, text, length, max_depth, index);
}

// Indexes (`index` null: checks) `text`: by the tape walk if it can, else by the On-Demand walk.
feedd::Outcome walk(const uint8_t *text, size_t length, size_t max_depth, std::unique_ptr<feedd::Index> &index) {
    if (length <= kept_parser_capacity) {
        feedd::Outcome outcome = feedd::walk_tape(kept_parser<dom::parser>(), text, length, max_depth, index.get());
        // A repeated name is the one refusal the tape walk knows the place of.
        if (!outcome.error || outcome.refusal) return outcome;
        if (index) index = std::make_unique<feedd::Index>(text);
    }
    return on_demand(text, length, max_depth, index.get());
}

// The C API's answer for `outcome`: the entries, or null with `failure` filled in.
feedd_json_entry *answer(feedd::Outcome outcome, feedd::Index &index, const uint8_t *text, size_t length, size_t *count, feedd_json_failure *failure) {
    if (!outcome.error) {
        *count = index.count;
        return index.release();
    }
    failure->message = outcome.refusal ? outcome.refusal : describe(outcome.error);
    failure->offset = outcome.at && outcome.at >= text && outcome.at <= text + length ? size_t(outcome.at - text) : 0;
    return nullptr;
}

}  // namespace

extern "C" feedd_json_entry *feedd_json_index(const uint8_t *bytes, size_t length, size_t max_depth, size_t *count, feedd_json_failure *failure) {
    try {
        auto index = std::make_unique<feedd::Index>(bytes);
        feedd::Outcome outcome = walk(bytes, length, max_depth, index);
        return answer(outcome, *index, bytes, length, count, failure);
    } catch (const std::bad_alloc &) {
        feedd::Index none(bytes);
        return answer(feedd::Outcome{MEMALLOC, nullptr, nullptr}, none, bytes, length, count, failure);
    }
}

extern "C" feedd_json_entry *feedd_json_index_on_demand(const uint8_t *bytes, size_t length, size_t max_depth, size_t *count, feedd_json_failure *failure) {
    try {
        feedd::Index index(bytes);
        return answer(on_demand(bytes, length, max_depth, &index), index, bytes, length, count, failure);
    } catch (const std::bad_alloc &) {
        feedd::Index none(bytes);
        return answer(feedd::Outcome{MEMALLOC, nullptr, nullptr}, none, bytes, length, count, failure);
    }
}

extern "C" void feedd_json_free(feedd_json_entry *entries) { std::free(entries); }

extern "C" int feedd_json_is_valid(const uint8_t *bytes, size_t length, size_t max_depth) {
    thread_local std::vector<uint8_t> padded;
    try {
        if (padded.size() < length + FEEDD_JSON_PADDING) padded.resize(length + FEEDD_JSON_PADDING);
        std::memcpy(padded.data(), bytes, length);
        std::memset(padded.data() + length, ' ', FEEDD_JSON_PADDING);
        std::unique_ptr<feedd::Index> none;
        return walk(padded.data(), length, max_depth, none).error ? 0 : 1;
    } catch (const std::bad_alloc &) {
        return 0;
    }
}

extern "C" int feedd_utf8_is_valid(const uint8_t *bytes, size_t length) {
    return simdjson::validate_utf8(reinterpret_cast<const char *>(bytes), length) ? 1 : 0;
}

extern "C" size_t feedd_json_unescape(const uint8_t *quoted, size_t length, uint8_t *out) {
    ondemand::document string;
    std::string_view value;
    if (kept_parser<ondemand::parser>().iterate(quoted, length, length + FEEDD_JSON_PADDING).get(string) || string.get_string().get(value)) {
        return 0;
    }
    std::memcpy(out, value.data(), value.size());
    return value.size();
}

extern "C" size_t feedd_json_minify(const uint8_t *bytes, size_t length, uint8_t *out) {
    size_t written = 0;
    if (simdjson::minify(reinterpret_cast<const char *>(bytes), length, reinterpret_cast<char *>(out), written)) return 0;
    return written;
}
