// The complete walk: simdjson's On-Demand parser visits every value and the walk checks what
// On-Demand leaves unchecked. It is the one that accepts numbers beyond a double or 64 bits
// (On-Demand leaves a number's text alone until asked to convert it, so the walk can check its
// grammar and keep it as written), and the one that says where a refused text goes wrong.
#include "json_walk.h"

#include <cstring>

using namespace simdjson;

namespace feedd {
namespace {

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

class Walk {
public:
    Walk(const uint8_t *text, size_t length, size_t max_depth, Index *index) : text(text), length(length), max_depth(max_depth), index(index) {}

    Outcome outcome;

    error_code document(ondemand::document &root) {
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
        outcome.at = after;
        return TRAILING_CONTENT;
    }

private:
    const uint8_t *text;
    size_t length;
    size_t max_depth;
    Index *index;
    Names names;

    static const uint8_t *position(std::string_view token) { return reinterpret_cast<const uint8_t *>(token.data()); }

    // The end of a scalar's token, which runs on to the next token.
    static const uint8_t *trimmed(std::string_view token) {
        const uint8_t *end = position(token) + token.size();
        while (is_space(end[-1])) end--;
        return end;
    }

    size_t add(uint32_t shape, const uint8_t *start, const uint8_t *end) { return index ? index->add(shape, start, end) : 0; }

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
        outcome.refusal = "a comma, colon, bracket or brace is missing or out of place";
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
        return finish(entry, next, ']', children, end);
    }

    // Walks the object starting at `start`; `end` is set past its closing brace.
    template <typename Value>
    error_code object(Value &value, const uint8_t *start, size_t depth, const uint8_t *&end) {
        if (depth > max_depth) return DEPTH_ERROR;
        size_t entry = add(FEEDD_JSON_OBJECT, start, start);
        ondemand::object object;
        if (auto error = value.get_object().get(object)) return error;
        size_t mark = names.mark();
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
            if (names.repeated(name, mark, seen)) {
                outcome.refusal = "an object has two members of the same name";
                outcome.at = quote;
                return TAPE_ERROR;
            }
            add(FEEDD_JSON_STRING | (escaped ? FEEDD_JSON_ESCAPED : 0), quote, closing + 1);
            const uint8_t *child_end;
            if (auto error = this->value(child, depth, child_end)) return error;
            if (!(next = after_value(child_end, '}'))) return misplaced();
            members++;
        }
        names.leave(mark);
        return finish(entry, next, '}', members, end);
    }

    // Ends a container whose last value (or opening bracket) left off at `next`: the closing
    // bracket must be there, not after a comma. Sets `end` past it.
    error_code finish(size_t entry, const uint8_t *next, uint8_t closing, size_t children, const uint8_t *&end) {
        const uint8_t *bracket = skip_space(next);
        bool after_comma = children > 0 && next[-1] == ',';
        if (*bracket != closing || after_comma) return misplaced();
        if (index) index->close(entry, bracket, children);
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
        // An atom's token is compared with the atom itself: simdjson 3.0.1's checks at the root
        // take `falsee` for false and refuse `false` followed by carriage returns (both found by
        // fuzzing against the DOM parser).
        case ondemand::json_type::boolean:
        case ondemand::json_type::null: {
            std::string_view atom(reinterpret_cast<const char *>(start), size_t(end - start));
            if (atom == "true") add(FEEDD_JSON_TRUE, start, end);
            else if (atom == "false") add(FEEDD_JSON_FALSE, start, end);
            else if (atom == "null") add(FEEDD_JSON_NULL, start, end);
            else return type == ondemand::json_type::null ? N_ATOM_ERROR : *start == 't' ? T_ATOM_ERROR : F_ATOM_ERROR;
            return SUCCESS;
        }
        default:
            return INCORRECT_TYPE;
        }
    }
};

}  // namespace

Outcome walk_on_demand(ondemand::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index) {
    Walk walk(text, length, max_depth, index);
    ondemand::document root;
    walk.outcome.error = parser.iterate(text, length, length + FEEDD_JSON_PADDING).get(root);
    if (walk.outcome.error) return walk.outcome;
    if (index) index->reserve(length / 8 + 4);
    walk.outcome.error = walk.document(root);
    const char *location;
    if (walk.outcome.error && !walk.outcome.at && root.current_location().get(location) == SUCCESS) {
        walk.outcome.at = reinterpret_cast<const uint8_t *>(location);
    }
    return walk.outcome;
}

}  // namespace feedd
