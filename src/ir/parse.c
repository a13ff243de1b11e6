/* parse.c -- the text IR parser: recursive descent over lex.c's tokens.
 *
 *   file    := NL* 'graph' (IDENT | STRING) '{' NL stmt* '}' NL* EOF
 *   stmt    := NL | node NL | 'output' NAME ('->' NAME)? NL | 'loss' NAME NL
 *   node    := NAME '=' IDENT '(' (NAME (',' NAME)*)? ')' attrs? (':' type)?
 *   attrs   := '{' (IDENT '=' value (',' IDENT '=' value)*)? '}'
 *   value   := INT | FLOAT | STRING | IDENT (a dtype, inf, nan) | '[' (num (',' num)*)? ']'
 *   type    := IDENT '[' (INT (',' INT)*)? ']' ('@' '[' INT (',' INT)* ']')?
 *
 * Every node goes through the builder (graph.c), which checks arity and
 * attributes and infers the type; a written type must equal the inferred
 * one, and leaves must have one.  Builder messages get the node's position
 * in front.  The finished graph is verified (verify.c), so every graph the
 * library returns from text is well formed.  Any failure frees the graph and
 * leaves "FILE:LINE:COL: cause" in the caller's buffer.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"
#include "ir/text.h"

typedef struct parser {
  evtc_lexer lx;
  evtc_token tok;          /* the current token */
  const char *file;
  evtc_graph *g;
  char *err;
  size_t errcap;
  bool failed;
  evtc_node **ins;         /* scratch: the inputs of the node being read */
  int cap_ins;
  evtc_attr *attrs;        /* scratch: its attributes */
  int cap_attrs;
  int64_t *li;             /* scratch: a list value being read, as ints */
  int cap_li;
  double *lf;              /* ... and as floats */
  int cap_lf;
} parser;

