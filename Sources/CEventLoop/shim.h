// What FeedServer's EventLoop needs that Swift's Glibc module leaves out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

// libdispatch's hooks for serving the main queue from an event loop of one's own, the ones
// CoreFoundation's run loop uses (and GNUstep's): the descriptor that becomes readable when the
// main queue has work (an eventfd on Linux), and the call that runs that work on the main thread.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);
