/* cpu_emit_gemm.c -- the GEMM template (matmul, batch_matmul, conv2d as an
 * implicit GEMM) with the visitor DAG as its epilogue.
 *
 * Blocking follows the BLIS/GotoBLAS scheme: the output is cut into MC x NC
 * tasks (OpenMP, dynamic schedule: each tile is computed by one thread in a
 * fixed K order, so results do not depend on the schedule); for each KC
 * slice of K a task packs its A block into MR-row micro-panels and its B
 * block into NR-column micro-panels (zero-padded at the edges), then runs
 * an MR x NR register-tile micro-kernel (f32 on AVX-512 or AVX2: intrinsics;
 * otherwise GCC vector extensions).
 * The vector width and MR come from the host's compiler flags through the
 * prelude (AVX-512: 64-byte vectors, MR 12; AVX: 32 bytes, MR 6; otherwise
 * 16 bytes, MR 4) and NR is two vectors.  After the last KC slice the
 * micro-tile, still in L1, goes through the epilogue: the visitor DAG per
 * element, stores included.  When every task reads the same B (a matmul
 * whose B has no batch stride) and its packed copy fits in 256 MiB, B is
 * packed once, all of it, before the tasks (they split the KC x NC blocks),
 * and each task reads its blocks from there: packed per task, B was packed
 * once for every MC row block (22 times for M = 4096).  For conv the B
 * packer gathers the im2col matrix of one image and group on the fly
 * (implicit GEMM: no im2col buffer), with zero padding.  f16 / bf16 operands are widened to float
 * by the packers (LD), so the micro-kernel and the epilogue see f32.
 */
#include <string.h>

#include "backend/cpu/cpu_emit.h"

/* The B packer: B(k, j) of batch bi (stored as st) into bp (t, micro-panels of NR columns); half: whether st is
 * a 2-byte type that LD widens (no plain copies then). */
