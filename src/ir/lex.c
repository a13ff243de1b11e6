/* lex.c -- the tokenizer of the text IR (see lex.h).
 *
 * Numbers: an optional '-', digits, optionally '.' digits and an exponent;
 * without '.' or exponent they are integers and must fit in int64.  "-inf"
 * is a float token; bare "inf" and "nan" are identifiers that the parser
 * reads as floats where a value is expected.  Strings have no escapes and
 * end at the next '"' on the same line.
 */
#include "ir/lex.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

void evtc_lexer_init(evtc_lexer *lx, const char *src, size_t len) {
  lx->p = src;
  lx->end = src + len;
  lx->line_start = src;
  lx->line = 1;
  lx->err[0] = 0;
}

static void lex_error(evtc_lexer *lx, evtc_token *t, const char *fmt, const char *arg) {
  t->kind = EVTC_TOK_ERROR;
  snprintf(lx->err, sizeof lx->err, fmt, arg);
}

/* A printable spelling of byte c for messages. */
static const char *char_str(char c, char *buf) {
  if (c > ' ' && c < 127) snprintf(buf, 8, "%c", c);
  else snprintf(buf, 8, "\\x%02x", (unsigned char)c);
  return buf;
}

/* Lexes a number starting at lx->p (a digit, or '-' then a digit). */
static void lex_number(evtc_lexer *lx, evtc_token *t) {
  const char *s = lx->p, *q = s;
  bool is_float = false;
  if (*q == '-') q++;
  while (q < lx->end && is_digit(*q)) q++;
  if (q < lx->end && *q == '.') {
    is_float = true;
    q++;
    if (q >= lx->end || !is_digit(*q)) goto malformed;
    while (q < lx->end && is_digit(*q)) q++;
  }
  if (q < lx->end && (*q == 'e' || *q == 'E')) {
    is_float = true;
    q++;
    if (q < lx->end && (*q == '+' || *q == '-')) q++;
    if (q >= lx->end || !is_digit(*q)) goto malformed;
    while (q < lx->end && is_digit(*q)) q++;
  }
  if (q < lx->end && is_name_char(*q)) goto malformed;
  char buf[128];
  t->len = (size_t)(q - s);
  lx->p = q;
  if (t->len >= sizeof buf) {
    lex_error(lx, t, "number is too long%s", "");
    return;
  }
  memcpy(buf, s, t->len);
  buf[t->len] = 0;
  errno = 0;
  if (is_float) {
    t->kind = EVTC_TOK_FLOAT;
    t->f = strtod(buf, NULL);
    if (errno == ERANGE && isinf(t->f)) lex_error(lx, t, "number %s is out of range", buf);
  } else {
    t->kind = EVTC_TOK_INT;
    t->i = strtoll(buf, NULL, 10);
    if (errno == ERANGE) lex_error(lx, t, "integer %s is out of range", buf);
  }
  return;
malformed:
  while (q < lx->end && (is_name_char(*q) || *q == '+' || *q == '-')) q++;
  char text[48];
  snprintf(text, sizeof text, "%.*s", (int)(q - s > 40 ? 40 : q - s), s);
  lx->p = q;
  lex_error(lx, t, "malformed number '%s'", text);
}

void evtc_lexer_next(evtc_lexer *lx, evtc_token *t) {
  memset(t, 0, sizeof *t);
  for (;;) {   /* skip blanks and comments */
    while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\r')) lx->p++;
    if (lx->p < lx->end && *lx->p == '#') {
      while (lx->p < lx->end && *lx->p != '\n') lx->p++;
      continue;
    }
    break;
  }
  const char *s = lx->p;
  t->text = s;
  t->line = lx->line;
  t->col = (int)(s - lx->line_start) + 1;
  if (s >= lx->end) {
    t->kind = EVTC_TOK_EOF;
    return;
  }
  char c = *s;
  if (c == '\n') {
    t->kind = EVTC_TOK_NEWLINE;
    t->len = 1;
    lx->p++;
    lx->line++;
    lx->line_start = lx->p;
    return;
  }
  if (c == '%') {
    const char *q = s + 1;
    while (q < lx->end && is_name_char(*q)) q++;
    if (q == s + 1) {
      lx->p = q;
      lex_error(lx, t, "expected a name after '%%'%s", "");
      return;
    }
    t->kind = EVTC_TOK_NAME;
    t->text = s + 1;
    t->len = (size_t)(q - s - 1);
    lx->p = q;
    return;
  }
  if (is_alpha(c)) {
    const char *q = s;
    while (q < lx->end && is_name_char(*q)) q++;
    t->kind = EVTC_TOK_IDENT;
    t->len = (size_t)(q - s);
    lx->p = q;
    return;
  }
  if (is_digit(c) || (c == '-' && s + 1 < lx->end && is_digit(s[1]))) {
    lex_number(lx, t);
    return;
  }
  if (c == '-' && lx->end - s >= 4 && memcmp(s, "-inf", 4) == 0 && (lx->end - s == 4 || !is_name_char(s[4]))) {
    t->kind = EVTC_TOK_FLOAT;
    t->f = -INFINITY;
    t->len = 4;
    lx->p = s + 4;
    return;
  }
  if (c == '-' && s + 1 < lx->end && s[1] == '>') {
    t->kind = EVTC_TOK_ARROW;
    t->len = 2;
    lx->p = s + 2;
    return;
  }
  if (c == '"') {
    const char *q = s + 1;
    while (q < lx->end && *q != '"' && *q != '\n' && *q != 0) q++;
    if (q >= lx->end || *q != '"') {
      lx->p = q;
      lex_error(lx, t, "unterminated string%s", "");
      return;
    }
    t->kind = EVTC_TOK_STRING;
    t->text = s + 1;
    t->len = (size_t)(q - s - 1);
    lx->p = q + 1;
    return;
  }
  if (strchr("=(){}[],:@", c) && c != 0) {
    t->kind = EVTC_TOK_PUNCT;
    t->punct = c;
    t->len = 1;
    lx->p++;
    return;
  }
  char buf[8];
  lx->p++;
  lex_error(lx, t, "unexpected character '%s'", char_str(c, buf));
}

const char *evtc_token_describe(const evtc_token *t, char *buf, size_t cap) {
  int n = t->len > 32 ? 32 : (int)t->len;
  switch (t->kind) {
    case EVTC_TOK_EOF: snprintf(buf, cap, "end of file"); break;
    case EVTC_TOK_NEWLINE: snprintf(buf, cap, "end of line"); break;
    case EVTC_TOK_NAME: snprintf(buf, cap, "'%%%.*s'", n, t->text); break;
    case EVTC_TOK_STRING: snprintf(buf, cap, "a string"); break;
    case EVTC_TOK_ERROR: snprintf(buf, cap, "an error"); break;
    default: snprintf(buf, cap, "'%.*s'", n, t->text); break;
  }
  return buf;
}
