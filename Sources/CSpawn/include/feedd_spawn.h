#ifndef FEEDD_SPAWN_H
#define FEEDD_SPAWN_H

#include <sys/types.h>

/// Creates a pipe whose both ends are close-on-exec (pipe2 with O_CLOEXEC). Returns 0 or an errno.
int feedd_pipe(int descriptors[2]);

/// Starts `path` with `argv` and `envp`, its stdin, stdout and stderr on the given descriptors,
/// no other descriptor inherited, every signal unblocked and at its default disposition, in a
/// process group of its own. Returns 0 and the pid, or an errno.
int feedd_spawn(const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, pid_t *pid);

#endif