static bool vfail(parser *p, int line, int col, const char *fmt, va_list ap) {
  if (p->failed) return false;
  p->failed = true;
  char msg[1200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (p->errcap) snprintf(p->err, p->errcap, "%s:%d:%d: %s", p->file, line, col, msg);
  return false;
}

/* Records "FILE:LINE:COL: message" (first failure only); returns false. */
static bool fail_at(parser *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool fail_at(parser *p, int line, int col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(p, line, col, fmt, ap);
  va_end(ap);
  return false;
}

/* fail_at the current token's position. */
static bool fail_here(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail_here(parser *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(p, p->tok.line, p->tok.col, fmt, ap);
  va_end(ap);
  return false;
}

/* The builder (or verifier) failed on a node at line:col: reuse its message. */
static bool fail_builder(parser *p, int line, int col) {
  return fail_at(p, line, col, "%s", p->g->diag.msg);
}

static bool advance(parser *p) {
  evtc_lexer_next(&p->lx, &p->tok);
  if (p->tok.kind == EVTC_TOK_ERROR) return fail_here(p, "%s", p->lx.err);
  return true;
}

/* A token length clipped for messages ("%.*s"). */
static int clip(size_t len) { return len > 32 ? 32 : (int)len; }

static bool is_punct(const parser *p, char c) { return p->tok.kind == EVTC_TOK_PUNCT && p->tok.punct == c; }

static bool is_word(const parser *p, const char *w) {
  return p->tok.kind == EVTC_TOK_IDENT && p->tok.len == strlen(w) && memcmp(p->tok.text, w, p->tok.len) == 0;
}

/* Fails with "expected WHAT, found <current token>". */
static bool expected(parser *p, const char *what) {
  char buf[64];
  return fail_here(p, "expected %s, found %s", what, evtc_token_describe(&p->tok, buf, sizeof buf));
}

static bool expect_punct(parser *p, char c) {
  if (!is_punct(p, c)) {
    char what[8] = {'\'', c, '\'', 0};
    return expected(p, what);
  }
  return advance(p);
}

static bool expect_newline(parser *p) {
  if (p->tok.kind != EVTC_TOK_NEWLINE) return expected(p, "end of line");
  return advance(p);
}

/* The node named by the current NAME token (then advances), or NULL after
 * reporting an unknown name. */
static evtc_node *name_ref(parser *p) {
  if (p->tok.kind != EVTC_TOK_NAME) return expected(p, "a %name"), NULL;
  char *name = evtc_arena_strndup(p->g->arena, p->tok.text, p->tok.len);
  evtc_node *n = evtc_graph_find(p->g, name);
  if (!n) return fail_here(p, "unknown name %%%s", name), NULL;
  return advance(p) ? n : NULL;
}

/* buf (of *cap elements of elem bytes) reallocated to hold at least need. */
static void *grow(void *buf, int *cap, int need, size_t elem) {
  if (need <= *cap) return buf;
  int c = *cap ? *cap * 2 : 16;
  while (c < need) c *= 2;
  void *b = realloc(buf, elem * (size_t)c);
  EVTC_ASSERT(b != NULL);
  *cap = c;
  return b;
}

/* A number token (or inf / nan) as a float or int list element. */
static bool list_number(parser *p, int64_t *iv, double *fv, bool *is_float) {
  if (p->tok.kind == EVTC_TOK_INT) {
    *iv = p->tok.i;
    *fv = (double)p->tok.i;
    *is_float = false;
  } else if (p->tok.kind == EVTC_TOK_FLOAT || is_word(p, "inf") || is_word(p, "nan")) {
    *fv = p->tok.kind == EVTC_TOK_FLOAT ? p->tok.f : is_word(p, "inf") ? INFINITY : NAN;
    *is_float = true;
  } else {
    return expected(p, "a number");
  }
  return advance(p);
}

/* Reads '[' num, ... ']' into an INTS attribute, or FLOATS if any element is a float. */
static bool parse_list(parser *p, evtc_attr *a) {
  if (!advance(p)) return false;           /* '[' */
  int n = 0;
  bool any_float = false;
  while (!is_punct(p, ']')) {
    if (n && !expect_punct(p, ',')) return false;
    p->li = grow(p->li, &p->cap_li, n + 1, sizeof *p->li);
    p->lf = grow(p->lf, &p->cap_lf, n + 1, sizeof *p->lf);
    bool f = false;
    if (!list_number(p, &p->li[n], &p->lf[n], &f)) return false;
    any_float |= f;
    n++;
  }
  if (!advance(p)) return false;
  if (any_float) *a = evtc_attr_floats(a->name, n, evtc_arena_memdup(p->g->arena, p->lf, sizeof(double) * (size_t)n));
  else *a = evtc_attr_ints(a->name, n, evtc_arena_memdup(p->g->arena, p->li, sizeof(int64_t) * (size_t)n));
  return true;
}

static bool parse_value(parser *p, evtc_attr *a) {
  evtc_dtype dt;
  switch (p->tok.kind) {
    case EVTC_TOK_INT: *a = evtc_attr_int(a->name, p->tok.i); break;
    case EVTC_TOK_FLOAT: *a = evtc_attr_float(a->name, p->tok.f); break;
    case EVTC_TOK_STRING:
      *a = evtc_attr_str(a->name, evtc_arena_strndup(p->g->arena, p->tok.text, p->tok.len));
      break;
    case EVTC_TOK_IDENT:
      if (is_word(p, "inf") || is_word(p, "nan")) *a = evtc_attr_float(a->name, is_word(p, "inf") ? INFINITY : NAN);
      else if (evtc_dtype_parse(p->tok.text, p->tok.len, &dt)) *a = evtc_attr_dtype(a->name, dt);
      else return fail_here(p, "'%.*s' is not a dtype or a number", clip(p->tok.len), p->tok.text);
      break;
    case EVTC_TOK_PUNCT:
      if (p->tok.punct == '[') return parse_list(p, a);
      return expected(p, "an attribute value");
    default: return expected(p, "an attribute value");
  }
  return advance(p);
}

/* Reads '{' name=value, ... '}' into p->attrs; *n gets the count. */
static bool parse_attrs(parser *p, int *n) {
  *n = 0;
  if (!advance(p)) return false;           /* '{' */
  while (!is_punct(p, '}')) {
    if (*n && !expect_punct(p, ',')) return false;
    if (p->tok.kind != EVTC_TOK_IDENT) return expected(p, "an attribute name");
    p->attrs = grow(p->attrs, &p->cap_attrs, *n + 1, sizeof *p->attrs);
    evtc_attr *a = &p->attrs[(*n)++];
    a->name = evtc_arena_strndup(p->g->arena, p->tok.text, p->tok.len);
    if (!advance(p) || !expect_punct(p, '=') || !parse_value(p, a)) return false;
  }
  return advance(p);
}

/* Reads a list of dims or strides "[d, ...]" (at most EVTC_MAX_RANK entries,
 * each >= 0) into v; *n gets the count. */
static bool parse_dims(parser *p, int64_t *v, int *n, const char *what) {
  *n = 0;
  if (!expect_punct(p, '[')) return false;
  while (!is_punct(p, ']')) {
    if (*n && !expect_punct(p, ',')) return false;
    if (p->tok.kind != EVTC_TOK_INT) return expected(p, "an integer");
    if (*n == EVTC_MAX_RANK) return fail_here(p, "rank exceeds %d", EVTC_MAX_RANK);
    if (p->tok.i < 0)
      return fail_here(p, "negative %s %lld", what, (long long)p->tok.i);
    v[(*n)++] = p->tok.i;
    if (!advance(p)) return false;
  }
  return advance(p);
}

static bool parse_type(parser *p, evtc_type *t) {
  int line = p->tok.line, col = p->tok.col;
  evtc_dtype dt;
  if (p->tok.kind != EVTC_TOK_IDENT) return expected(p, "a type");
  if (!evtc_dtype_parse(p->tok.text, p->tok.len, &dt))
    return fail_at(p, line, col, "unknown dtype '%.*s'", clip(p->tok.len), p->tok.text);
  if (!advance(p)) return false;
  int64_t shape[EVTC_MAX_RANK];
  int rank;
  if (!parse_dims(p, shape, &rank, "dimension")) return false;
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] && numel > INT64_MAX / shape[i])
      return fail_at(p, line, col, "the type has more than %lld elements", (long long)INT64_MAX);
    numel *= shape[i];
  }
  *t = evtc_type_make(dt, rank, shape);
  if (is_punct(p, '@')) {
    int sl = p->tok.line, sc = p->tok.col, n;
    int64_t strides[EVTC_MAX_RANK];
    if (!advance(p) || !parse_dims(p, strides, &n, "stride")) return false;
    if (n != rank) return fail_at(p, sl, sc, "%d strides for a shape of rank %d", n, rank);
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)rank);
  }
  return true;
}

