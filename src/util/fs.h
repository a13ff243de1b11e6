/* fs.h -- the few file-system helpers shared by the caches and the CLI.
 *
 * evtc keeps compiled kernels (CPU shared objects, CUDA CUBINs) and fusion
 * plans under one per-user cache directory; these helpers name it and create
 * directories the way `mkdir -p` does.  They report failure through errno so
 * that each caller words its own message (a diag, a note, a CLI error).
 */
#ifndef EVTC_UTIL_FS_H
#define EVTC_UTIL_FS_H

#include <stdbool.h>
#include <stddef.h>

/* Writes $XDG_CACHE_HOME/evtc, else $HOME/.cache/evtc, followed by "/sub"
 * when sub is not NULL, into buf (cap bytes).  false when neither variable
 * is set (empty counts as unset) or the path does not fit. */
bool evtc_cache_dir(const char *sub, char *buf, size_t cap);

/* Creates directory `dir` and its missing parents (mode 0777 before umask).
 * true when every component exists as a directory afterwards; false with
 * errno set (ENOTDIR when a component is a file, ENOENT for "") otherwise. */
bool evtc_mkdirs(const char *dir);

#endif
