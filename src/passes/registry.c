/* registry.c -- every graph pass evtc has, in one fixed order.
 *
 * `evtc opt --list` prints this order; pipelines (pipelines.c) name passes
 * from it.  One entry per line: each pass's own file exports
 * `const evtc_pass evtc_pass_<name>` and appends itself here.
 */
#include <string.h>

#include "passes/pass.h"

extern const evtc_pass evtc_pass_cleanup;
extern const evtc_pass evtc_pass_loss_elimination;
extern const evtc_pass evtc_pass_cse;
extern const evtc_pass evtc_pass_constant_fold;
extern const evtc_pass evtc_pass_dce;
extern const evtc_pass evtc_pass_decompose;
extern const evtc_pass evtc_pass_simplify;
extern const evtc_pass evtc_pass_permute_fold;
extern const evtc_pass evtc_pass_permute_propagate;
extern const evtc_pass evtc_pass_broadcast_canonicalize;
extern const evtc_pass evtc_pass_attention_fuse;
extern const evtc_pass evtc_pass_conv_patchify;
extern const evtc_pass evtc_pass_gemm_pad;
extern const evtc_pass evtc_pass_pad_concat;
extern const evtc_pass evtc_pass_remat;
extern const evtc_pass evtc_pass_grad_factor;

const evtc_pass *const evtc_pass_registry[] = {
    &evtc_pass_cleanup,
    &evtc_pass_loss_elimination,
    &evtc_pass_cse,
    &evtc_pass_constant_fold,
    &evtc_pass_dce,
    &evtc_pass_decompose,
    &evtc_pass_simplify,
    &evtc_pass_permute_fold,
    &evtc_pass_permute_propagate,
    &evtc_pass_broadcast_canonicalize,
    &evtc_pass_attention_fuse,
    &evtc_pass_conv_patchify,
    &evtc_pass_gemm_pad,
    &evtc_pass_pad_concat,
    &evtc_pass_remat,
    &evtc_pass_grad_factor,
};
const int evtc_pass_registry_count = (int)(sizeof evtc_pass_registry / sizeof evtc_pass_registry[0]);

const evtc_pass *evtc_pass_find(const char *name) {
  for (int i = 0; i < evtc_pass_registry_count; i++)
    if (strcmp(evtc_pass_registry[i]->name, name) == 0) return evtc_pass_registry[i];
  return NULL;
}
