/* cmd_run.c -- `evtc run`: run a model once on inputs from .npy files.
 *
 *   evtc run FILE --input NAME=PATH.npy ... [-o DIR] [--step N] [--seed S] [--grads]
 *            [--backend auto|cuda|cpu|interp] [--partitioner ilp|greedy|none|builtin]
 *            [--gemm evtc|sm80|cublaslt] [model options]
 *
 * Every INPUT of the model must be given; PARAM and STATE leaves take the
 * values the model file brings (ONNX initializers) or else are initialised
 * from their attributes (evtc_init_leaf with --seed), unless given with
 * --input too.  Each file's shape must equal its node's shape;
 * its values are rounded to the node's dtype.  Compiled kernels of --backend
 * (auto: CUDA when a GPU is usable, else CPU; or, with
 * --backend interp, the float64 interpreter) run the graph (--step is the
 * dropout offset; compiled kernels run it after the target's default pass
 * pipeline, as `evtc explain` shows it) and every graph output is written
 * to DIR/<name>.npy; the compiled run's kernels are grouped by --partitioner
 * (runtime/program_plan.h) and their count goes to stderr.  With --grads the joint graph of the loss's gradients
 * runs instead: its outputs add DIR/grad.<param>.npy and "loss: X" is printed;
 * the loss is the model's, the one --loss asks for, or else the mean of
 * squares of the first output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "cli.h"
#include "cli_args.h"
#include "runtime/init.h"
#include "runtime/interp.h"
#include "runtime/npy.h"
#include "runtime/precision.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

static const char run_usage[] =
    "usage: evtc run FILE --input NAME=PATH.npy ... [-o DIR] [--step N] [--seed S] [--grads]\n"
    "                [--backend auto|cuda|cpu|interp] [--partitioner ilp|greedy|none|builtin]\n"
    "                [--gemm evtc|sm80|cublaslt] [model options]\n";

typedef struct run_options {
  const char *model, *out_dir;
  const char **input_specs;    /* "NAME=PATH" strings, n_inputs of them */
  int n_inputs;
  uint64_t step, seed;
  bool grads;
  bool interp;                 /* --backend interp */
  const char *backend;         /* --backend auto|cuda|cpu (default auto) */
  const char *partitioner;     /* --partitioner (default ilp) */
  evtc_cli_model_options model_options;
} run_options;

/* Parses argv into o (input_specs malloc'd); false after printing why. */
static bool parse_options(int argc, char **argv, run_options *o) {
  memset(o, 0, sizeof *o);
  o->out_dir = ".";
  o->input_specs = malloc(sizeof(char *) * (size_t)(argc + 1));
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v;
    int k = evtc_cli_model_option(argc, argv, &i, &o->model_options);
    if (k < 0) return false;
    if (k > 0) continue;
    if (strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v)) return false;
      if (!strchr(v, '=') || v[0] == '=') {
        fprintf(stderr, "evtc: --input: expected NAME=PATH.npy, got '%s'\n", v);
        return false;
      }
      o->input_specs[o->n_inputs++] = v;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &o->out_dir)) return false;
    } else if (strcmp(a, "--step") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_u64(a, v, &o->step)) return false;
    } else if (strcmp(a, "--seed") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_u64(a, v, &o->seed)) return false;
    } else if (strcmp(a, "--backend") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v)) return false;
      if (strcmp(v, "cpu") != 0 && strcmp(v, "interp") != 0 && strcmp(v, "cuda") != 0 && strcmp(v, "auto") != 0) {
        fprintf(stderr, "evtc: --backend: '%s' is not auto, cuda, cpu or interp\n", v);
        return false;
      }
      o->interp = strcmp(v, "interp") == 0;
      o->backend = v;
    } else if (strcmp(a, "--gemm") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_gemm(v)) return false;
    } else if (strcmp(a, "--partitioner") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_partitioner(v)) return false;
      o->partitioner = v;
    } else if (strcmp(a, "--grads") == 0) {
      o->grads = true;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "evtc: run: unknown option '%s'\n%s", a, run_usage);
      return false;
    } else if (!o->model) {
      o->model = a;
    } else {
      fprintf(stderr, "evtc: run: more than one model file ('%s', '%s')\n%s", o->model, a, run_usage);
      return false;
    }
  }
  if (!o->model) {
    fprintf(stderr, "evtc: run: no model file\n%s", run_usage);
    return false;
  }
  return true;
}