static void emit_pack_b(evtc_sb *b, const evtc_kernel *k, const char *t, const char *st, bool half) {
  const char *nm = k->name;
  evtc_sb_printf(b, "static void %s_pack_b(const %s *restrict B, int64_t bi, int64_t k0, int64_t kc, int64_t j0, "
                    "int64_t nc, %s *restrict bp) {\n", nm, st, t);
  if (k->kind == EVTC_ML_CONV) {
    const evtc_conv_desc *c = &k->conv;
    int64_t cg = c->c / c->groups;
    evtc_sb_printf(b, "  const int64_t n = bi / %lldLL, g = bi %% %lldLL;\n", (long long)c->groups, (long long)c->groups);
    evtc_sb_printf(b, "  const %s *x = B + (n * %lldLL + g * %lldLL) * %lldLL;\n", st, (long long)c->c, (long long)cg,
                   (long long)(c->h * c->w));
    evtc_sb_printf(b, "  for (int64_t jr = 0; jr < nc; jr += NR)\n    for (int64_t p = 0; p < kc; p++) {\n"
                      "      const int64_t kk = k0 + p, ci = kk / %lldLL, kh = kk / %lldLL %% %lldLL, kw = kk %% %lldLL;\n",
                   (long long)(c->kh * c->kw), (long long)c->kw, (long long)c->kh, (long long)c->kw);
    evtc_sb_printf(b, "      %s *dst = bp + jr * kc + p * NR;\n      for (int64_t jj = 0; jj < NR; jj++) {\n"
                      "        const int64_t j = j0 + jr + jj;\n        %s val = 0;\n        if (jr + jj < nc) {\n",
                   t, t);
    evtc_sb_printf(b, "          const int64_t oh = j / %lldLL, ow = j %% %lldLL;\n", (long long)c->ow, (long long)c->ow);
    evtc_sb_printf(b, "          const int64_t ih = oh * %lldLL - %lldLL + kh * %lldLL, iw = ow * %lldLL - %lldLL + kw * %lldLL;\n",
                   (long long)c->stride[0], (long long)c->pad[0], (long long)c->dil[0], (long long)c->stride[1],
                   (long long)c->pad[1], (long long)c->dil[1]);
    evtc_sb_printf(b, "          if (ih >= 0 && ih < %lldLL && iw >= 0 && iw < %lldLL) val = LD(x[(ci * %lldLL + ih) * %lldLL + iw]);\n"
                      "        }\n        dst[jj] = val;\n      }\n    }\n}\n",
                   (long long)c->h, (long long)c->w, (long long)c->h, (long long)c->w);
    return;
  }
  const evtc_gemm_desc *g = &k->gemm;
  if (g->b_cs == 1) {          /* rows of B contiguous: stream each row once, full 64-byte panel rows */
    evtc_sb_printf(b, "  (void)bi;\n  for (int64_t p = 0; p < kc; p++) {\n"
                      "    const %s *src = B + (k0 + p) * %lldLL + j0;\n    for (int64_t jr = 0; jr < nc; jr += NR) {\n"
                      "      %s *dst = bp + jr * kc + p * NR;\n      const int64_t w = nc - jr < NR ? nc - jr : NR;\n"
                      "      if (w == NR) {\n        %s\n        continue;\n      }\n"
                      "      for (int64_t jj = 0; jj < w; jj++) dst[jj] = LD(src[jr + jj]);\n"
                      "      for (int64_t jj = w; jj < NR; jj++) dst[jj] = 0;\n    }\n  }\n}\n",
                   st, (long long)g->b_rs, t,
                   half ? "for (int jj = 0; jj < NR; jj++) dst[jj] = LD(src[jr + jj]);" : "memcpy(dst, src + jr, sizeof(*dst) * NR);");
    return;
  }
  if (g->b_rs == 1) {          /* B transposed (columns contiguous along k): NR x 8 staging tiles */
    evtc_sb_printf(b, "  (void)bi;\n  for (int64_t jr = 0; jr < nc; jr += NR) {\n    %s *dst = bp + jr * kc;\n"
                      "    const %s *src = B + k0 + (j0 + jr) * %lldLL;\n    const int64_t w = nc - jr < NR ? nc - jr : NR;\n"
                      "    int64_t p = 0;\n    if (w == NR)\n      for (; p + 8 <= kc; p += 8) {\n        %s tile[NR][8];\n"
                      "        for (int jj = 0; jj < NR; jj++) memcpy(tile[jj], src + jj * %lldLL + p, sizeof tile[jj]);\n"
                      "        for (int q = 0; q < 8; q++)\n          for (int jj = 0; jj < NR; jj++) dst[(p + q) * NR + jj] = LD(tile[jj][q]);\n"
                      "      }\n    for (; p < kc; p++)\n"
                      "      for (int64_t jj = 0; jj < NR; jj++) dst[p * NR + jj] = jj < w ? LD(src[jj * %lldLL + p]) : 0;\n  }\n}\n",
                   t, st, (long long)g->b_cs, st, (long long)g->b_cs, (long long)g->b_cs);
    return;
  }
  evtc_sb_printf(b, "  (void)bi;\n  for (int64_t jr = 0; jr < nc; jr += NR)\n    for (int64_t p = 0; p < kc; p++) {\n"
                    "      const %s *src = B + (k0 + p) * %lldLL + (j0 + jr) * %lldLL;\n      %s *dst = bp + jr * kc + p * NR;\n"
                    "      const int64_t w = nc - jr < NR ? nc - jr : NR;\n"
                    "      if (w == NR) {                  /* a constant trip count: vector moves, not rep movs */\n"
                    "        for (int64_t jj = 0; jj < NR; jj++) dst[jj] = LD(src[jj * %lldLL]);\n        continue;\n      }\n"
                    "      for (int64_t jj = 0; jj < w; jj++) dst[jj] = LD(src[jj * %lldLL]);\n"
                    "      for (int64_t jj = w; jj < NR; jj++) dst[jj] = 0;\n    }\n}\n",
                 st, (long long)g->b_rs, (long long)g->b_cs, t, (long long)g->b_cs, (long long)g->b_cs);
}

/* The A packer: rows i0.. of A into MR-row micro-panels (k-major).  When
 * A's rows run along k (cs 1), full panels go through an MR x 8 staging
 * tile: each row is read 8 values at a time with vector moves, instead of
 * one value per row and k (a row stride of a power of two puts all MR rows
 * in the same L1 set). */
