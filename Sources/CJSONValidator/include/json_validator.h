#ifndef FEEDD_JSON_VALIDATOR_H
#define FEEDD_JSON_VALIDATOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// 1 when `bytes[0..<length]` is exactly one JSON text (RFC 8259, valid UTF-8), else 0.
/// Checked by simdjson (Debian's libsimdjson-dev), at gigabytes a second.
int feedd_json_is_valid(const unsigned char *bytes, size_t length);

#ifdef __cplusplus
}
#endif

#endif
