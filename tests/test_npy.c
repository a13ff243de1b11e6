/* test_npy.c -- .npy reading and writing: every dtype round-trips, f16 and
 * bf16 round correctly, files that NumPy writes in ways evtc does not load
 * are rejected with a message naming the file and the cause. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/elements.h"
#include "runtime/npy.h"

static char tmpdir[64];

static const char *tmp_path(const char *name) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
  return buf;
}

/* Writes raw bytes: a v1 header made from `dict` (padded like NumPy) then `data`. */
static void write_raw(const char *path, const char *dict, const void *data, size_t n) {
  size_t dl = strlen(dict), hlen = (10 + dl + 1 + 63) / 64 * 64 - 10;
  FILE *f = fopen(path, "wb");
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hlen, (unsigned char)(hlen >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(dict, 1, dl, f);
  for (size_t i = dl; i + 1 < hlen; i++) fputc(' ', f);
  fputc('\n', f);
  if (n) fwrite(data, 1, n, f);
  fclose(f);
}

static void test_round_trip(void) {
  static const double vals[] = {0.0, 1.0, -2.5, 3.0e-3, 1234.5678, -7.0, 65504.0, 1e-7, 42.0, -0.0, 0.5, 100.0};
  for (int t = 0; t < EVTC_DTYPE_COUNT; t++) {
    int64_t shape[3] = {2, 3, 2};
    evtc_type ty = evtc_type_make((evtc_dtype)t, 3, shape);
    double src[12];
    for (int i = 0; i < 12; i++) src[i] = evtc_dtype_is_float((evtc_dtype)t) ? vals[i] : (t == EVTC_BOOL ? i % 3 == 0 : i * 7 - 30);
    evtc_diag d = {0};
    const char *p = tmp_path("rt.npy");
    CHECK(evtc_npy_write(p, &ty, src, &d) == EVTC_OK, "%s: write: %s", evtc_dtype_name(ty.dtype), d.msg);
    evtc_type back;
    double *got = NULL;
    CHECK(evtc_npy_read(p, &back, &got, &d) == EVTC_OK, "%s: read: %s", evtc_dtype_name(ty.dtype), d.msg);
    if (!got) continue;
    evtc_dtype want = t == EVTC_BF16 ? EVTC_F32 : (evtc_dtype)t;
    CHECK(back.dtype == want && back.rank == 3 && back.shape[0] == 2 && back.shape[1] == 3 && back.shape[2] == 2,
          "%s: type back is %s", evtc_dtype_name(ty.dtype), evtc_dtype_name(back.dtype));
    for (int i = 0; i < 12; i++) {
      double e = src[i];
      if (t == EVTC_F32 || t == EVTC_BF16) e = (float)e;     /* bf16 is written as <f4 */
      if (t == EVTC_F16) e = evtc_f16_to_double(evtc_double_to_f16(src[i]));
      CHECK(got[i] == e, "%s[%d]: got %.17g want %.17g", evtc_dtype_name(ty.dtype), i, got[i], e);
    }
    free(got);
  }
  /* scalars and empty arrays */
  evtc_type s = evtc_type_make(EVTC_F64, 0, NULL);
  double pi = 3.141592653589793, *got = NULL;
  evtc_diag d = {0};
  CHECK(evtc_npy_write(tmp_path("s.npy"), &s, &pi, &d) == EVTC_OK, "scalar write: %s", d.msg);
  evtc_type back;
  CHECK(evtc_npy_read(tmp_path("s.npy"), &back, &got, &d) == EVTC_OK && back.rank == 0 && got && got[0] == pi,
        "scalar read: %s", d.msg);
  free(got);
  int64_t z[2] = {0, 5};
  evtc_type e = evtc_type_make(EVTC_I64, 2, z);
  CHECK(evtc_npy_write(tmp_path("e.npy"), &e, NULL, &d) == EVTC_OK, "empty write: %s", d.msg);
  got = NULL;
  CHECK(evtc_npy_read(tmp_path("e.npy"), &back, &got, &d) == EVTC_OK && back.rank == 2 && back.shape[0] == 0 &&
            back.shape[1] == 5,
        "empty read: %s", d.msg);
  free(got);
  /* the written header is NumPy's: v1, 64-byte aligned, ends in '\n' (NumPy writes the same 136 bytes) */
  FILE *f = fopen(tmp_path("s.npy"), "rb");
  unsigned char hdr[256] = {0};
  size_t n = fread(hdr, 1, sizeof hdr, f);
  fclose(f);
  CHECK(n == 136 && hdr[6] == 1 && hdr[8] + 10 == 128 && hdr[127] == '\n', "header layout: %zu bytes", n);
  CHECK(memcmp(hdr + 10, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 55) == 0, "header text: %.55s",
        (const char *)hdr + 10);
  /* no temporary files (".NAME.tmp.XXXXXX") are left behind */
  DIR *dir = opendir(tmpdir);
  int hidden = 0;
  for (struct dirent *de; dir && (de = readdir(dir));) hidden += de->d_name[0] == '.' && strcmp(de->d_name, ".") &&
                                                                   strcmp(de->d_name, "..");
  if (dir) closedir(dir);
  CHECK(hidden == 0, "%d temporary files left", hidden);
}

static void test_byte_types(void) {
  unsigned char u[4] = {0, 7, 16, 255};
  write_raw(tmp_path("u1.npy"), "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2), }", u, 4);
  evtc_type t;
  double *v = NULL;
  evtc_diag d = {0};
  CHECK(evtc_npy_read(tmp_path("u1.npy"), &t, &v, &d) == EVTC_OK, "u1: %s", d.msg);
  CHECK(v && t.dtype == EVTC_I32 && v[1] == 7 && v[3] == 255, "u1 values");
  free(v);
  write_raw(tmp_path("i1.npy"), "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }", u, 4);
  CHECK(evtc_npy_read(tmp_path("i1.npy"), &t, &v, &d) == EVTC_OK && v && v[3] == -1 && v[2] == 16, "i1: %s",
        d.msg);
  free(v);
  /* key order and spacing are free; version 2 headers too */
  float fl[2] = {1.5f, -2.0f};
  write_raw(tmp_path("ko.npy"), "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<f4\"}", fl, 8);
  CHECK(evtc_npy_read(tmp_path("ko.npy"), &t, &v, &d) == EVTC_OK && v && v[0] == 1.5 && v[1] == -2.0,
        "free key order: %s", d.msg);
  free(v);
}

/* Reads `path` and expects failure with status st and message containing `want` and the path. */
static void expect_reject(const char *name, evtc_status st, const char *want) {
  const char *p = tmp_path(name);
  evtc_type t;
  double *v = (double *)1;
  evtc_diag d = {0};
  evtc_status got = evtc_npy_read(p, &t, &v, &d);
  CHECK(got == st, "%s: status %s, want %s (%s)", name, evtc_status_name(got), evtc_status_name(st), d.msg);
  CHECK(v == NULL, "%s: data not NULL on failure", name);
  CHECK(strstr(d.msg, want) != NULL, "%s: message '%s' lacks '%s'", name, d.msg, want);
  CHECK(strstr(d.msg, name) != NULL, "%s: message '%s' does not name the file", name, d.msg);
}

static void test_rejects(void) {
  float data[6] = {0};
  FILE *f = fopen(tmp_path("magic.npy"), "wb");
  fputs("PK\x03\x04 this is a zip", f);
  fclose(f);
  expect_reject("magic.npy", EVTC_ERR_INVALID, "bad magic");
  write_raw(tmp_path("trunc.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data, 20);
  expect_reject("trunc.npy", EVTC_ERR_INVALID, "truncated");
  write_raw(tmp_path("trail.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", data, 20);
  expect_reject("trail.npy", EVTC_ERR_INVALID, "trailing");
  write_raw(tmp_path("huge.npy"),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }", data,
            24);
  expect_reject("huge.npy", EVTC_ERR_INVALID, "truncated");
  write_raw(tmp_path("fortran.npy"), "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data, 24);
  expect_reject("fortran.npy", EVTC_ERR_UNSUPPORTED, "Fortran");
  write_raw(tmp_path("c8.npy"), "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data, 24);
  expect_reject("c8.npy", EVTC_ERR_UNSUPPORTED, "unsupported dtype '<c8'");
  write_raw(tmp_path("be.npy"), "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", data, 24);
  expect_reject("be.npy", EVTC_ERR_UNSUPPORTED, "unsupported dtype '>f4'");
  write_raw(tmp_path("rec.npy"), "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", data, 24);
  expect_reject("rec.npy", EVTC_ERR_UNSUPPORTED, "structured");
  write_raw(tmp_path("rank7.npy"), "{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,2), }", data, 2);
  expect_reject("rank7.npy", EVTC_ERR_UNSUPPORTED, "rank");
  write_raw(tmp_path("nokey.npy"), "{'descr': '<f4', 'shape': (6,), }", data, 24);
  expect_reject("nokey.npy", EVTC_ERR_INVALID, "fortran_order");
  write_raw(tmp_path("junk.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (6,x), }", data, 24);
  expect_reject("junk.npy", EVTC_ERR_INVALID, "bad .npy header");
  f = fopen(tmp_path("hdr.npy"), "wb");
  fwrite("\x93NUMPY\x01\x00\xff\x00{'descr'", 1, 19, f);
  fclose(f);
  expect_reject("hdr.npy", EVTC_ERR_INVALID, "truncated .npy header");
  f = fopen(tmp_path("v9.npy"), "wb");
  fwrite("\x93NUMPY\x09\x00\x00\x00", 1, 10, f);
  fclose(f);
  expect_reject("v9.npy", EVTC_ERR_UNSUPPORTED, "version 9.0");
  expect_reject("missing.npy", EVTC_ERR_IO, "No such file");
  /* writing into a directory that does not exist fails cleanly */
  evtc_type t = evtc_type_make(EVTC_F32, 1, (int64_t[]){6});
  double z[6] = {0};
  evtc_diag d = {0};
  CHECK(evtc_npy_write(tmp_path("nodir/x.npy"), &t, z, &d) == EVTC_ERR_IO && strstr(d.msg, "nodir/x.npy"),
        "write to missing dir: %s", d.msg);
}

static void test_half(void) {
  CHECK(evtc_double_to_f16(1.0) == 0x3c00, "f16(1)");
  CHECK(evtc_double_to_f16(65504.0) == 0x7bff, "f16(max)");
  CHECK(evtc_double_to_f16(65520.0) == 0x7c00, "f16(65520) overflows to inf");
  CHECK(evtc_double_to_f16(0.1) == 0x2e66, "f16(0.1) = %#x", evtc_double_to_f16(0.1));
  CHECK(evtc_double_to_f16(ldexp(1, -24)) == 1, "f16 smallest subnormal");
  CHECK(evtc_double_to_f16(ldexp(1, -25)) == 0, "f16 tie to even at zero");
  CHECK(evtc_double_to_f16(-2.0) == 0xc000, "f16(-2)");
  CHECK(evtc_f16_to_double(0x3555) == 0.333251953125, "f16 decode");
  CHECK(isnan(evtc_f16_to_double(evtc_double_to_f16(NAN))), "f16 NaN");
  CHECK(evtc_double_to_bf16(1.0) == 0x3f80, "bf16(1)");
  CHECK(evtc_double_to_bf16(1.0 + 1.0 / 256) == 0x3f80, "bf16 tie to even");
  CHECK(evtc_double_to_bf16(1.0 + 3.0 / 256) == 0x3f82, "bf16 tie to even, up");
  CHECK(evtc_bf16_to_double(0xc040) == -3.0, "bf16 decode");
}

int main(int argc, char **argv) {
  snprintf(tmpdir, sizeof tmpdir, "npy_test_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_round_trip();
  test_byte_types();
  test_rejects();
  test_half();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return check_summary();
}
