// libmicrohttpd (Debian's libmicrohttpd-dev) for the HTTP front. MHD_start_daemon and
// MHD_get_daemon_info take C varargs, which Swift cannot pass: the two inline functions below
// pass what the front uses.
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

// What the front configures a daemon with; see FeedHTTP's MicroHTTPDaemon.
struct feedd_http_options {
    int listen_socket;
    unsigned int connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    // PEM text, NUL-terminated; both NULL for plain HTTP.
    const char *tls_key;
    const char *tls_certificate;
    MHD_RequestCompletedCallback request_completed;
    MHD_NotifyConnectionCallback connection_notified;
    MHD_LogCallback log;
    // Asked after each accept whether to keep the connection (feedd's descriptor reserve).
    MHD_AcceptPolicyCallback accept_policy;
    void *context;
};

static inline struct MHD_Daemon *feedd_http_start(
    unsigned int flags, MHD_AccessHandlerCallback handler, const struct feedd_http_options *o)
{
    struct MHD_OptionItem items[] = {
        { MHD_OPTION_LISTEN_SOCKET, o->listen_socket, NULL },
        { MHD_OPTION_CONNECTION_LIMIT, o->connection_limit, NULL },
        { MHD_OPTION_CONNECTION_TIMEOUT, o->connection_timeout_seconds, NULL },
        { MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)o->connection_memory_limit, NULL },
        { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)o->request_completed, o->context },
        { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)o->connection_notified, o->context },
        { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)o->log, o->context },
        // The daemon ignores SIGPIPE itself (signal(SIGPIPE, SIG_IGN) at start).
        { MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL },
        { o->tls_key ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)o->tls_key },
        { o->tls_certificate ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)o->tls_certificate },
        { MHD_OPTION_END, 0, NULL },
    };
    return MHD_start_daemon(flags, 0, o->accept_policy, o->context, handler, o->context, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
}

// The epoll descriptor of a daemon started with MHD_USE_EPOLL, for the daemon's own event loop.
static inline int feedd_http_epoll_descriptor(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

// The socket of a connection, to size its send buffer.
static inline int feedd_http_connection_descriptor(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}
