// libsodium (Debian's libsodium-dev): the HTTP front compares bearer tokens in constant time.
#include <sodium.h>