static void emit_pack_a(evtc_sb *b, const evtc_kernel *k, const char *t, const char *st, bool half) {
  int64_t rs = k->kind == EVTC_ML_CONV ? k->gemm.K : k->gemm.a_rs, cs = k->kind == EVTC_ML_CONV ? 1 : k->gemm.a_cs;
  evtc_sb_printf(b, "static void %s_pack_a(const %s *restrict A, int64_t i0, int64_t mc, int64_t k0, int64_t kc, "
                    "%s *restrict ap) {\n", k->name, st, t);
  if (cs == 1 && rs != 1) {
    evtc_sb_printf(b, "  for (int64_t ir = 0; ir + MR <= mc; ir += MR) {\n    %s *dst = ap + ir * kc;\n"
                      "    const %s *src = A + (i0 + ir) * %lldLL + k0;\n    int64_t p = 0;\n"
                      "    for (; p + 8 <= kc; p += 8) {\n      %s tile[MR][8];\n"
                      "      for (int ii = 0; ii < MR; ii++) memcpy(tile[ii], src + ii * %lldLL + p, sizeof tile[ii]);\n"
                      "      for (int q = 0; q < 8; q++)\n        for (int ii = 0; ii < MR; ii++) dst[(p + q) * MR + ii] = LD(tile[ii][q]);\n"
                      "    }\n    for (; p < kc; p++)\n      for (int ii = 0; ii < MR; ii++) dst[p * MR + ii] = LD(src[ii * %lldLL + p]);\n  }\n"
                      "  const int64_t done = mc / MR * MR;\n  if (done == mc) return;\n  i0 += done;\n  ap += done * kc;\n  mc -= done;\n",
                   t, st, (long long)rs, st, (long long)rs, (long long)rs);
  }
  if (rs == 1 && cs != 1) {     /* A transposed (rows contiguous along m): stream each k row once */
    evtc_sb_printf(b, "  for (int64_t p = 0; p < kc; p++) {\n    const %s *src = A + (k0 + p) * %lldLL + i0;\n"
                      "    for (int64_t ir = 0; ir < mc; ir += MR) {\n      %s *dst = ap + ir * kc + p * MR;\n"
                      "      const int64_t h = mc - ir < MR ? mc - ir : MR;\n"
                      "      if (h == MR) {\n        %s\n        continue;\n      }\n"
                      "      for (int64_t ii = 0; ii < h; ii++) dst[ii] = LD(src[ir + ii]);\n"
                      "      for (int64_t ii = h; ii < MR; ii++) dst[ii] = 0;\n    }\n  }\n}\n",
                   st, (long long)cs, t,
                   half ? "for (int ii = 0; ii < MR; ii++) dst[ii] = LD(src[ir + ii]);" : "memcpy(dst, src + ir, sizeof(*dst) * MR);");
    return;
    return;
  }
  evtc_sb_printf(b, "  for (int64_t ir = 0; ir < mc; ir += MR) {\n    const int64_t h = mc - ir < MR ? mc - ir : MR;\n"
                    "    for (int64_t p = 0; p < kc; p++) {\n      %s *dst = ap + ir * kc + p * MR;\n"
                    "      const %s *src = A + (i0 + ir) * %lldLL + (k0 + p) * %lldLL;\n"
                    "      for (int64_t ii = 0; ii < h; ii++) dst[ii] = LD(src[ii * %lldLL]);\n"
                    "      for (int64_t ii = h; ii < MR; ii++) dst[ii] = 0;\n    }\n  }\n}\n",
                 t, st, (long long)rs, (long long)cs, (long long)rs);
}

/* An f32 micro-kernel in intrinsics for one vector ISA (type vec, intrinsic
 * prefix pre, vw floats a vector): MR x 2 vectors, 2 MR accumulators, two B
 * vectors and one broadcast A value per step -- AVX-512: 12 x 32, 27 of the 32
 * zmm; AVX2 + FMA: 6 x 16, 15 of the 16 ymm.  GCC keeps these in registers;
 * the vector-extension form below it compiled (GCC 12) with spills: on
 * AVX-512 B's two vectors went to the stack and every FMA reloaded one (38
 * loads a k step for 24 FMAs, bound by the load ports, not the FMA units). */
