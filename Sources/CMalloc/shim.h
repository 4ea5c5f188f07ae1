// glibc's malloc tuning (mallopt), which Swift's Glibc module leaves out; for the daemon's start.
#include <malloc.h>