/* node := NAME '=' op '(' inputs ')' attrs? (':' type)? NL */
static bool parse_node(parser *p) {
  evtc_graph *g = p->g;
  int line = p->tok.line, col = p->tok.col;
  char *name = evtc_arena_strndup(g->arena, p->tok.text, p->tok.len);
  const evtc_node *prev = evtc_graph_find(g, name);
  if (prev) return fail_at(p, line, col, "duplicate name %%%s (first defined at %d:%d)", name, prev->line, prev->col);
  if (!advance(p) || !expect_punct(p, '=')) return false;
  if (p->tok.kind != EVTC_TOK_IDENT) return expected(p, "an op name");
  evtc_op op;
  if (!evtc_op_lookup(p->tok.text, p->tok.len, &op))
    return fail_here(p, "unknown op '%.*s'", clip(p->tok.len), p->tok.text);
  if (!advance(p) || !expect_punct(p, '(')) return false;
  int n_ins = 0, n_attrs = 0;
  while (!is_punct(p, ')')) {
    if (n_ins && !expect_punct(p, ',')) return false;
    p->ins = grow(p->ins, &p->cap_ins, n_ins + 1, sizeof *p->ins);
    if (!(p->ins[n_ins++] = name_ref(p))) return false;
  }
  if (!advance(p)) return false;
  if (is_punct(p, '{') && !parse_attrs(p, &n_attrs)) return false;
  evtc_type written;
  bool has_type = is_punct(p, ':');
  int tline = 0, tcol = 0;
  if (has_type) {
    if (!advance(p)) return false;
    tline = p->tok.line;
    tcol = p->tok.col;
    if (!parse_type(p, &written)) return false;
  }
  if (!expect_newline(p)) return false;
  const char *opname = evtc_op_get(op)->name;
  evtc_node *n;
  if (evtc_op_is_leaf(op)) {
    if (n_ins) return fail_at(p, line, col, "node %%%s (%s): takes 0 inputs, got %d", name, opname, n_ins);
    if (!has_type) return fail_at(p, line, col, "node %%%s (%s): a leaf needs a written type", name, opname);
    n = evtc_leaf_add(g, op, written, p->attrs, n_attrs, name);
  } else {
    n = evtc_node_add(g, op, p->ins, n_ins, p->attrs, n_attrs, name);
  }
  if (!n) return fail_builder(p, line, col);
  if (has_type && !evtc_type_equal(&written, &n->type)) {
    char w[320], inf[320];
    return fail_at(p, tline, tcol, "node %%%s (%s): written type %s but inferred %s", name, opname,
                   evtc_type_str(&written, w, sizeof w), evtc_type_str(&n->type, inf, sizeof inf));
  }
  n->line = line;
  n->col = col;
  return true;
}

