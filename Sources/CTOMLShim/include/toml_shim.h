#ifndef FEEDD_TOML_SHIM_H
#define FEEDD_TOML_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The outcome of parsing one TOML document.
typedef struct {
    /// On success: a JSON object {"value": <the document as JSON>, "positions": [[line, column, key, key, ...], ...]}
    /// giving the line and column of every key. On failure: NULL.
    char *json;
    /// On failure: the parser's description of the problem; NULL on success.
    char *error;
    /// On failure: where the problem is (1-based), 0 when unknown.
    int error_line;
    int error_column;
} feedd_toml_result;

/// Parses `length` bytes of TOML text. Free the result with feedd_toml_free.
feedd_toml_result feedd_toml_parse(const char *text, size_t length);

void feedd_toml_free(feedd_toml_result result);

#ifdef __cplusplus
}
#endif

#endif
