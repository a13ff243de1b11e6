/* device.c -- per-target constants of the cost model, from a data file.
 *
 * data/devices/<name>.txt holds "key value" lines ('#' comments): name,
 * copy_bw (bytes/s), gemm_flops, vector_flops (FLOP/s), launch_us, the
 * template limits max_nodes, max_reductions, max_io, the on-chip bytes
 * smem_bytes of the cost model's multi-pass rows (cost.c), and an
 * optional "calibrated ..." line saying where the numbers came from.  The
 * directory is $EVTC_DATA_DIR/devices, else the source tree's
 * data/devices (EVTC_DATA_DIR is compiled in by CMake).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/partition.h"

#ifndef EVTC_DATA_DIR
#define EVTC_DATA_DIR "data"
#endif

bool evtc_device_load(const char *name, evtc_device *dev, evtc_diag *d) {
  memset(dev, 0, sizeof *dev);
  bool valid = *name && strlen(name) < sizeof dev->name;
  for (const char *p = name; *p; p++) valid &= strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", *p) != NULL;
  if (!valid) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "unknown target '%s'", name);
    return false;
  }
  const char *dir = getenv("EVTC_DATA_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/devices/%s.txt", dir && *dir ? dir : EVTC_DATA_DIR, name);
  FILE *f = fopen(path, "r");
  if (!f) {
    evtc_diag_set(d, EVTC_ERR_IO, "target '%s': cannot read %s: %s", name, path, strerror(errno));
    return false;
  }
  struct { const char *key; double *f; int *i; } keys[] = {
      {"copy_bw", &dev->copy_bw, NULL},       {"gemm_flops", &dev->gemm_flops, NULL},
      {"vector_flops", &dev->vector_flops, NULL}, {"launch_us", &dev->launch_us, NULL},
      {"smem_bytes", &dev->smem_bytes, NULL}, {"max_nodes", NULL, &dev->max_nodes},
      {"max_reductions", NULL, &dev->max_reductions}, {"max_io", NULL, &dev->max_io}};
  enum { NKEYS = sizeof keys / sizeof keys[0] };
  bool seen[NKEYS] = {false};
  char line[512];
  int lineno = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    lineno++;
    char *s = line + strspn(line, " \t");
    s[strcspn(s, "\r\n")] = 0;
    if (*s == '#' || *s == 0) continue;
    char *sp = s + strcspn(s, " \t");
    char *val = sp + strspn(sp, " \t");
    *sp = 0;
    if (strcmp(s, "name") == 0) {
      snprintf(dev->name, sizeof dev->name, "%s", val);
      continue;
    }
    if (strcmp(s, "calibrated") == 0) {
      snprintf(dev->calibration, sizeof dev->calibration, "%s", val);
      continue;
    }
    int k = 0;
    while (k < NKEYS && strcmp(keys[k].key, s) != 0) k++;
    char *end;
    double v = strtod(val, &end);
    if (k == NKEYS || end == val || *end || !(v > 0)) {
      evtc_diag_set(d, EVTC_ERR_PARSE, "%s:%d: expected one of the known keys with a positive number", path, lineno);
      ok = false;
      break;
    }
    if (keys[k].f) *keys[k].f = v;
    else *keys[k].i = v > 1e6 ? 1000000 : (int)v;
    seen[k] = true;
  }
  fclose(f);
  for (int k = 0; k < NKEYS && ok; k++)
    if (!seen[k]) {
      evtc_diag_set(d, EVTC_ERR_PARSE, "%s: missing key '%s'", path, keys[k].key);
      ok = false;
    }
  if (ok && !dev->name[0]) snprintf(dev->name, sizeof dev->name, "%s", name);
  return ok;
}
