/* atomic_file.c -- temp file + fsync + rename, the one way evtc writes
 * result files (.npy outputs, checkpoints). */
#include "runtime/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of path ("." when there is none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

bool evtc_atomic_open(evtc_atomic_file *af, const char *path, evtc_diag *d) {
  memset(af, 0, sizeof *af);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (!*base) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot write %s: not a file name", path);
    return false;
  }
  char *dir = dir_of(path);
  size_t cap = strlen(dir) + strlen(base) + 32;
  af->tmp_path = malloc(cap);
  snprintf(af->tmp_path, cap, "%s/.%s.tmp.XXXXXX", dir, base);
  free(dir);
  int fd = mkstemp(af->tmp_path);
  if (fd < 0) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    free(af->tmp_path);
    af->tmp_path = NULL;
    return false;
  }
  fchmod(fd, 0644);                    /* mkstemp makes it 0600; results are ordinary files */
  af->f = fdopen(fd, "wb");
  if (!af->f) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    unlink(af->tmp_path);
    free(af->tmp_path);
    af->tmp_path = NULL;
    return false;
  }
  af->path = strdup(path);
  return true;
}

static void release(evtc_atomic_file *af) {
  free(af->path);
  free(af->tmp_path);
  memset(af, 0, sizeof *af);
}

evtc_status evtc_atomic_commit(evtc_atomic_file *af, evtc_diag *d) {
  int err = 0;
  if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
  if (!err && fsync(fileno(af->f)) != 0) err = errno;
  if (fclose(af->f) != 0 && !err) err = errno;
  af->f = NULL;
  if (!err && rename(af->tmp_path, af->path) != 0) err = errno;
  if (err) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot write %s: %s", af->path, strerror(err));
    unlink(af->tmp_path);
    release(af);
    return EVTC_ERR_IO;
  }
  char *dir = dir_of(af->path);        /* make the rename itself durable */
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  free(dir);
  release(af);
  return EVTC_OK;
}