/* Loads spec "NAME=PATH" into the buffer of its leaf in g; false after printing why. */
static bool load_input(const evtc_graph *g, const char *spec, double **values) {
  const char *eq = strchr(spec, '=');
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
  const char *path = eq + 1;
  const evtc_node *n = evtc_graph_find(g, name);
  if (!n) {
    fprintf(stderr, "evtc: --input %s: the model has no node %%%s\n", spec, name);
    return false;
  }
  if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) {
    fprintf(stderr, "evtc: --input %s: %%%s is a %s node, not an input, param or state\n", spec, name,
            evtc_op_get(n->op)->name);
    return false;
  }
  if (values[n->id]) {
    fprintf(stderr, "evtc: --input: %%%s given twice\n", name);
    return false;
  }
  evtc_type t;
  double *data;
  evtc_diag d = {0};
  if (evtc_npy_read(path, &t, &data, &d) != EVTC_OK) {
    fprintf(stderr, "evtc: %s\n", d.msg);
    return false;
  }
  bool same = t.rank == n->type.rank;
  for (int i = 0; same && i < t.rank; i++) same = t.shape[i] == n->type.shape[i];
  if (!same) {
    char want[128], got[128];
    fprintf(stderr, "evtc: %s %%%s: expected %s, got %s from %s\n", evtc_op_get(n->op)->name, name,
            evtc_type_str(&n->type, want, sizeof want), evtc_type_str(&t, got, sizeof got), path);
    free(data);
    return false;
  }
  int64_t numel = evtc_type_numel(&t);
  for (int64_t i = 0; i < numel; i++) data[i] = evtc_round_to(n->type.dtype, data[i]);
  values[n->id] = data;
  return true;
}

/* Binds every leaf of g: given values, else the model's weights, else
 * evtc_init_leaf for PARAM/STATE.  A missing INPUT is an error.  values[]
 * gets every buffer (caller frees). */
static bool bind_leaves(const evtc_graph *g, const evtc_weights *weights, evtc_interp *it, double **values,
                        uint64_t seed) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    if (!values[i]) {
      if (n->op == EVTC_OP_INPUT) {
        char t[128];
        fprintf(stderr, "evtc: input %%%s (%s) not given: use --input %s=PATH.npy\n", n->name,
                evtc_type_str(&n->type, t, sizeof t), n->name);
        return false;
      }
      int64_t numel = evtc_type_numel(&n->type), have = 0;
      const double *w = evtc_weights_find(weights, n->name, &have);
      values[i] = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
      if (w && have == numel) memcpy(values[i], w, sizeof(double) * (size_t)numel);
      else evtc_init_leaf(n, values[i], seed);
    }
    evtc_interp_set(it, n, values[i]);
  }
  return true;
}

/* Writes every output k of g (values outs[k]) to DIR/<name>.npy; false after printing why. */
static bool write_outputs(const evtc_graph *g, double *const *outs, const char *dir) {
  if (!evtc_cli_mkdirs(dir)) return false;
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const evtc_node *n = g->outputs[i].node;
    size_t cap = strlen(dir) + strlen(n->name) + 8;
    char *path = malloc(cap);
    snprintf(path, cap, "%s/%s.npy", dir, n->name);
    evtc_type t = evtc_type_make(n->type.dtype, n->type.rank, n->type.shape);
    evtc_diag d = {0};
    evtc_status st = evtc_npy_write(path, &t, outs[i], &d);
    free(path);
    if (st != EVTC_OK) {
      fprintf(stderr, "evtc: %s\n", d.msg);
      return false;
    }
  }
  return true;
}

