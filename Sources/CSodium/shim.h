// libsodium (Debian's libsodium-dev): the fleet key's MACs and NKeys' Ed25519, and the HTTP front's
// constant-time comparison of bearer tokens.
#include <sodium.h>