/* 'output' NAME ('->' NAME)? NL */
static bool parse_output(parser *p) {
  if (!advance(p)) return false;
  evtc_node *n = name_ref(p), *target = NULL;
  if (!n) return false;
  if (p->tok.kind == EVTC_TOK_ARROW) {
    if (!advance(p)) return false;
    int line = p->tok.line, col = p->tok.col;
    if (!(target = name_ref(p))) return false;
    if (target->op != EVTC_OP_PARAM && target->op != EVTC_OP_STATE)
      return fail_at(p, line, col, "output %%%s updates %%%s (%s), which is not a param or state", n->name,
                     target->name, evtc_op_get(target->op)->name);
    if (!evtc_type_equal(&n->type, &target->type)) {
      char a[320], b[320];
      return fail_at(p, line, col, "output %%%s has type %s but updates %%%s of type %s", n->name,
                     evtc_type_str(&n->type, a, sizeof a), target->name, evtc_type_str(&target->type, b, sizeof b));
    }
    for (int32_t i = 0; i < p->g->n_outputs; i++)
      if (p->g->outputs[i].updates == target)
        return fail_at(p, line, col, "%%%s is already updated by output %%%s", target->name,
                       p->g->outputs[i].node->name);
  }
  if (!expect_newline(p)) return false;
  evtc_graph_add_output(p->g, n, target);
  return true;
}

/* 'loss' NAME NL */
static bool parse_loss(parser *p) {
  int kline = p->tok.line, kcol = p->tok.col;
  if (!advance(p)) return false;
  int line = p->tok.line, col = p->tok.col;
  evtc_node *n = name_ref(p);
  if (!n) return false;
  if (p->g->loss) return fail_at(p, kline, kcol, "a second loss line (the loss is already %%%s)", p->g->loss->name);
  if (n->type.rank != 0 || !evtc_dtype_is_float(n->type.dtype)) {
    char t[320];
    return fail_at(p, line, col, "loss %%%s must be a scalar float, not %s", n->name,
                   evtc_type_str(&n->type, t, sizeof t));
  }
  if (!expect_newline(p)) return false;
  p->g->loss = n;
  return true;
}