int evtc_cmd_run(int argc, char **argv) {
  run_options o;
  int rc = EVTC_EXIT_BAD_INPUT;
  evtc_graph *model = NULL, *joint = NULL;
  evtc_weights *weights = NULL;
  const evtc_graph *g = NULL;        /* the graph asked for: model, or joint with --grads */
  evtc_graph *opt = NULL;            /* g after the target's passes: what compiled kernels run */
  double **values = NULL;
  evtc_interp *it = NULL;
  evtc_program *prog = NULL;
  double **outs = NULL;
  if (evtc_cli_help(argc, argv, run_usage)) return EVTC_EXIT_OK;
  if (!parse_options(argc, argv, &o)) goto out;
  if (!(model = evtc_cli_load_model(o.model, &o.model_options, &weights))) goto out;
  if (!evtc_cli_attach_loss(model, &o.model_options, o.grads)) goto out;
  g = model;
  if (o.grads) {
    evtc_optim_config none = {.kind = EVTC_OPTIM_NONE};
    evtc_diag d = {0};
    if (!(joint = evtc_autodiff(model, NULL, 0, &none, &d))) {
      fprintf(stderr, "evtc: %s\n", d.msg);
      goto out;
    }
    g = joint;
  }
  values = calloc((size_t)g->n_nodes + 1, sizeof *values);
  for (int i = 0; i < o.n_inputs; i++)
    if (!load_input(g, o.input_specs[i], values)) goto out;
  it = evtc_interp_new(g);
  if (!bind_leaves(g, weights, it, values, o.seed)) goto out;
  evtc_diag d = {0};
  if (!o.interp) {
    int nk = 0;
    const char *pname = o.partitioner ? o.partitioner : "ilp";
    const evtc_backend *be = evtc_backend_by_name(o.backend ? o.backend : "auto", &d);
    if (be) opt = evtc_program_optimize(g, be, &d);     /* the target's pass pipeline first */
    int32_t *plan = opt ? evtc_program_plan(opt, pname, be, &nk, NULL, &d) : NULL;
    if (d.status == EVTC_OK) prog = evtc_program_new(opt, plan, nk, be, stderr, &d);
    free(plan);
    if (!prog) {
      fprintf(stderr, "evtc: %s\n", d.msg);
      goto out;
    }
    evtc_program_stats ps = evtc_program_get_stats(prog);
    fprintf(stderr, "evtc: %s: %d kernels (%d in the interpreter, %d planned kernels split), partitioner %s\n",
            be->name, ps.kernels, ps.interpreted, ps.splits, pname);
    for (int32_t i = 0; i < g->n_nodes; i++) {
      const evtc_node *leaf = values[i] ? evtc_graph_find(opt, g->nodes[i]->name) : NULL;
      if (leaf) evtc_program_set(prog, leaf, values[i]);
    }
  }
  if (prog ? evtc_program_run(prog, o.step, &d) != EVTC_OK : evtc_interp_run(it, o.step, &d) != EVTC_OK) {
    fprintf(stderr, "evtc: %s\n", d.msg);
    goto out;
  }
  outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
  for (int32_t k = 0; k < g->n_outputs; k++) {
    const evtc_node *n = g->outputs[k].node;
    int64_t numel = evtc_type_numel(&n->type);
    outs[k] = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    if (prog) evtc_program_get(prog, opt->outputs[k].node, outs[k]);
    else memcpy(outs[k], evtc_interp_value(it, n), sizeof(double) * (size_t)numel);
  }
  if (!write_outputs(g, outs, o.out_dir)) goto out;
  if (o.grads) {
    double loss = NAN;
    if (prog) evtc_program_get(prog, opt->loss, &loss);
    else loss = evtc_interp_value(it, g->loss)[0];
    printf("loss: %.9g\n", loss);
  }
  rc = EVTC_EXIT_OK;
out:
  if (values)
    for (int32_t i = 0; i < g->n_nodes; i++) free(values[i]);
  free(values);
  for (int32_t k = 0; outs && k < g->n_outputs; k++) free(outs[k]);
  free(outs);
  evtc_program_free(prog);
  if (it) evtc_interp_free(it);
  evtc_graph_free(opt);
  evtc_graph_free(joint);
  evtc_graph_free(model);
  evtc_weights_free(weights);
  evtc_cli_model_options_free(&o.model_options);
  free(o.input_specs);
  return rc;
}
