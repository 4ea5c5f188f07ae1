#ifndef FEEDD_SPAWN_H
#define FEEDD_SPAWN_H

#include <stdint.h>
#include <sys/types.h>

/// Creates a pipe whose both ends are close-on-exec (pipe2 with O_CLOEXEC). Returns 0 or an errno.
int feedd_pipe(int descriptors[2]);

/// Makes reads and writes on `descriptor` return EAGAIN instead of waiting. Returns 0 or an errno.
int feedd_set_nonblocking(int descriptor);

/// Names the calling thread as ps and /proc show it (15 bytes at most).
void feedd_name_thread(const char *name);

/// What a keeper writes on its control pipe: one message of 8 bytes at a time.
typedef struct {
    /// One of the FEEDD_KEEPER_… values.
    int32_t kind;
    /// The program's pid, an errno or a wait status, as `kind` says.
    int32_t value;
} feedd_keeper_message;

/// The program runs; `value` is its pid.
#define FEEDD_KEEPER_STARTED 0
/// The program could not be started; `value` is the errno of execve (or fork). The keeper exits.
#define FEEDD_KEEPER_FAILED 1
/// The program has exited; `value` is its wait status. The keeper stays, to be killed with its group.
#define FEEDD_KEEPER_EXITED 2

/// Starts `path` with `argv` and `envp` under a keeper: a process of its own group that forks and
/// waits for the program, so that the group outlives neither feedd nor the program's end.
///
/// The keeper is a fork of the calling thread, which must live until the keeper is reaped: the
/// keeper's parent-death signal (PR_SET_PDEATHSIG) belongs to that thread. When it fires (feedd
/// exited or was killed, even with SIGKILL), the keeper sends SIGTERM to its group and SIGKILL
/// `grace_ms` later, or as soon as the program has exited. The keeper holds no descriptor but
/// `control_write`; the program gets `in_fd`, `out_fd` and `err_fd` as its stdin, stdout and
/// stderr and no other descriptor, every signal unblocked and at its default disposition.
///
/// Returns 0 once the program runs, with the keeper's pid (which is the group's id) and the
/// program's pid; else an errno, the keeper reaped. `control_read` then carries the keeper's
/// later messages (FEEDD_KEEPER_EXITED), and its end of file says the keeper is gone.
/// `control_write` is closed here either way; the caller closes its other descriptors.
int feedd_spawn_kept(
    const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, int control_read,
    int control_write, int grace_ms, pid_t *keeper, pid_t *program);

#endif
