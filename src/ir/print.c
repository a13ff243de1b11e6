/* print.c -- the canonical text form of a graph.
 *
 * One line per node, `  %name = op(%a, %b) {attr=value, ...} : type`, in
 * topological order, then one `output` line per graph output and the `loss`
 * line, inside `graph NAME { ... }`.  Attributes follow the op's spec order
 * and those equal to their defaults are left out, so the text stays short
 * and one graph has exactly one spelling: parse.c reads it back to an equal
 * graph and printing that gives the same bytes (the round-trip tests).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/text.h"

/* Same double, bit for bit as far as text can tell (-0.0 differs from 0.0,
 * every NaN is one value). */
static bool float_same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

char *evtc_float_str(double x, char *buf, size_t cap) {
  if (isnan(x)) {
    snprintf(buf, cap, "nan");
    return buf;
  }
  if (isinf(x)) {
    snprintf(buf, cap, x < 0 ? "-inf" : "inf");
    return buf;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, x);
    if (float_same(strtod(buf, NULL), x)) break;
  }
  /* "1e+02" reads worse than "100.0": whole numbers print plainly when short. */
  if (strchr(buf, 'e') && fabs(x) < 1e16 && x == trunc(x)) snprintf(buf, cap, "%.0f", x);
  if (!strpbrk(buf, ".e")) {
    size_t len = strlen(buf);
    if (len + 3 <= cap) memcpy(buf + len, ".0", 3);
  }
  return buf;
}

bool evtc_name_is_valid(const char *s) {
  if (!s || !*s) return false;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  }
  return true;
}

/* True when attribute value a equals spec s's default (so it is not printed).
 * Required attributes have no default and are always printed. */
static bool attr_is_default(const evtc_attr_spec *s, const evtc_attr *a) {
  if (s->required) return false;
  switch (s->kind) {
    case EVTC_ATTR_INT:
    case EVTC_ATTR_DTYPE: return a->v.i == s->def_i;
    case EVTC_ATTR_FLOAT: return float_same(a->v.f, s->def_f);
    case EVTC_ATTR_STR: return strcmp(a->v.s, s->def_s ? s->def_s : "") == 0;
    case EVTC_ATTR_INTS:
    case EVTC_ATTR_FLOATS: return a->n == 0;
  }
  return false;
}

static void print_value(const evtc_attr *a, FILE *out) {
  char buf[40];
  switch (a->kind) {
    case EVTC_ATTR_INT: fprintf(out, "%lld", (long long)a->v.i); break;
    case EVTC_ATTR_FLOAT: fputs(evtc_float_str(a->v.f, buf, sizeof buf), out); break;
    case EVTC_ATTR_DTYPE: fputs(evtc_dtype_name((evtc_dtype)a->v.i), out); break;
    case EVTC_ATTR_STR: fprintf(out, "\"%s\"", a->v.s); break;
    case EVTC_ATTR_INTS:
      fputc('[', out);
      for (int i = 0; i < a->n; i++) fprintf(out, i ? ",%lld" : "%lld", (long long)a->v.ints[i]);
      fputc(']', out);
      break;
    case EVTC_ATTR_FLOATS:
      fputc('[', out);
      for (int i = 0; i < a->n; i++) {
        if (i) fputc(',', out);
        fputs(evtc_float_str(a->v.floats[i], buf, sizeof buf), out);
      }
      fputc(']', out);
      break;
  }
}

static void print_node(const evtc_node *n, FILE *out) {
  const evtc_op_info *info = evtc_op_get(n->op);
  fprintf(out, "  %%%s = %s(", n->name, info->name);
  for (int i = 0; i < n->n_inputs; i++) fprintf(out, i ? ", %%%s" : "%%%s", n->inputs[i]->name);
  fputc(')', out);
  bool open = false;
  for (int k = 0; k < info->n_attrs; k++) {
    if (attr_is_default(&info->attrs[k], &n->attrs[k])) continue;
    fputs(open ? ", " : " {", out);
    open = true;
    fprintf(out, "%s=", info->attrs[k].name);
    print_value(&n->attrs[k], out);
  }
  if (open) fputc('}', out);
  char type[320];
  fprintf(out, " : %s\n", evtc_type_str(&n->type, type, sizeof type));
}

/* A graph name prints bare when it lexes as an identifier, else quoted. */
static bool name_is_ident(const char *s) {
  return evtc_name_is_valid(s) && !(s[0] >= '0' && s[0] <= '9') && s[0] != '.';
}

void evtc_graph_print(const evtc_graph *g, FILE *out) {
  if (name_is_ident(g->name)) fprintf(out, "graph %s {\n", g->name);
  else fprintf(out, "graph \"%s\" {\n", g->name);
  for (int32_t i = 0; i < g->n_nodes; i++) print_node(g->nodes[i], out);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const evtc_output *o = &g->outputs[i];
    if (o->updates) fprintf(out, "  output %%%s -> %%%s\n", o->node->name, o->updates->name);
    else fprintf(out, "  output %%%s\n", o->node->name);
  }
  if (g->loss) fprintf(out, "  loss %%%s\n", g->loss->name);
  fputs("}\n", out);
}

char *evtc_graph_to_string(const evtc_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EVTC_ASSERT(f != NULL);
  evtc_graph_print(g, f);
  fclose(f);
  return buf;
}
