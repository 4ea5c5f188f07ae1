#ifndef FEEDD_JSON_INDEX_H
#define FEEDD_JSON_INDEX_H

// simdjson (Debian's libsimdjson-dev) behind a small C API: a JSON text is checked in full and
// indexed, so that Swift reads its values where they lie in the text instead of building a tree.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Readable bytes the parser needs after a text's end (simdjson's SIMDJSON_PADDING); their
/// contents do not matter.
#define FEEDD_JSON_PADDING 64

/// The kind of a value, in the low bits of `feedd_json_entry.shape`.
enum feedd_json_kind {
    FEEDD_JSON_NULL = 0,
    FEEDD_JSON_FALSE = 1,
    FEEDD_JSON_TRUE = 2,
    FEEDD_JSON_NUMBER = 3,
    FEEDD_JSON_STRING = 4,
    FEEDD_JSON_ARRAY = 5,
    FEEDD_JSON_OBJECT = 6,
};

/// `shape & FEEDD_JSON_KIND_MASK` is the kind.
#define FEEDD_JSON_KIND_MASK 0x7u
/// A string (or key) holding an escape sequence: its bytes are not its value.
#define FEEDD_JSON_ESCAPED 0x8u
/// A number written without a fraction or an exponent.
#define FEEDD_JSON_INTEGER 0x10u
/// `shape >> FEEDD_JSON_COUNT_SHIFT` is an array's element count, an object's member count.
#define FEEDD_JSON_COUNT_SHIFT 5

/// One value of an indexed text, in the order of the text. An array's elements follow it; an
/// object's members follow it as a key (a string entry) and then the value.
typedef struct {
    /// Offset of the value's first byte in the text (a string's opening quote).
    uint32_t start;
    /// Offset just past its last byte (a string's closing quote, a container's bracket).
    uint32_t end;
    /// Index of the first entry after this value and everything in it: its next sibling.
    uint32_t next;
    uint32_t shape;
} feedd_json_entry;

/// Why a text is not accepted.
typedef struct {
    /// A static description of what is wrong.
    const char *message;
    /// About where in the text it was found.
    size_t offset;
} feedd_json_failure;

/// Checks that `bytes[0..<length]` is exactly one JSON text (RFC 8259: valid UTF-8, at most
/// `max_depth` nested arrays and objects, no object with two members of the same name; numbers
/// of any size are accepted as written), and indexes its values. `bytes` must be followed by
/// FEEDD_JSON_PADDING readable bytes. Returns the entries (`*count` of them, the root first),
/// to be freed with feedd_json_free; NULL with `*failure` filled in when the text is refused.
feedd_json_entry *feedd_json_index(const uint8_t *bytes, size_t length, size_t max_depth, size_t *count, feedd_json_failure *failure);

/// The same index, always made the way feedd_json_index makes it for a text the DOM parser
/// refuses (On-Demand): for checking one way against the other (the json-document fuzz target).
feedd_json_entry *feedd_json_index_on_demand(const uint8_t *bytes, size_t length, size_t max_depth, size_t *count, feedd_json_failure *failure);

/// Frees what feedd_json_index or feedd_json_index_on_demand returned.
void feedd_json_free(feedd_json_entry *entries);

/// 1 when `bytes[0..<length]` is one JSON text as feedd_json_index accepts it, else 0; `bytes`
/// need no padding (a short text is copied to a padded buffer first).
int feedd_json_is_valid(const uint8_t *bytes, size_t length, size_t max_depth);

/// Checks `count` lines, writing to `valid[i]` what feedd_json_is_valid answers for line i, or 0
/// if it holds a line break: line 0 is `bytes[0..<ends[0]]`, line i + 1 starts one byte after
/// `ends[i]` (past the line break between them). They are checked together, in one pass of the
/// parser (whose cost for a short text is mostly per call), and one by one only when that pass
/// refuses any of them. `bytes` need no padding.
void feedd_json_lines_valid(const uint8_t *bytes, const size_t *ends, size_t count, size_t max_depth, uint8_t *valid);

/// 1 when `bytes[0..<length]` is valid UTF-8, else 0 (simdjson's validator, many bytes at a time).
int feedd_utf8_is_valid(const uint8_t *bytes, size_t length);

/// Writes the value of the string whose text is `quoted[0..<length]` (quotes included, as
/// indexed) to `out`, which has room for `length` bytes; `quoted` must
/// be followed by FEEDD_JSON_PADDING readable bytes. Returns the value's length.
size_t feedd_json_unescape(const uint8_t *quoted, size_t length, uint8_t *out);

/// Writes `bytes[0..<length]`, one JSON text, to `out` (room for `length` bytes) without its
/// whitespace outside strings. Returns the length written.
size_t feedd_json_minify(const uint8_t *bytes, size_t length, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif
