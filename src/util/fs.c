/* fs.c -- the per-user cache directory and `mkdir -p` (see fs.h). */
#include "util/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool evtc_cache_dir(const char *sub, char *buf, size_t cap) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  const char *base = xdg && *xdg ? xdg : home && *home ? home : NULL;
  if (!base) return false;
  int n = snprintf(buf, cap, "%s%s/evtc%s%s", base, base == xdg ? "" : "/.cache", sub ? "/" : "", sub ? sub : "");
  return n > 0 && (size_t)n < cap;
}

/* Creates one directory; true when it exists as a directory afterwards. */
static bool mkdir_one(const char *path) {
  struct stat st;
  if (mkdir(path, 0777) != 0 && errno != EEXIST) return false;
  if (stat(path, &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return false;
  }
  return true;
}

bool evtc_mkdirs(const char *dir) {
  if (!*dir) {
    errno = ENOENT;
    return false;
  }
  char *path = strdup(dir);
  if (!path) return false;
  bool ok = true;
  /* Each '/' after the first character ends a parent; the last component is the whole path. */
  for (char *p = path + 1; ok && *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    ok = mkdir_one(path);
    *p = '/';
  }
  ok = ok && mkdir_one(path);
  int saved = errno;
  free(path);
  errno = saved;
  return ok;
}