static void emit_micro_intrinsics(evtc_sb *b, const char *vec, const char *pre, int mr, int vw) {
  evtc_sb_printf(b, "  %s c[%d][2];\n  for (int i = 0; i < %d; i++)\n    for (int j = 0; j < 2; j++)\n"
                    "      c[i][j] = first ? %s_setzero_ps() : %s_load_ps(ct + i * %d + j * %d);\n"
                    "  for (int64_t p = 0; p < kc; p++) {\n"
                    "    const %s b0 = %s_load_ps(bp + p * %d), b1 = %s_load_ps(bp + p * %d + %d);\n"
                    "    const float *a = ap + p * %d;\n    _mm_prefetch((const char *)(a + %d), _MM_HINT_T0);\n",
                 vec, mr, mr, pre, pre, 2 * vw, vw, vec, pre, 2 * vw, pre, 2 * vw, vw, mr, 8 * mr);
  for (int i = 0; i < mr; i++)
    evtc_sb_printf(b, "    { const %s av = %s_set1_ps(a[%d]); c[%d][0] = %s_fmadd_ps(av, b0, c[%d][0]); "
                      "c[%d][1] = %s_fmadd_ps(av, b1, c[%d][1]); }\n", vec, pre, i, i, pre, i, i, pre, i);
  evtc_sb_printf(b, "  }\n  for (int i = 0; i < %d; i++)\n    for (int j = 0; j < 2; j++) %s_store_ps(ct + i * %d + j * %d, c[i][j]);\n",
                 mr, pre, 2 * vw, vw);
}

/* The micro-kernel: ct[MR][NR] (+)= ap panel x bp panel, with one named
 * accumulator per register (an array would be spilled to the stack), for
 * each MR the prelude may choose. */
static void emit_micro(evtc_sb *b, const evtc_kernel *k, const char *t) {
  static const int mrs[] = {12, 6, 4};
  evtc_sb_printf(b, "static inline void %s_micro(int64_t kc, const %s *restrict ap, const %s *restrict bp, "
                    "%s *restrict ct, int first) {\n", k->name, t, t, t);
  if (strcmp(t, "float") == 0) {
    evtc_sb_printf(b, "#if EVTC_AVX512_F32\n");
    emit_micro_intrinsics(b, "__m512", "_mm512", 12, 16);
    evtc_sb_printf(b, "#elif EVTC_AVX2_F32\n");
    emit_micro_intrinsics(b, "__m256", "_mm256", 6, 8);
    evtc_sb_printf(b, "#el");
  } else {
    evtc_sb_printf(b, "#");
  }
  for (int m = 0; m < 3; m++) {
    int mr = mrs[m];
    evtc_sb_printf(b, "%s EVTC_MR == %d\n", m == 0 ? "if" : "#elif", mr);
    for (int i = 0; i < mr; i++)
      evtc_sb_printf(b, "  vT c%d_0 = first ? (vT){0} : *(const vT *)(ct + %d * NR), "
                        "c%d_1 = first ? (vT){0} : *(const vT *)(ct + %d * NR + VW);\n", i, i, i, i);
    evtc_sb_printf(b, "  for (int64_t p = 0; p < kc; p++) {\n"
                      "    const vT b0 = *(const vT *)(bp + p * NR), b1 = *(const vT *)(bp + p * NR + VW);\n"
                      "    const %s *a = ap + p * MR;\n", t);
    for (int i = 0; i < mr; i++) evtc_sb_printf(b, "    c%d_0 += a[%d] * b0; c%d_1 += a[%d] * b1;\n", i, i, i, i);
    evtc_sb_printf(b, "  }\n");
    for (int i = 0; i < mr; i++)
      evtc_sb_printf(b, "  *(vT *)(ct + %d * NR) = c%d_0; *(vT *)(ct + %d * NR + VW) = c%d_1;\n", i, i, i, i);
  }
  evtc_sb_printf(b, "#endif\n}\n");
}

/* The epilogue over one micro-tile ct (mr x nr valid) at domain row r0, column c0; column
 * vectors are recomputed per element (cheap next to the tile's K loop). */
static void emit_epilogue(evtc_sb *b, const evtc_kernel *k) {
  evtc_sb_printf(b, "          for (int64_t ii = 0; ii < mr; ii++) {\n            const int64_t r = r0 + ii;\n");
  evtc_sb_printf(b, "            #pragma omp simd\n            for (int64_t jj = 0; jj < nr; jj++) {\n              const int64_t c = c0 + jj;\n");
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = "              ", .acc_expr = "ct[ii * NR + jj]"};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_SCALAR && v->kind != EVTC_V_STORE) continue;   /* computed once, before the tiles */
    if (v->kind == EVTC_V_STORE) evtc_cpu_emit_store(&x, i);
    else evtc_cpu_emit_value(&x, i);
  }
  evtc_sb_printf(b, "            }\n          }\n");
}

