/* lex.h -- the tokenizer of the text IR (used by parse.c only).
 *
 * The text is line oriented: a newline is a token, everything else between
 * tokens (spaces, tabs, carriage returns, `#` comments to the end of the
 * line) is skipped.  Tokens point into the source buffer, which must outlive
 * them.  Positions are 1-based lines and byte columns.
 */
#ifndef EVTC_IR_LEX_H
#define EVTC_IR_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum evtc_tok_kind {
  EVTC_TOK_EOF,
  EVTC_TOK_NEWLINE,
  EVTC_TOK_NAME,      /* %name; text excludes the '%' */
  EVTC_TOK_IDENT,     /* [A-Za-z_][A-Za-z0-9_.]*: keywords, ops, dtypes, attribute names */
  EVTC_TOK_INT,       /* value in .i */
  EVTC_TOK_FLOAT,     /* value in .f (a literal with '.', an exponent, or -inf) */
  EVTC_TOK_STRING,    /* "..."; text excludes the quotes */
  EVTC_TOK_ARROW,     /* -> */
  EVTC_TOK_PUNCT,     /* one of = ( ) { } [ ] , : @ in .punct */
  EVTC_TOK_ERROR      /* a lexical error; the message is in the lexer's err */
} evtc_tok_kind;

typedef struct evtc_token {
  evtc_tok_kind kind;
  const char *text;
  size_t len;
  int line, col;
  char punct;
  int64_t i;
  double f;
} evtc_token;

typedef struct evtc_lexer {
  const char *p, *end;
  const char *line_start;
  int line;
  char err[160];
} evtc_lexer;

/* Starts lexing the len bytes at src (NUL bytes in them are errors). */
void evtc_lexer_init(evtc_lexer *lx, const char *src, size_t len);
/* Reads the next token into t.  On a lexical error t->kind is
 * EVTC_TOK_ERROR, t's position is where the error is, and lx->err says why. */
void evtc_lexer_next(evtc_lexer *lx, evtc_token *t);
/* Writes a short description of t for messages ("'%x'", "end of line"). */
const char *evtc_token_describe(const evtc_token *t, char *buf, size_t cap);

#endif
