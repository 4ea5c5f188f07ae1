#ifndef FEEDD_PAGE_LINE_H
#define FEEDD_PAGE_LINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What is wrong with a page line, or nothing.
typedef enum {
    feedd_page_line_ok = 0,
    /// Not one JSON text (RFC 8259, valid UTF-8), or not an object.
    feedd_page_line_not_an_object,
    /// Its members are not exactly `type`, `feed`, `generation`, `page`, `items`, `last`, once each.
    feedd_page_line_members,
    /// `type` is not "page", or `feed`, `generation`, `page` are not the ones expected.
    feedd_page_line_address,
    /// `items` is not an array or `last` not a boolean.
    feedd_page_line_types,
    /// An item is not an object of `id` (a string), `data` and maybe `feed` (a string), once each.
    feedd_page_line_item,
} feedd_page_line_problem;

/// Checks that `bytes[0..<length]` (a line without its newline) is the page line of page `page` of
/// generation `generation` of feed `feed`, as feedd writes it; on success `*item_count` is how many
/// items it holds, and on an item problem `*item_count` is that item's index. Parsed by simdjson.
feedd_page_line_problem feedd_page_line_check(
    const unsigned char *bytes, size_t length, const char *feed, size_t feed_length, int64_t generation, int64_t page,
    size_t *item_count);

#ifdef __cplusplus
}
#endif

#endif
