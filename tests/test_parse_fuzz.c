/* test_parse_fuzz.c -- the parser on damaged input: never a crash, always
 * either a graph or one "FILE:LINE:COL: cause" message.
 *
 * Inputs: a few tests/ir files cut at every byte offset, and the same files
 * with 1..4 bytes replaced by random ones (fixed seed; the replacements are
 * drawn from characters that matter to the lexer, plus arbitrary bytes).
 * A mutated text that still parses must print canonically: printing it,
 * parsing that and printing again gives the same bytes.  Run under ASan and
 * UBSan (-DEVTC_SANITIZE=ON) this also checks for memory errors.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/text.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  *len = fread(buf, 1, (size_t)n, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

/* True when msg is "fuzz.evt:LINE:COL: something". */
static bool has_position(const char *msg) {
  const char *p = "fuzz.evt:";
  if (strncmp(msg, p, strlen(p)) != 0) return false;
  msg += strlen(p);
  for (int part = 0; part < 2; part++) {
    if (!isdigit((unsigned char)*msg)) return false;
    while (isdigit((unsigned char)*msg)) msg++;
    if (*msg++ != ':') return false;
  }
  return msg[0] == ' ' && msg[1] != 0;
}

static int n_ok, n_err;

/* Parses text; checks the outcome as the file comment says. */
static void try_text(const char *text, const char *what) {
  char err[2048];
  evtc_graph *g = evtc_graph_parse_string(text, "fuzz.evt", err, sizeof err);
  if (!g) {
    n_err++;
    CHECK(has_position(err), "%s: message without a position: '%s'", what, err);
    return;
  }
  n_ok++;
  char *a = evtc_graph_to_string(g);
  evtc_graph *h = evtc_graph_parse_string(a, "fuzz.evt", err, sizeof err);
  CHECK(h != NULL, "%s: printed text does not parse: %s\n%s", what, err, a);
  if (h) {
    char *b = evtc_graph_to_string(h);
    CHECK(strcmp(a, b) == 0, "%s: printing is not stable:\n%s\n---\n%s", what, a, b);
    free(b);
  }
  free(a);
  evtc_graph_free(h);
  evtc_graph_free(g);
}

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 32);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_parse_fuzz SOURCE_DIR\n");
    return 2;
  }
  static const char *const files[] = {"mlp.evt", "layout.evt", "consts.evt", "types.evt"};
  static const char interesting[] = "%={}[](),:@->#\"\n 0123456789.e_axf";
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char path[1024], what[64];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/tests/ir/%s", argv[1], files[f]);
    char *text = read_file(path, &len);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text) continue;
    char *buf = malloc(len + 1);
    for (size_t cut = 0; cut <= len; cut++) {      /* every truncation */
      memcpy(buf, text, cut);
      buf[cut] = 0;
      snprintf(what, sizeof what, "%s cut at %zu", files[f], cut);
      try_text(buf, what);
    }
    for (int k = 0; k < 150; k++) {                /* random byte replacements */
      memcpy(buf, text, len + 1);
      int flips = 1 + (int)(rng() % 4);
      for (int j = 0; j < flips; j++) {
        size_t at = rng() % len;
        uint32_t r = rng();
        buf[at] = (r & 1) ? interesting[(r >> 1) % (sizeof interesting - 1)] : (char)(1 + (r >> 1) % 255);
      }
      snprintf(what, sizeof what, "%s mutation %d", files[f], k);
      try_text(buf, what);
    }
    free(buf);
    free(text);
  }
  CHECK(n_ok > 0 && n_err > 1000, "%d parsed, %d rejected", n_ok, n_err);
  printf("fuzz: %d parsed, %d rejected\n", n_ok, n_err);
  return check_summary();
}
