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

namespace {

// Whether a line holds a line break: never valid, and never part of the joined text below.
bool has_break(const uint8_t *line, size_t length) {
    return std::memchr(line, '\n', length) != nullptr || std::memchr(line, '\r', length) != nullptr;
}

// Checks the lines in one pass of the DOM parser over all of them, joined by newlines: true with
// `valid` written when the parser read exactly one document starting where each line's text starts
// and no more, false when it needs the lines checked one by one. A document that starts where a
// line's text does and ends before the next line's text (everything between is whitespace: a line's
// own trailing spaces, the newline, the next one's leading ones) is that line alone; a string cannot
// run on into the next line, since an unescaped newline in one is an error of the whole pass. So a
// refusal anywhere (a line that is not JSON, a number the DOM parser refuses) costs the page the
// slow way, and an accepted pass gives each line the verdict walk() would.
bool lines_valid_at_once(const uint8_t *bytes, const size_t *ends, size_t count, size_t max_depth, uint8_t *valid) {
    // Only a page the kept parser takes, so a thread holds on to no more than that for the joined
    // copy; a larger page is checked line by line, as before.
    if (count == 0 || ends[count - 1] + 1 > kept_parser_capacity) return false;
    thread_local std::vector<uint8_t> joined;
    joined.clear();
    // For each document expected: where its text starts in `joined`, and its line. Kept by the
    // thread for a page of up to 4,096 lines (64 KiB), as `joined` is: an allocation a page less.
    thread_local std::vector<std::pair<size_t, size_t>> kept;
    std::vector<std::pair<size_t, size_t>> large;
    std::vector<std::pair<size_t, size_t>> &expected = count <= 4096 ? kept : large;
    expected.clear();
    expected.reserve(count);
    for (size_t line = 0, start = 0; line < count; start = ends[line++] + 1) {
        valid[line] = 0;
        if (has_break(bytes + start, ends[line] - start)) continue;
        size_t text = start;
        while (text < ends[line] && feedd::is_space(bytes[text])) text++;
        // A line of only whitespace is no JSON text; the one-by-one check says so.
        if (text == ends[line]) return false;
        expected.emplace_back(joined.size() + (text - start), line);
        joined.insert(joined.end(), bytes + start, bytes + ends[line]);
        joined.push_back('\n');
    }
    if (expected.empty()) return true;
    size_t length = joined.size();
    joined.resize(length + FEEDD_JSON_PADDING, ' ');
    dom::parser &parser = kept_parser<dom::parser>();
    dom::document_stream stream;
    if (parser.parse_many(joined.data(), length, length).get(stream)) return false;
    size_t document = 0;
    for (auto it = stream.begin(); it != stream.end(); ++it, document++) {
        dom::element root;
        if ((*it).get(root) || document == expected.size() || it.current_index() != expected[document].first) return false;
        // What simdjson accepts and feedd's own check refuses (depth, a repeated name) stays 0.
        valid[expected[document].second] = feedd::check_tape(parser, max_depth).error ? 0 : 1;
    }
    // In a stream, simdjson leaves out a last document that is not closed, as cut off by the end
    // of the batch: it counts as a refusal here.
    return document == expected.size() && stream.truncated_bytes() == 0;
}

}  // namespace

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

extern "C" void feedd_json_lines_valid(const uint8_t *bytes, const size_t *ends, size_t count, size_t max_depth, uint8_t *valid) {
    try {
        if (lines_valid_at_once(bytes, ends, count, max_depth, valid)) return;
    } catch (const std::bad_alloc &) {
    }
    for (size_t line = 0, start = 0; line < count; start = ends[line++] + 1) {
        valid[line] = !has_break(bytes + start, ends[line] - start) && feedd_json_is_valid(bytes + start, ends[line] - start, max_depth);
    }
}