static bool skip_newlines(parser *p) {
  while (p->tok.kind == EVTC_TOK_NEWLINE)
    if (!advance(p)) return false;
  return true;
}

static bool parse_graph(parser *p) {
  if (!advance(p) || !skip_newlines(p)) return false;
  if (!is_word(p, "graph")) return expected(p, "'graph'");
  if (!advance(p)) return false;
  if ((p->tok.kind != EVTC_TOK_IDENT && p->tok.kind != EVTC_TOK_STRING) || p->tok.len == 0)
    return expected(p, "a graph name");
  char *gname = strndup(p->tok.text, p->tok.len);
  EVTC_ASSERT(gname != NULL);
  p->g = evtc_graph_new(gname);
  free(gname);
  p->g->file = evtc_arena_strdup(p->g->arena, p->file);
  if (!advance(p) || !expect_punct(p, '{') || !expect_newline(p)) return false;
  for (;;) {
    if (!skip_newlines(p)) return false;
    if (is_punct(p, '}')) break;
    bool ok;
    if (p->tok.kind == EVTC_TOK_NAME) ok = parse_node(p);
    else if (is_word(p, "output")) ok = parse_output(p);
    else if (is_word(p, "loss")) ok = parse_loss(p);
    else if (p->tok.kind == EVTC_TOK_EOF) ok = fail_here(p, "missing '}' at the end of the file");
    else ok = expected(p, "a node ('%name = op(...)'), 'output', 'loss' or '}'");
    if (!ok) return false;
  }
  int line = p->tok.line, col = p->tok.col;
  if (!advance(p) || !skip_newlines(p)) return false;
  if (p->tok.kind != EVTC_TOK_EOF) {
    char buf[64];
    return fail_here(p, "unexpected %s after the closing '}'",
                   evtc_token_describe(&p->tok, buf, sizeof buf));
  }
  const evtc_node *where = NULL;
  if (evtc_graph_verify_at(p->g, &where) != EVTC_OK) {
    if (where && where->line) return fail_builder(p, where->line, where->col);
    return fail_builder(p, line, col);
  }
  return true;
}

/* Parses len bytes of text; the shared body of both entry points. */
static evtc_graph *parse_buffer(const char *text, size_t len, const char *file, char *err, size_t errcap) {
  parser p = {.file = file ? file : "<string>", .err = err, .errcap = err ? errcap : 0};
  if (p.errcap) err[0] = 0;
  evtc_lexer_init(&p.lx, text, len);
  bool ok = parse_graph(&p);
  free(p.ins);
  free(p.attrs);
  free(p.li);
  free(p.lf);
  if (!ok) {
    evtc_graph_free(p.g);
    return NULL;
  }
  return p.g;
}

evtc_graph *evtc_graph_parse_string(const char *text, const char *file, char *err, size_t errcap) {
  return parse_buffer(text, strlen(text), file, err, errcap);
}

evtc_graph *evtc_graph_parse_file(const char *path, char *err, size_t errcap) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int e = 0;
  if (f) {
    for (;;) {
      if (len == cap) {
        cap = cap ? cap * 2 : 65536;
        char *b = realloc(buf, cap);
        EVTC_ASSERT(b != NULL);
        buf = b;
      }
      size_t got = fread(buf + len, 1, cap - len, f);
      len += got;
      if (got == 0) break;
    }
    if (ferror(f)) e = errno ? errno : EIO;
    fclose(f);
  } else {
    e = errno;
  }
  if (e) {
    if (err && errcap) snprintf(err, errcap, "%s: cannot read: %s", path, strerror(e));
    free(buf);
    return NULL;
  }
  evtc_graph *g = parse_buffer(buf, len, path, err, errcap);
  free(buf);
  return g;
}
