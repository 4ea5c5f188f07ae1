// Plugin processes: a keeper per program, forked with _Fork so that between the fork and execve
// only async-signal-safe calls are made, as a fork of a multithreaded process allows. posix_spawn
// cannot set a parent-death signal, nor leave a process behind that ends the group.
#define _GNU_SOURCE
#include "feedd_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int feedd_pipe(int descriptors[2]) {
    return pipe2(descriptors, O_CLOEXEC) == 0 ? 0 : errno;
}

int feedd_set_nonblocking(int descriptor) {
    int flags = fcntl(descriptor, F_GETFL);
    if (flags < 0 || fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) < 0) return errno;
    return 0;
}

void feedd_name_thread(const char *name) {
    prctl(PR_SET_NAME, name);
}

/// The parent-death signal. The keeper takes it only while its parent is gone, so a stray SIGHUP
/// (a program signalling its own group) changes nothing.
#define KEEPER_PARENT_DIED SIGHUP

static void send_message(int descriptor, int32_t kind, int32_t value) {
    feedd_keeper_message message = {kind, value};
    while (write(descriptor, &message, sizeof message) < 0 && errno == EINTR) {}
}

/// Closes every descriptor but the `count` in `keep` (sorted, ascending).
static void close_all_but(const int *keep, int count) {
    unsigned int from = 0;
    for (int index = 0; index <= count; index++) {
        unsigned int to = index < count ? (unsigned int)keep[index] : ~0U;
        if (to > from) {
            if (syscall(SYS_close_range, from, to - 1, 0) != 0) {
                // Before Linux 5.9: one by one, up to the descriptor limit.
                struct rlimit limit;
                unsigned int last = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (unsigned int)limit.rlim_cur : 65536;
                for (unsigned int descriptor = from; descriptor < to && descriptor < last; descriptor++) close((int)descriptor);
            }
        }
        if (index < count) from = (unsigned int)keep[index] + 1;
    }
}

static void sort(int *values, int count) {
    for (int i = 1; i < count; i++) {
        for (int j = i; j > 0 && values[j - 1] > values[j]; j--) {
            int swapped = values[j];
            values[j] = values[j - 1];
            values[j - 1] = swapped;
        }
    }
}

/// Moves `descriptor` above the standard ones, so that the program's dup2 onto 0, 1 and 2 never
/// overwrites a descriptor it still needs.
static int above_standard(int descriptor) {
    if (descriptor > 2) return descriptor;
    int moved = fcntl(descriptor, F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return descriptor;
    close(descriptor);
    return moved;
}

/// The program's side of the fork: its pipes as 0, 1 and 2, an empty signal mask, then execve.
/// Every other descriptor it has is close-on-exec.
static _Noreturn void become_program(const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, int failure) {
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
        int error = errno;
        while (write(failure, &error, sizeof error) < 0 && errno == EINTR) {}
        _exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(path, argv, envp);
    int error = errno;
    while (write(failure, &error, sizeof error) < 0 && errno == EINTR) {}
    _exit(127);
}

/// Milliseconds of CLOCK_MONOTONIC.
static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// The keeper's life after the program started: reports its exit, and ends the group when its
/// parent is gone. Every signal is blocked here and taken with sigtimedwait.
static _Noreturn void keep(pid_t parent, pid_t program, int control, int grace_ms) {
    sigset_t all;
    sigfillset(&all);
    int running = 1;
    long long deadline = -1;
    for (;;) {
        struct timespec wait = {0, 0}, *timeout = NULL;
        if (deadline >= 0) {
            long long left = deadline - now_ms();
            if (left <= 0) break;
            wait.tv_sec = left / 1000;
            wait.tv_nsec = (left % 1000) * 1000000;
            timeout = &wait;
        }
        siginfo_t info;
        int received = sigtimedwait(&all, &info, timeout);
        if (received < 0) {
            if (errno == EAGAIN) break;
            continue;
        }
        if (received == SIGCHLD) {
            int status;
            if (running && waitpid(program, &status, WNOHANG) == program) {
                running = 0;
                send_message(control, FEEDD_KEEPER_EXITED, status);
                if (deadline >= 0) break;
            }
        } else if (received == KEEPER_PARENT_DIED && getppid() != parent && deadline < 0) {
            kill(0, SIGTERM);
            deadline = now_ms() + grace_ms;
            if (!running) break;
        }
        // Anything else (SIGTERM sent to the whole group by feedd, say) reached the program too.
    }
    kill(0, SIGKILL);
    _exit(137);
}

/// The keeper's side of the first fork.
static _Noreturn void become_keeper(
    pid_t parent, const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, int control,
    int grace_ms) {
    struct sigaction defaults = {0};
    defaults.sa_handler = SIG_DFL;
    for (int signal_number = 1; signal_number < NSIG; signal_number++) sigaction(signal_number, &defaults, NULL);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, KEEPER_PARENT_DIED);
    // The parent may have gone before the line above: then nobody is left to wait for.
    if (getppid() != parent) _exit(127);
    prctl(PR_SET_NAME, "feedd-keeper");

    in_fd = above_standard(in_fd);
    out_fd = above_standard(out_fd);
    err_fd = above_standard(err_fd);
    control = above_standard(control);
    int keep_open[] = {in_fd, out_fd, err_fd, control};
    sort(keep_open, 4);
    close_all_but(keep_open, 4);

    // With 0, 1 and 2 closed above, this pipe would take them, and the program's dup2 its ends.
    int started[2];
    if (pipe2(started, O_CLOEXEC) != 0) {
        send_message(control, FEEDD_KEEPER_FAILED, errno);
        _exit(127);
    }
    started[0] = above_standard(started[0]);
    started[1] = above_standard(started[1]);
    pid_t program = _Fork();
    if (program == 0) become_program(path, argv, envp, in_fd, out_fd, err_fd, started[1]);
    if (program < 0) {
        send_message(control, FEEDD_KEEPER_FAILED, errno);
        _exit(127);
    }
    close(started[1]);
    close(in_fd);
    close(out_fd);
    close(err_fd);
    int error = 0;
    ssize_t count;
    do count = read(started[0], &error, sizeof error); while (count < 0 && errno == EINTR);
    close(started[0]);
    if (count == sizeof error) {
        waitpid(program, NULL, 0);
        send_message(control, FEEDD_KEEPER_FAILED, error);
        _exit(127);
    }
    send_message(control, FEEDD_KEEPER_STARTED, program);
    keep(parent, program, control, grace_ms);
}

int feedd_spawn_kept(
    const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, int control_read,
    int control_write, int grace_ms, pid_t *keeper, pid_t *program) {
    // No signal may run one of feedd's handlers in the child before it has reset them.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t parent = getpid();
    pid_t child = _Fork();
    if (child == 0) become_keeper(parent, path, argv, envp, in_fd, out_fd, err_fd, control_write, grace_ms);
    int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    // The keeper's end: with it closed here, the keeper's death reads as the end of the pipe.
    close(control_write);
    if (child < 0) return fork_error;

    feedd_keeper_message message;
    ssize_t count;
    do count = read(control_read, &message, sizeof message); while (count < 0 && errno == EINTR);
    if (count == sizeof message && message.kind == FEEDD_KEEPER_STARTED) {
        *keeper = child;
        *program = message.value;
        return 0;
    }
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    return count == sizeof message && message.kind == FEEDD_KEEPER_FAILED ? message.value : EIO;
}
