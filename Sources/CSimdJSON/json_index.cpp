// The JSON index behind FeedKit's JSONDocument: simdjson's On-Demand parser walks every value of
// a text once, checking it in full, and notes where each value lies. On-Demand, not DOM: only
// On-Demand says where a value is in the text, which is what lets items keep the upstream's
// bytes, and it leaves numbers unparsed until asked, so a number beyond 64 bits (which the DOM
// parser refuses) can be checked and kept as written.
#include "json_index.h"

#include <simdjson.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_set>
#include <vector>

using namespace simdjson;

static_assert(FEEDD_JSON_PADDING >= SIMDJSON_PADDING, "FEEDD_JSON_PADDING must cover simdjson's padding");

namespace {

// A thread keeps one parser for texts up to this size, so small bodies cost no allocation; a
// larger text gets a parser of its own, freed with it, so that no thread holds on to the
// buffers of the largest body it ever read (about five times that body).
constexpr size_t kept_parser_capacity = 1 << 20;

// Objects with more members than this check for a repeated name with a hash set; smaller ones
// compare each new name with those before, which is faster for the few names most objects have.
constexpr size_t linear_name_check_limit = 16;

bool is_space(uint8_t byte) { return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r'; }

bool is_digit(uint8_t byte) { return byte >= '0' && byte <= '9'; }

// RFC 8259's number grammar, for the numbers simdjson refuses to convert: those out of the range
// of a double or beyond 64 bits are kept as written, anything else it refuses is not a number.
bool is_json_number(const uint8_t *text, size_t length) {
    size_t at = 0;
    if (at < length && text[at] == '-') at++;
    if (at < length && text[at] == '0') {
        at++;
    } else if (at < length && is_digit(text[at])) {
        while (at < length && is_digit(text[at])) at++;
    } else {
        return false;
    }
    if (at < length && text[at] == '.') {
        at++;
        if (at == length || !is_digit(text[at])) return false;
        while (at < length && is_digit(text[at])) at++;
    }
    if (at < length && (text[at] == 'e' || text[at] == 'E')) {
        at++;
        if (at < length && (text[at] == '+' || text[at] == '-')) at++;
        if (at == length || !is_digit(text[at])) return false;
        while (at < length && is_digit(text[at])) at++;
    }
    return at == length;
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

// One walk over a text. With `recording` false it only checks (for RawJSON's one-line texts).
template <bool recording>
class Walk {
public:
    Walk(const uint8_t *text, size_t length, size_t max_depth) : text(text), length(length), max_depth(max_depth) { names.clear(); }

    ~Walk() { std::free(entries); }

    feedd_json_entry *entries = nullptr;
    size_t count = 0;
    // Set where the walk, not simdjson, refuses the text.
    const char *refusal = nullptr;
    const uint8_t *refused_at = nullptr;

    error_code document(ondemand::document &root) {
        if (recording) reserve(length / 8 + 4);
        std::string_view token;
        if (auto error = root.raw_json_token().get(token)) return error;
        ondemand::json_type type;
        if (auto error = root.type().get(type)) return error;
        const uint8_t *end = trimmed(token);
        error_code error;
        switch (type) {
        case ondemand::json_type::array: error = array(root, position(token), 1, end); break;
        case ondemand::json_type::object: error = object(root, position(token), 1, end); break;
        default: error = scalar(root, type, token); break;
        }
        if (error) return error;
        // simdjson checks that nothing follows a scalar at the root, but not one it cannot
        // convert (a number beyond a double) nor, in all cases, a container: the walk checks.
        const uint8_t *after = skip_space(end);
        if (after == text + length) return SUCCESS;
        refused_at = after;
        return TRAILING_CONTENT;
    }

    feedd_json_entry *release() {
        feedd_json_entry *result = entries;
        entries = nullptr;
        return result;
    }

private:
    const uint8_t *text;
    size_t length;
    size_t max_depth;
    size_t capacity = 0;
    // The names of the members of the objects being walked, innermost last; one list per thread,
    // whose memory each walk reuses.
    struct Name {
        std::string_view text;
        uint64_t print;
    };
    static thread_local std::vector<Name> names;

    static const uint8_t *position(std::string_view token) { return reinterpret_cast<const uint8_t *>(token.data()); }

    // The end of a scalar's token, which runs on to the next token.
    static const uint8_t *trimmed(std::string_view token) {
        const uint8_t *end = position(token) + token.size();
        while (is_space(end[-1])) end--;
        return end;
    }

    void reserve(size_t wanted) {
        if (wanted <= capacity) return;
        size_t grown = capacity * 2 > wanted ? capacity * 2 : wanted;
        void *moved = std::realloc(entries, grown * sizeof(feedd_json_entry));
        if (!moved) throw std::bad_alloc();
        entries = static_cast<feedd_json_entry *>(moved);
        capacity = grown;
    }

    size_t add(uint32_t shape, const uint8_t *start, const uint8_t *end) {
        if (!recording) return 0;
        if (count == capacity) reserve(count + 1);
        entries[count] = feedd_json_entry{uint32_t(start - text), uint32_t(end - text), uint32_t(count + 1), shape};
        return count++;
    }

    // On-Demand checks the structure only as far as it needs to find what it is asked for (it
    // took `[{},"name":{}]` for an array of two), so the walk checks the bytes between values:
    // each value starts where the one before it (or the bracket) and one comma leave off, and
    // its container ends with the bracket that opened it.
    const uint8_t *skip_space(const uint8_t *at) const {
        while (at < text + length && is_space(*at)) at++;
        return at;
    }

    // After a container's value, which ended at `end`: past the comma that follows it, or at the
    // closing bracket; null for anything else.
    const uint8_t *after_value(const uint8_t *end, uint8_t closing) const {
        end = skip_space(end);
        if (*end == ',') return end + 1;
        return *end == closing ? end : nullptr;
    }

    error_code misplaced() {
        refusal = "a comma, colon, bracket or brace is missing or out of place";
        return TAPE_ERROR;
    }

    error_code value(ondemand::value &value, size_t depth, const uint8_t *&end) {
        std::string_view token = value.raw_json_token();
        ondemand::json_type type;
        if (auto error = value.type().get(type)) return error;
        switch (type) {
        case ondemand::json_type::array: return array(value, position(token), depth + 1, end);
        case ondemand::json_type::object: return object(value, position(token), depth + 1, end);
        default:
            end = trimmed(token);
            return scalar(value, type, token);
        }
    }

    // Walks the array starting at `start`; `end` is set past its closing bracket.
    template <typename Value>
    error_code array(Value &value, const uint8_t *start, size_t depth, const uint8_t *&end) {
        if (depth > max_depth) return DEPTH_ERROR;
        size_t entry = add(FEEDD_JSON_ARRAY, start, start);
        ondemand::array array;
        if (auto error = value.get_array().get(array)) return error;
        const uint8_t *next = start + 1;
        size_t children = 0;
        for (auto element : array) {
            ondemand::value child;
            if (auto error = element.get(child)) return error;
            if (skip_space(next) != position(child.raw_json_token())) return misplaced();
            const uint8_t *child_end;
            if (auto error = this->value(child, depth, child_end)) return error;
            if (!(next = after_value(child_end, ']'))) return misplaced();
            children++;
        }
        return finish(entry, start, next, ']', children, end);
    }

    // Walks the object starting at `start`; `end` is set past its closing brace.
    template <typename Value>
    error_code object(Value &value, const uint8_t *start, size_t depth, const uint8_t *&end) {
        if (depth > max_depth) return DEPTH_ERROR;
        size_t entry = add(FEEDD_JSON_OBJECT, start, start);
        ondemand::object object;
        if (auto error = value.get_object().get(object)) return error;
        size_t first_name = names.size();
        std::unique_ptr<std::unordered_set<std::string_view>> seen;
        const uint8_t *next = start + 1;
        size_t members = 0;
        for (auto member : object) {
            ondemand::field field;
            if (auto error = std::move(member).get(field)) return error;
            ondemand::value child = field.value();
            const uint8_t *quote = reinterpret_cast<const uint8_t *>(field.key().raw()) - 1;
            const uint8_t *closing = closing_quote(quote, position(child.raw_json_token()));
            if (skip_space(next) != quote || !closing) return misplaced();
            std::string_view name(reinterpret_cast<const char *>(quote + 1), size_t(closing - quote - 1));
            // Only a name with an escape sequence is unescaped (which checks the sequence).
            bool escaped = std::memchr(name.data(), '\\', name.size()) != nullptr;
            if (escaped) {
                if (auto error = field.unescaped_key().get(name)) return error;
            }
            if (repeated(name, first_name, seen)) {
                refusal = "an object has two members of the same name";
                refused_at = quote;
                return TAPE_ERROR;
            }
            add(FEEDD_JSON_STRING | (escaped ? FEEDD_JSON_ESCAPED : 0), quote, closing + 1);
            const uint8_t *child_end;
            if (auto error = this->value(child, depth, child_end)) return error;
            if (!(next = after_value(child_end, '}'))) return misplaced();
            members++;
        }
        names.resize(first_name);
        return finish(entry, start, next, '}', members, end);
    }

    // Ends a container whose last value (or opening bracket) left off at `next`: the closing
    // bracket must be there, not after a comma. Sets `end` past it.
    error_code finish(size_t entry, const uint8_t *start, const uint8_t *next, uint8_t closing, size_t children, const uint8_t *&end) {
        const uint8_t *bracket = skip_space(next);
        bool after_comma = children > 0 && next[-1] == ',';
        if (*bracket != closing || after_comma) return misplaced();
        if (recording) {
            entries[entry].end = uint32_t(bracket + 1 - text);
            entries[entry].next = uint32_t(count);
            entries[entry].shape |= uint32_t(children) << FEEDD_JSON_COUNT_SHIFT;
        }
        (void)start;
        end = bracket + 1;
        return SUCCESS;
    }

    // A member name's closing quote: back from the member's value, past spaces, the colon and
    // spaces again; null unless the colon and the quote are there (and the quote is not the
    // opening one).
    static const uint8_t *closing_quote(const uint8_t *quote, const uint8_t *value_start) {
        const uint8_t *at = value_start - 1;
        while (at > quote && is_space(*at)) at--;
        if (at <= quote || *at != ':') return nullptr;
        at--;
        while (at > quote && is_space(*at)) at--;
        return at > quote && *at == '"' ? at : nullptr;
    }

    // Whether `name` is among the names of the object being walked, which start at `first_name`,
    // noting it there if not. Each name carries a fingerprint (its length, first and last byte),
    // so that most comparisons are of one integer.
    bool repeated(std::string_view name, size_t first_name, std::unique_ptr<std::unordered_set<std::string_view>> &seen) {
        if (seen) return !seen->insert(name).second;
        uint64_t print = fingerprint(name);
        for (size_t at = first_name; at < names.size(); at++) {
            if (names[at].print == print && names[at].text == name) return true;
        }
        names.push_back(Name{name, print});
        if (names.size() - first_name > linear_name_check_limit) {
            seen = std::make_unique<std::unordered_set<std::string_view>>();
            for (size_t at = first_name; at < names.size(); at++) seen->insert(names[at].text);
        }
        return false;
    }

    static uint64_t fingerprint(std::string_view name) {
        if (name.empty()) return 0;
        return uint64_t(name.size()) << 16 | uint64_t(uint8_t(name.front())) << 8 | uint8_t(name.back());
    }

    template <typename Value>
    error_code scalar(Value &value, ondemand::json_type type, std::string_view token) {
        const uint8_t *start = position(token);
        const uint8_t *end = trimmed(token);
        switch (type) {
        case ondemand::json_type::string: {
            // simdjson's first stage has checked the UTF-8 and the control characters of the
            // whole text; what is left to check is escape sequences, by unescaping them.
            bool escaped = std::memchr(start, '\\', size_t(end - start)) != nullptr;
            std::string_view string;
            if (escaped) {
                if (auto error = value.get_string().get(string)) return error;
            }
            add(FEEDD_JSON_STRING | (escaped ? FEEDD_JSON_ESCAPED : 0), start, end);
            return SUCCESS;
        }

        case ondemand::json_type::number: {
            ondemand::number number;
            auto error = value.get_number().get(number);
            if (error == NUMBER_ERROR && is_json_number(start, size_t(end - start))) error = SUCCESS;
            if (error) return error;
            size_t size = size_t(end - start);
            bool integer = !std::memchr(start, '.', size) && !std::memchr(start, 'e', size) && !std::memchr(start, 'E', size);
            add(FEEDD_JSON_NUMBER | (integer ? FEEDD_JSON_INTEGER : 0), start, end);
            return SUCCESS;
        }
        case ondemand::json_type::boolean: {
            bool flag;
            if (auto error = value.get_bool().get(flag)) return error;
            add(flag ? FEEDD_JSON_TRUE : FEEDD_JSON_FALSE, start, end);
            return SUCCESS;
        }
        case ondemand::json_type::null: {
            bool null;
            if (auto error = value.is_null().get(null)) return error;
            if (!null) return N_ATOM_ERROR;
            add(FEEDD_JSON_NULL, start, end);
            return SUCCESS;
        }
        default:
            return INCORRECT_TYPE;
        }
    }
};

template <bool recording>
thread_local std::vector<typename Walk<recording>::Name> Walk<recording>::names;

ondemand::parser &kept_parser() {
    thread_local ondemand::parser parser;
    return parser;
}

// Runs `walk` over `bytes`, filling `failure` when the text is refused.
template <bool recording>
bool run(Walk<recording> &walk, const uint8_t *bytes, size_t length, feedd_json_failure *failure) {
    std::unique_ptr<ondemand::parser> own;
    ondemand::parser *parser = &kept_parser();
    if (length > kept_parser_capacity) {
        own = std::make_unique<ondemand::parser>();
        parser = own.get();
    }
    error_code error;
    ondemand::document root;
    bool iterated = false;
    try {
        error = parser->iterate(bytes, length, length + FEEDD_JSON_PADDING).get(root);
        iterated = !error;
        if (iterated) error = walk.document(root);
    } catch (const std::bad_alloc &) {
        error = MEMALLOC;
    }
    if (!error) return true;
    if (failure) {
        const uint8_t *at = walk.refused_at;
        const char *location;
        if (!at && iterated && root.current_location().get(location) == SUCCESS) at = reinterpret_cast<const uint8_t *>(location);
        failure->message = walk.refusal ? walk.refusal : describe(error);
        failure->offset = at && at >= bytes && at <= bytes + length ? size_t(at - bytes) : 0;
    }
    return false;
}

}  // namespace

extern "C" feedd_json_entry *feedd_json_index(const uint8_t *bytes, size_t length, size_t max_depth, size_t *count, feedd_json_failure *failure) {
    Walk<true> walk(bytes, length, max_depth);
    if (!run(walk, bytes, length, failure)) return nullptr;
    *count = walk.count;
    return walk.release();
}

extern "C" void feedd_json_free(feedd_json_entry *entries) { std::free(entries); }

extern "C" int feedd_json_is_valid(const uint8_t *bytes, size_t length, size_t max_depth) {
    thread_local std::vector<uint8_t> padded;
    if (padded.size() < length + FEEDD_JSON_PADDING) padded.resize(length + FEEDD_JSON_PADDING);
    std::memcpy(padded.data(), bytes, length);
    std::memset(padded.data() + length, ' ', FEEDD_JSON_PADDING);
    Walk<false> walk(padded.data(), length, max_depth);
    return run(walk, padded.data(), length, nullptr) ? 1 : 0;
}

extern "C" size_t feedd_json_unescape(const uint8_t *quoted, size_t length, uint8_t *out) {
    ondemand::document string;
    std::string_view value;
    if (kept_parser().iterate(quoted, length, length + FEEDD_JSON_PADDING).get(string) || string.get_string().get(value)) return 0;
    std::memcpy(out, value.data(), value.size());
    return value.size();
}

extern "C" size_t feedd_json_minify(const uint8_t *bytes, size_t length, uint8_t *out) {
    size_t written = 0;
    if (simdjson::minify(reinterpret_cast<const char *>(bytes), length, reinterpret_cast<char *>(out), written)) return 0;
    return written;
}
