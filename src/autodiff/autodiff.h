/* autodiff.h -- reverse-mode differentiation, loss attachment and optimizer
 * updates, all as graph construction.
 *
 * evtc_autodiff takes a forward graph with a loss and returns a new joint
 * graph: a clone of the forward graph, then the backward nodes (one
 * vector-Jacobian rule per op, rules*.c) with every forward activation they
 * need as an explicit edge, then either the gradients as outputs or the
 * optimizer's update ops (optim.c) with their state as STATE leaves.  The
 * forward graph is not modified.  Errors are recorded in the caller's diag;
 * the functions return NULL then.
 */
#ifndef EVTC_AUTODIFF_H
#define EVTC_AUTODIFF_H

#include "ir/ir.h"

typedef enum evtc_optimizer { EVTC_OPTIM_NONE, EVTC_OPTIM_SGD, EVTC_OPTIM_ADAMW } evtc_optimizer;

/* Hyper-parameters; fields an optimizer does not use are ignored.
 * SGD: momentum buffer starts at zero (identical to PyTorch with
 * dampening 0, whose first step sets buf = g), weight decay added to the
 * gradient.  AdamW: decoupled weight decay, bias-corrected moments. */
typedef struct evtc_optim_config {
  evtc_optimizer kind;
  double lr, momentum, weight_decay, beta1, beta2, eps;
} evtc_optim_config;

/* Defaults: sgd lr 0.1, momentum 0.9, wd 0; adamw lr 1e-3, betas 0.9 0.999,
 * eps 1e-8, wd 0.01; none: all zero. */
evtc_optim_config evtc_optim_default(evtc_optimizer kind);

/* Builds the joint graph of fwd (which must have a scalar float loss).
 * wrt: names of PARAM or INPUT float nodes to differentiate with respect
 * to; NULL (n_wrt ignored) = every float PARAM.  opt NULL means NONE.
 *   NONE: one output per wrt node, its gradient, a node named "grad.<name>"
 *         (a zero CONST when the loss does not depend on it).
 *   SGD/ADAMW: (wrt must be PARAMs) update ops; STATE leaves "<p>.momentum"
 *         (SGD, momentum > 0), "<p>.m", "<p>.v", "adamw.step" (AdamW, all
 *         init zeros); outputs "<p>.next -> %<p>" and "<s>.next -> %<s>"
 *         for every state s.
 * The caller frees the result with evtc_graph_free. */
evtc_graph *evtc_autodiff(const evtc_graph *fwd, const char *const *wrt, int n_wrt,
                          const evtc_optim_config *opt, evtc_diag *d);

/* Adds a loss node named "loss" to g, sets g->loss and adds it as an output.
 * kind: "cross_entropy" (pred [N,C] float, labels [N] int; pred [...,C] with
 * labels [...] is reshaped to those rows first), "mse" (labels
 * float, pred's shape) or "mean_square" (labels NULL: mean of pred^2).
 * Returns the loss node, or NULL with the cause in d. */
evtc_node *evtc_loss_attach(evtc_graph *g, const char *kind, evtc_node *pred, evtc_node *labels,
                            evtc_diag *d);

#endif
