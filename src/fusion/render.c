/* render.c -- a partition as text, Graphviz dot and a self-contained HTML
 * page (`evtc explain`).
 *
 * Text: one line per kernel (id, kind, node count, modelled bytes and time,
 * nucleus, nodes), then the summary lines.  Dot: kernels are clusters;
 * leaves and recomputed scalars stand outside.  HTML: the SVG that `dot`
 * made from the dot text, inline, and a table of kernels sortable by any
 * column (a few lines of inline JavaScript).  All output is deterministic:
 * it depends on the graph and the plan only (the ILP's solve time aside).
 */
#include <string.h>

#include "fusion/partition.h"

void evtc_partition_print_kernels(const evtc_partition *p, FILE *out) {
  const evtc_graph *g = p->g;
  for (int32_t k = 0; k < p->n_kernels; k++) {
    const evtc_fusion_kernel *K = &p->kernels[k];
    fprintf(out, "kernel %d %s nodes=%d bytes=%.0f time_us=%.3f", k, evtc_kernel_kind_name(K->kind), K->n_nodes,
            K->bytes, K->time_us);
    if (K->nucleus >= 0) fprintf(out, " nucleus=%%%s", g->nodes[K->nucleus]->name);
    fprintf(out, ":");
    for (int32_t i = 0; i < K->n_nodes; i++) fprintf(out, " %%%s", g->nodes[K->nodes[i]]->name);
    fprintf(out, "\n");
  }
}

void evtc_partition_print_summary(const evtc_partition *p, FILE *out) {
  fprintf(out, "kernels: %d modelled_us: %.3f bytes: %.0f (%s)\n", p->n_kernels, p->time_us, p->bytes,
          p->partitioner ? p->partitioner : "?");
  if (!p->partitioner || strcmp(p->partitioner, "ilp") != 0) return;
  const evtc_ilp_report *r = &p->ilp;
  fprintf(out, "ilp: components=%d objective=%.3f bound=%.3f gap=%.6f time=%.3f s\n", r->components, r->objective,
          r->bound, r->gap, r->seconds);
  fprintf(out, "ilp-detail: candidates=%ld cuts=%d solves=%d enumerate=%.3f s max_solve=%.3f s\n", r->candidates,
          r->cuts, r->solved, r->enum_seconds, r->max_solve_seconds);
  if (r->fallback)
    fprintf(out, "ilp: WARNING: %s; the plan is the best feasible one found, NOT a proven optimum\n", r->note);
  if (r->truncated)
    fprintf(out, "ilp: note: a component hit the candidate budget; optimal over the candidates enumerated\n");
}

static const char *const fill_colors[] = {"#dbe8fb", "#fde9cf", "#e1f3dd", "#eeeeee"};

/* "%name\nop f32[..]" as a dot label. */
static void node_label(const evtc_node *n, FILE *out) {
  char t[128];
  fprintf(out, "\"%%%s\\n%s %s\"", n->name, evtc_op_get(n->op)->name, evtc_type_str(&n->type, t, sizeof t));
}

void evtc_partition_print_dot(const evtc_partition *p, FILE *out) {
  const evtc_graph *g = p->g;
  fprintf(out, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontsize=9, fontname=\"Helvetica\"];\n",
          g->name ? g->name : "graph");
  for (int32_t k = 0; k < p->n_kernels; k++) {
    const evtc_fusion_kernel *K = &p->kernels[k];
    fprintf(out, "  subgraph cluster_k%d {\n    label=\"k%d %s  %.3f us  %.0f B\"; style=filled; fillcolor=\"%s\";\n",
            k, k, evtc_kernel_kind_name(K->kind), K->time_us, K->bytes, fill_colors[K->kind]);
    for (int32_t i = 0; i < K->n_nodes; i++) {
      fprintf(out, "    n%d [label=", K->nodes[i]);
      node_label(g->nodes[K->nodes[i]], out);
      fprintf(out, "];\n");
    }
    fprintf(out, "  }\n");
  }
  for (int32_t v = 0; v < g->n_nodes; v++) {
    if (p->kernel_of[v] >= 0) continue;
    fprintf(out, "  n%d [shape=ellipse, style=dashed, label=", v);
    node_label(g->nodes[v], out);
    fprintf(out, "];\n");
  }
  for (int32_t v = 0; v < g->n_nodes; v++) {
    const evtc_node *n = g->nodes[v];
    for (int32_t i = 0; i < n->n_inputs; i++) {
      bool dup = false;
      for (int32_t j = 0; j < i; j++) dup |= n->inputs[j] == n->inputs[i];
      if (!dup) fprintf(out, "  n%d -> n%d;\n", n->inputs[i]->id, v);
    }
  }
  fprintf(out, "}\n");
}

void evtc_partition_print_html(const evtc_partition *p, const char *svg, FILE *out) {
  const evtc_graph *g = p->g;
  const char *name = g->name ? g->name : "graph";
  fprintf(out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>evtc explain %s</title>\n", name);
  fprintf(out, "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
               "td,th{border:1px solid #bbb;padding:2px 6px;font-size:12px}th{cursor:pointer;background:#eee}"
               "td.n{text-align:right}.svg{overflow:auto;border:1px solid #ddd}</style></head><body>\n");
  fprintf(out, "<h1>%s: %s partition</h1>\n<pre>", name, p->partitioner ? p->partitioner : "?");
  evtc_partition_print_summary(p, out);
  fprintf(out, "</pre>\n");
  if (svg) {
    const char *s = strstr(svg, "<svg");
    fprintf(out, "<div class=\"svg\">%s</div>\n", s ? s : svg);
  }
  fprintf(out, "<table id=\"kernels\"><thead><tr><th>kernel</th><th>kind</th><th>nodes</th><th>bytes</th>"
               "<th>time_us</th><th>members</th></tr></thead><tbody>\n");
  for (int32_t k = 0; k < p->n_kernels; k++) {
    const evtc_fusion_kernel *K = &p->kernels[k];
    fprintf(out, "<tr><td class=\"n\">%d</td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%.0f</td>"
                 "<td class=\"n\">%.3f</td><td>", k, evtc_kernel_kind_name(K->kind), K->n_nodes, K->bytes, K->time_us);
    for (int32_t i = 0; i < K->n_nodes; i++) fprintf(out, "%s%%%s", i ? " " : "", g->nodes[K->nodes[i]]->name);
    fprintf(out, "</td></tr>\n");
  }
  fprintf(out, "</tbody></table>\n<script>\n"
               "document.querySelectorAll('#kernels th').forEach(function(th, col) {\n"
               "  th.onclick = function() {\n"
               "    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);\n"
               "    var up = th.dataset.up !== '1'; th.dataset.up = up ? '1' : '0';\n"
               "    rows.sort(function(a, b) {\n"
               "      var x = a.cells[col].textContent, y = b.cells[col].textContent, nx = parseFloat(x), ny = parseFloat(y);\n"
               "      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);\n"
               "      return up ? c : -c;\n"
               "    });\n"
               "    rows.forEach(function(r) { body.appendChild(r); });\n"
               "  };\n"
               "});\n</script>\n</body></html>\n");
}
