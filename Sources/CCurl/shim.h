// libcurl's option and info calls are C variadics, which Swift cannot call: one typed
// wrapper for each kind of argument feedd passes.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

typedef size_t (*feedd_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode feedd_curl_set_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode feedd_curl_set_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode feedd_curl_set_callback(CURL *easy, CURLoption option, feedd_curl_data_callback callback) {
    return curl_easy_setopt(easy, option, callback);
}

static inline long feedd_curl_response_code(CURL *easy) {
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

static inline CURLcode feedd_curl_message_result(const CURLMsg *message) {
    return message->data.result;
}

static inline const char *feedd_curl_effective_url(CURL *easy) {
    char *url = NULL;
    curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url);
    return url;
}

// A macro with a cast, which Swift does not import.
static const long feedd_curlauth_bearer = (long)CURLAUTH_BEARER;