/* Element offset of batch bi's operand (a: true) for matmul / conv. */
static void emit_batch_offsets(evtc_sb *b, const evtc_kernel *k) {
  if (k->kind == EVTC_ML_CONV) {
    int64_t mg = k->gemm.M;
    evtc_sb_printf(b, "      const int64_t aoff = (bi %% %lldLL) * %lldLL, boff = 0;\n", (long long)k->conv.groups,
                   (long long)(mg * k->gemm.K));
    return;
  }
  const evtc_gemm_desc *g = &k->gemm;
  evtc_sb_printf(b, "      int64_t aoff = 0, boff = 0, rest = bi;\n      (void)rest;\n");
  for (int d = g->batch_rank - 1; d >= 0; d--)
    evtc_sb_printf(b, "      { const int64_t ix = rest %% %lldLL; rest /= %lldLL; aoff += ix * %lldLL; boff += ix * %lldLL; }\n",
                   (long long)g->batch_shape[d], (long long)g->batch_shape[d], (long long)g->a_bstride[d],
                   (long long)g->b_bstride[d]);
}

void evtc_cpu_emit_gemm(evtc_sb *b, const evtc_kernel *k) {
  const evtc_gemm_desc *g = &k->gemm;
  const bool half = g->dtype == EVTC_F16 || g->dtype == EVTC_BF16;
  const char *t = evtc_cpu_ctype(g->dtype), *st = evtc_cpu_storage_ctype(g->dtype);
  evtc_sb_printf(b, "#define VW (EVTC_VB / (int)sizeof(%s))\n#define NR (2 * VW)\n#define MR EVTC_MR\n", t);
  evtc_sb_printf(b, "#define LD(x) %s\n", g->dtype == EVTC_F16 ? "evtc_h2f(x)" : g->dtype == EVTC_BF16 ? "evtc_bf2f(x)" : "(x)");
  evtc_sb_printf(b, "typedef %s %s_vT __attribute__((vector_size(EVTC_VB)));\n#define vT %s_vT\n", t, k->name, k->name);
  emit_pack_a(b, k, t, st, half);
  emit_pack_b(b, k, t, st, half);
  emit_micro(b, k, t);
  int a_arg = k->kind == EVTC_ML_CONV ? k->conv.w_arg : g->a_arg, b_arg = k->kind == EVTC_ML_CONV ? k->conv.x_arg : g->b_arg;
  bool shared_b = k->kind != EVTC_ML_CONV;    /* every task reads the same B: packed once (the file's comment) */
  for (int d = 0; d < g->batch_rank && shared_b; d++) shared_b = g->b_bstride[d] == 0 || g->batch_shape[d] == 1;
  evtc_sb_printf(b, "void %s(void *const *args, uint64_t step, int *err) {\n", k->name);
  evtc_cpu_emit_args(b, k);
  evtc_sb_printf(b, "  (void)step; (void)err;\n  const int64_t M = %lldLL, N = %lldLL, K = %lldLL, BATCH = %lldLL, CC = %lldLL;\n",
                 (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->batch, (long long)k->cols);
  evtc_sb_printf(b, "  const int64_t MC = (%lldLL + MR - 1) / MR * MR, NC = (%lldLL + NR - 1) / NR * NR, KC = %lldLL;\n",
                 (long long)k->sched.mc, (long long)k->sched.nc, (long long)k->sched.kc);
  evtc_sb_printf(b, "  const int64_t mblocks = (M + MC - 1) / MC, nblocks = (N + NC - 1) / NC, ntasks = BATCH * mblocks * nblocks;\n");
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  "};
  for (int i = 0; i < k->n_v; i++)
    if (k->v[i].cls == EVTC_VC_SCALAR && k->v[i].kind != EVTC_V_STORE) evtc_cpu_emit_value(&top, i);
  /* buffers sized to the blocks this GEMM uses (small GEMMs allocate little) */
  evtc_sb_printf(b, "  const int64_t MCu = M < MC ? (M + MR - 1) / MR * MR : MC, NCu = N < NC ? (N + NR - 1) / NR * NR : NC,"
                    " KCu = K < KC ? (K > 0 ? K : 1) : KC, kend = K > 0 ? K : 1;\n");
  if (shared_b)   /* block (jb, k0) of the packed B at (jb * kend + k0) * NCu: each slice's panels as pack_b lays them */
    evtc_sb_printf(b, "  const size_t bfull_bytes = (size_t)(nblocks * kend * NCu) * sizeof(%s);\n"
                      "  %s *const bfull = bfull_bytes <= ((size_t)256 << 20) ? aligned_alloc(64, (bfull_bytes + 127) / 64 * 64) : NULL;\n",
                   t, t);
  else
    evtc_sb_printf(b, "  %s *const bfull = NULL;   /* B differs between tasks (conv's images, batched B): packed per task */\n", t);
  evtc_sb_printf(b, "  #pragma omp parallel if (ntasks > 1 && M * N * K > 65536)\n  {\n");
  if (shared_b)
    evtc_sb_printf(b, "    if (bfull) {\n      const int64_t slices = (kend + KC - 1) / KC;\n"
                      "      #pragma omp for schedule(dynamic)\n      for (int64_t q = 0; q < nblocks * slices; q++) {\n"
                      "        const int64_t jb = q / slices, k0 = q %% slices * KC, j0 = jb * NC;\n"
                      "        %s_pack_b(a%d, 0, k0, K - k0 < KC ? K - k0 : KC, j0, N - j0 < NC ? N - j0 : NC, bfull + (jb * kend + k0) * NCu);\n"
                      "      }\n    }\n", k->name, b_arg);
  evtc_sb_printf(b, "    %s *apack = aligned_alloc(64, ((size_t)(MCu * KCu) * sizeof(%s) + 127) / 64 * 64);\n", t, t);
  evtc_sb_printf(b, "    %s *bpack = bfull ? NULL : aligned_alloc(64, ((size_t)(KCu * NCu) * sizeof(%s) + 127) / 64 * 64);\n", t, t);
  evtc_sb_printf(b, "    %s *cbuf = aligned_alloc(64, ((size_t)(MCu * NCu) * sizeof(%s) + 127) / 64 * 64);\n", t, t);
  evtc_sb_printf(b, "    #pragma omp for schedule(dynamic)\n    for (int64_t task = 0; task < ntasks; task++) {\n"
                    "      const int64_t bi = task / (mblocks * nblocks), ib = task / nblocks %% mblocks, jb = task %% nblocks;\n"
                    "      const int64_t i0 = ib * MC, j0 = jb * NC, mc = M - i0 < MC ? M - i0 : MC, nc = N - j0 < NC ? N - j0 : NC;\n");
  emit_batch_offsets(b, k);
  evtc_sb_printf(b, "      for (int64_t k0 = 0; k0 < kend; k0 += KC) {\n"
                    "        const int64_t kc = K - k0 < KC ? K - k0 : KC;\n"
                    "        const %s *const bp = bfull ? bfull + (jb * kend + k0) * NCu : bpack;\n"
                    "        if (!bfull) %s_pack_b(a%d + boff, bi, k0, kc, j0, nc, bpack);\n"
                    "        %s_pack_a(a%d + aoff, i0, mc, k0, kc, apack);\n"
                    "        for (int64_t jr = 0; jr < nc; jr += NR)\n          for (int64_t ir = 0; ir < mc; ir += MR) {\n"
                    "          %s *ct = cbuf + ((ir / MR) * (NCu / NR) + jr / NR) * (MR * NR);\n"
                    "          %s_micro(kc, apack + ir * kc, bp + jr * kc, ct, k0 == 0);\n"
                    "          if (k0 + KC < K) continue;\n"
                    "          const int64_t r0 = bi * M + i0 + ir, c0 = j0 + jr;\n"
                    "          const int64_t mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;\n",
                 t, k->name, b_arg, k->name, a_arg, t, k->name);
  emit_epilogue(b, k);
  evtc_sb_printf(b, "        }\n      }\n    }\n    free(apack);\n    free(bpack);\n    free(cbuf);\n  }\n  free(bfull);\n}\n");
  evtc_sb_printf(b, "#undef VW\n#undef NR\n#undef MR\n#undef LD\n#undef vT\n\n");
}
