/* cuda_emit_gemm.c -- the sm_90a GEMM template: config -> CUDA C, and the
 * host side of a launch (TMA descriptors, grid) for both templates; the
 * epilogue hook's loops, which the sm_80 template (cuda_emit_gemm80.c)
 * shares.  See cuda_emit_gemm.h.
 *
 * The pipeline.  A CTA has 1 + C warpgroups (C = consumers).  Warpgroup 0
 * gives most of its registers away (setmaxnreg.dec) and one of its threads
 * produces: for every tile the CTA owns and every k-block of 64, it waits
 * until ring stage s is empty, announces the stage's byte count on the
 * stage's `full` mbarrier (arrive.expect_tx) and issues the TMA copies of
 * the A and B blocks into the stage; TMA completes the bytes on the same
 * barrier.  Each consumer warpgroup (setmaxnreg.inc) owns tile_m / C rows
 * of the tile as WM = tile_m / (64 C) wgmma atoms of 64 rows x tile_n: it
 * waits on `full`, issues 4 k16 steps of wgmma per atom, commits them as
 * one group, and once the group before it has completed (wait_group 1)
 * each of its warps arrives on that stage's `empty` barrier (count 4 C).
 * Stage and phase advance together in producer and consumers (s wraps at
 * `stages`, flipping the parity); the producer's first pass waits on parity
 * 1, which a fresh barrier reports as complete.  After a tile's last
 * k-block (wait_group 0) the consumers run the epilogue from registers
 * while the producer already fills the ring for their next tile; the
 * built-in store hands D to asynchronous TMA stores through shared memory
 * (emit_epilogue_store), so the consumers start the next tile's main loop
 * while D is still being written.
 *
 * Tiles.  The grid is persistent (min(tiles, SMs) CTAs); CTA x takes tiles
 * x, x + grid, ...  Tile t of batch b = t / (tiles_m tiles_n) is placed by a
 * grouped raster: group_m tile rows form a group walked column by column,
 * so the CTAs in flight read a few A row-panels and B column-panels.
 *
 * Clusters (cfg.cluster_m 2).  The grid is one of clusters of two CTAs (two SMs) walking pairs of vertically
 * adjacent tiles, which share B's block at every k-block: each CTA's producer loads its own A and half of B
 * (cp.async.bulk.tensor .multicast::cluster), which lands at the same offset of both CTAs' stage and completes
 * its bytes on both CTAs' `full` barrier; each producer expects its A's bytes and all of B's.  A stage may be
 * refilled only once both CTAs' consumers have read it, so the `empty` barriers count the warps of both and
 * every consumer warp arrives on its own CTA's and on its partner's (mapa, a remote mbarrier.arrive).  Half of
 * B's L2 reads go (at 128 x 256 tiles a CTA reads 32 KiB a k-block instead of 48).  The two CTAs meet in a
 * cluster barrier after the barriers' init (before any copy may signal the partner's) and before they leave.
 * When the tile rows are odd, the last row's partner tile (rank 1) is a ghost: its producer loads only its half
 * of B and its consumers let the stages pass, taking no part in the epilogue.
 *
 * Split-K (dims.splits > 1; kernels with an epilogue hook).  A GEMM of few tiles over a long K (a weight
 * gradient) walks units of work instead: each tile's k-blocks cut into `splits` shares, the units of one tile on
 * different CTAs; the tile's last unit adds the others' f32 partial tiles from a workspace, in split order, and
 * runs the epilogue (emit_fixup).
 *
 * The split tail (dims.tail_tiles > 0).  4096 tiles on 132 SMs are 31 waves and 4 tiles: the last wave keeps 4
 * SMs busy for a whole tile while 128 wait.  The tail's tiles are then cut into tail_splits units of their
 * k-blocks each, walked after the whole tiles like split-K's units (unit dp_units + v: tail tile v / tail_splits,
 * its share v % tail_splits), so 4 tiles become 16 quarter tiles on 16 SMs; the tile's last unit adds the
 * partial tiles and runs the epilogue (emit_fixup).  2x1 clusters cut their last pairs of tiles the same way,
 * both CTAs on the same k-blocks (the multicast of B needs them), each tile with its own count.  Every SM still
 * starts each of its tiles together with the others, k-block 0 first, so tiles that share A or B panels read
 * them at the same time (a stream-K walk of the last waves instead, each CTA an even share of their k-blocks,
 * cost the H200 4-10 %: bench/RESULTS.md).  The fix-up costs microseconds, so a unit needs enough k-blocks to
 * pay for it (evtc_cuda_gemm_problem.tail_min_kblocks).
 *
 * Pingpong (cfg.pingpong, 2 consumers).  Cooperative consumers split every
 * tile's rows and run its epilogue together while the tensor cores wait.
 * With pingpong each consumer takes every other tile of the CTA, whole
 * (WM = tile_m / 64 atoms), and lets the other's k-blocks pass by in the
 * ring (its stage and phase advance by kblocks); a stage then has one
 * reader warpgroup (empty barrier count 4).  The producer fills the ring in
 * tile order; the consumers also take turns on the tensor cores (named
 * barriers 3 and 4: a warpgroup waits for its turn before its main loop
 * and passes the turn on after it), which is what makes the skip safe: a
 * consumer waits on a stage's `full` barrier only after the other has
 * waited for every phase of its own tile, so the phase it asks for is never
 * one that a parity test would take for an old, completed one.  Each
 * epilogue then overlaps the other consumer's main loop.
 *
 * Shared memory.  The ring starts at the first 1024-byte boundary of the
 * dynamic shared memory (the 128B swizzle repeats every 1024 bytes and TMA
 * and wgmma must agree on where it starts: descriptor base offset 0).
 * Stage s holds A (tile_m x 64 elements, 128 bytes per 64 elements) then B
 * (tile_n x 64); after the ring come two 8 KiB output subtiles per consumer
 * warpgroup (the staged store of D; an epilogue hook's own shared memory,
 * hook_smem, otherwise), then a hook's TMA tile per consumer warpgroup when
 * it asks for one (aux_smem bytes each, 1024-byte aligned like the ring),
 * then the 2 x stages mbarriers and the TMA tiles' own (one each).
 *   K-major operand (A M x K, B N x K): one TMA box {64 (k), rows} lands
 *     row r at byte 128 r, its eight 16-byte chunks permuted by r mod 8
 *     (SWIZZLE_128B).  wgmma descriptor: canonical K-major 128B layout,
 *     ((8,m),(8,2)) : ((64 el, SBO), (1, 8 el)): SBO = 1024 (8 rows of 128
 *     bytes), LBO unused (encoded 1); the k16 step kk starts 32 kk bytes in.
 *   MN-major operand (A K x M, B K x N): boxes {64 (m or n), 64 (k)}, one
 *     per 64-wide panel at 8192 bytes each, k-row j of a panel at 128 j.
 *     Descriptor: canonical MN-major 128B layout, ((8,8,m),(8,k)) :
 *     ((1,8,LBO),(64,SBO)): LBO = 8192 (panel to panel along m/n), SBO =
 *     1024 (8 k-rows); the k16 step kk starts 2048 kk bytes in; the
 *     instruction's imm-trans bit for that operand is 1.
 *   Either way a 64-row atom of A starts 8192 bytes after the previous one.
 * Descriptor bits: [0,14) start >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4,
 * [62,64) swizzle mode (1 = 128B).
 *
 * Accumulators.  m64nNk16 leaves N/2 floats per thread: for 8-column block
 * j, lane l of warp w (in its warpgroup) holds rows 16 w + l/4 (+8) and
 * columns 8 j + 2 (l%4) (+1), as d[4j + 2h + e] for row half h, column e.
 * Only compile-time indices touch acc[][], so it stays in registers.
 *
 * Edges.  TMA fills out-of-bounds box elements with zeros (counting them
 * in the transaction bytes), so k past K adds nothing and rows past M /
 * columns past N hold values the epilogue never stores: the direct store
 * checks bounds, the TMA store clips them (in 16-byte units along a row,
 * hence the direct store for a column-edge tile whose edge is not 16-byte
 * aligned).  MN-major panels that lie wholly outside M or N are not issued
 * (their bytes are not expected either).
 */
#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_emit_gemm_parts.h"

#include <stdio.h>
#include <string.h>

enum { K_BLOCK = 64, ATOM_M = 64, ROW_BYTES = 128, PANEL_BYTES = 64 * 128 };
enum { D_SUBTILE = 64 * 128 };   /* bytes of one staged output subtile: 64 rows x 128 bytes */

evtc_cuda_gemm_config evtc_cuda_gemm_config_default(void) {
  return (evtc_cuda_gemm_config){.tile_m = 128, .tile_n = 256, .tile_k = 64, .stages = 4, .consumers = 2,
                                 .cluster_m = 1, .cluster_n = 1, .group_m = 8};
}

/* On the H200 (gpu_gemm_bench, 2026-12-01) 256x128 s3 reached 296-310 TFLOP/s against 212-243 for 128x128 s4:
 * warps of 32 rows load a B fragment for two mma.sync each, warps of 16 rows for one. */
evtc_cuda_gemm_config evtc_cuda_gemm_config_default_sm80(int smem_optin) {
  evtc_cuda_gemm_config c = {.tile_m = 256, .tile_n = 128, .tile_k = 64, .stages = 3, .consumers = 2,
                             .cluster_m = 1, .cluster_n = 1, .group_m = 8, .sm80 = true};
  if (smem_optin >= (int)evtc_cuda_gemm_smem_bytes(&c)) return c;
  c.tile_m = 128;
  c.stages = 4;
  return c;
}

void evtc_cuda_gemm_config_name(const evtc_cuda_gemm_config *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%dx%dx%d s%d c%d g%d%s%s%s", c->tile_m, c->tile_n, c->tile_k, c->stages, c->consumers, c->group_m,
           c->pingpong ? " pp" : "", c->cluster_m == 2 ? " cl2" : "", c->sm80 ? " sm80" : "");
}

bool evtc_cuda_gemm_config_parse(const char *s, evtc_cuda_gemm_config *c) {
  evtc_cuda_gemm_config r = evtc_cuda_gemm_config_default();
  int used = 0;
  if (sscanf(s, "%dx%dx%d s%d c%d g%d%n", &r.tile_m, &r.tile_n, &r.tile_k, &r.stages, &r.consumers, &r.group_m,
             &used) != 6)
    return false;
  s += used;
  /* then, in this order and each optional: pp, cl2, sm80 */
  static const char *const flags[3] = {"pp", "cl2", "sm80"};
  bool on[3] = {false, false, false};
  for (int f = 0; f < 3; f++) {
    while (*s == ' ') s++;
    const size_t n = strlen(flags[f]);
    if (strncmp(s, flags[f], n) == 0 && (s[n] == ' ' || s[n] == 0)) {
      on[f] = true;
      s += n;
    }
  }
  while (*s == ' ') s++;
  if (*s) return false;
  r.pingpong = on[0];
  r.cluster_m = on[1] ? 2 : 1;
  r.sm80 = on[2];
  *c = r;
  return true;
}

int evtc_cuda_gemm_row_groups(const evtc_cuda_gemm_config *c) { return c->pingpong ? 1 : c->consumers; }

/* 64-row atoms per consumer warpgroup and tile. */
int evtc_cuda_gemm_atoms(const evtc_cuda_gemm_config *c) { return c->tile_m / (ATOM_M * evtc_cuda_gemm_row_groups(c)); }

unsigned evtc_cuda_gemm_threads(const evtc_cuda_gemm_config *c) {
  return 128u * (unsigned)(c->sm80 ? c->consumers : 1 + c->consumers);
}

unsigned evtc_cuda_gemm_stage_bytes(const evtc_cuda_gemm_config *c) { return (unsigned)(c->tile_m + c->tile_n) * ROW_BYTES; }

unsigned evtc_cuda_gemm_smem_bytes(const evtc_cuda_gemm_config *c) {
  if (c->sm80) return (unsigned)c->stages * evtc_cuda_gemm_stage_bytes(c) + (unsigned)c->consumers * EVTC_CUDA_GEMM_HOOK_SMEM;
  return (unsigned)c->stages * evtc_cuda_gemm_stage_bytes(c) + (unsigned)c->consumers * 2 * D_SUBTILE + 16u * (unsigned)c->stages +
         8u + 1024u;   /* the ring, output subtiles, mbarriers, split-K's flags, alignment */
}

unsigned evtc_cuda_gemm_smem_bytes_aux(const evtc_cuda_gemm_config *c, unsigned aux_smem) {
  return evtc_cuda_gemm_smem_bytes(c) + (aux_smem ? (unsigned)c->consumers * (aux_smem + 8u) : 0u);
}

bool evtc_cuda_gemm_config_check(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v, char *why,
                                 size_t cap) {
  if (v->in != EVTC_BF16 && v->in != EVTC_F16) {
    snprintf(why, cap, "input type %s (bf16 or f16 only)", evtc_dtype_name(v->in));
    return false;
  }
  if (v->out != EVTC_F32 && v->out != EVTC_BF16 && v->out != EVTC_F16) {
    snprintf(why, cap, "output type %s (f32, bf16 or f16 only)", evtc_dtype_name(v->out));
    return false;
  }
  if (c->tile_k != K_BLOCK) {
    snprintf(why, cap, "tile_k %d (64 only: one 128-byte swizzle span of 16-bit elements)", c->tile_k);
    return false;
  }
  if (c->consumers < 1 || c->consumers > 2) {
    snprintf(why, cap, "%d consumer warpgroups (1 or 2)", c->consumers);
    return false;
  }
  if (c->pingpong && c->consumers != 2) {
    snprintf(why, cap, "pingpong with %d consumer warpgroup (2 take turns)", c->consumers);
    return false;
  }
  if (c->pingpong && c->sm80) {
    snprintf(why, cap, "pingpong on the sm_80 template (its warpgroups share each tile)");
    return false;
  }
  const int groups = evtc_cuda_gemm_row_groups(c);
  if (c->tile_m < ATOM_M * groups || c->tile_m % (ATOM_M * groups) || c->tile_m > 256) {
    snprintf(why, cap, "tile_m %d (a multiple of 64 x the warpgroups sharing a tile (%d), at most 256)", c->tile_m,
             groups);
    return false;
  }
  if (c->tile_n < 64 || c->tile_n % 64 || c->tile_n > 256) {
    snprintf(why, cap, "tile_n %d (64, 128, 192 or 256: wgmma n <= 256, 64-wide TMA panels)", c->tile_n);
    return false;
  }
  int regs = evtc_cuda_gemm_atoms(c) * c->tile_n / 2;
  if (regs > 128) {
    snprintf(why, cap, "%d accumulator registers per consumer thread (at most 128)", regs);
    return false;
  }
  const int max_stages = c->sm80 ? 8 : 16;   /* sm_80: cp.async groups in flight, counted by an immediate */
  if (c->stages < 2 || c->stages > max_stages) {
    snprintf(why, cap, "%d stages (2 to %d)", c->stages, max_stages);
    return false;
  }
  if (c->cluster_m < 1 || c->cluster_m > 2 || c->cluster_n != 1) {
    snprintf(why, cap, "cluster %dx%d (1x1, or 2x1: two CTAs along M sharing B by TMA multicast)", c->cluster_m,
             c->cluster_n);
    return false;
  }
  if (c->cluster_m > 1 && c->sm80) {
    snprintf(why, cap, "a 2x1 cluster on the sm_80 template (it has no TMA multicast)");
    return false;
  }
  if (c->group_m < 1) {
    snprintf(why, cap, "group_m %d (at least 1)", c->group_m);
    return false;
  }
  if (evtc_cuda_gemm_smem_bytes(c) > EVTC_CUDA_GEMM_SMEM_LIMIT) {
    snprintf(why, cap, "%u bytes of shared memory (at most %d)", evtc_cuda_gemm_smem_bytes(c), EVTC_CUDA_GEMM_SMEM_LIMIT);
    return false;
  }
  return true;
}

/* ---- device helpers, once per module ---- */

void evtc_cuda_emit_gemm_helpers(evtc_sb *b) {
  evtc_sb_printf(b,
    "#ifndef EVTC_GEMM_HELPERS\n#define EVTC_GEMM_HELPERS\n"
    "/* GEMM helpers of both templates (cuda_emit_gemm.c): parameters, tile raster, barriers, epilogue stores */\n"
    "struct __align__(64) evtc_tmap { unsigned long long opaque[16]; };   /* a CUtensorMap */\n"
    "struct evtc_gemm_dims { int M, N, K, batch, tma_store, splits, tail_tiles, tail_splits; long long ldc, c_bstride;\n"
    "                       const unsigned char *a, *b; long long lda, ldb, a_bstride, b_bstride;\n"
    "                       float *split_ws; int *split_cnt; };\n"
    "struct __align__(8) evtc_f32x2 { float x, y; };\n"
    "struct __align__(16) evtc_u32x4 { unsigned x, y, z, w; };\n"
    "__device__ __forceinline__ unsigned evtc_smem_u32(const void *p) {\n"
    "  unsigned a;\n"
    "  asm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %%1; cvt.u32.u64 %%0, t; }\" : \"=r\"(a) : \"l\"(p));\n"
    "  return a;\n"
    "}\n"
    "__device__ __forceinline__ void evtc_wg_sync(unsigned id) { asm volatile(\"bar.sync %%0, 128;\" :: \"r\"(id) : \"memory\"); }\n"
    "/* Grouped raster: tile t -> batch, first row, first column. */\n"
    "__device__ __forceinline__ void evtc_gemm_tile(int t, int tiles_m, int tiles_n, int group_m, int tm, int tn,\n"
    "                                               int *bat, int *m0, int *n0) {\n"
    "  const int per = tiles_m * tiles_n, b = t / per, rem = t - b * per;\n"
    "  const int span = group_m * tiles_n, g = rem / span, first = g * group_m;\n"
    "  const int gm = tiles_m - first < group_m ? tiles_m - first : group_m, in = rem - g * span;\n"
    "  *bat = b;\n  *m0 = (first + in %% gm) * tm;\n  *n0 = (in / gm) * tn;\n"
    "}\n"
    "/* Epilogue stores of one or two adjacent elements (cvt.rn: round to nearest even). */\n"
    "__device__ __forceinline__ void evtc_st1_f32(char *p, float v) { *(float *)p = v; }\n"
    "__device__ __forceinline__ void evtc_st2_f32(char *p, float v0, float v1) {\n"
    "  evtc_f32x2 t; t.x = v0; t.y = v1; *(evtc_f32x2 *)p = t;\n"
    "}\n"
    "__device__ __forceinline__ void evtc_sts2_f32(unsigned a, float v0, float v1) {\n"
    "  asm volatile(\"st.shared.v2.f32 [%%0], {%%1, %%2};\" :: \"r\"(a), \"f\"(v0), \"f\"(v1) : \"memory\");\n"
    "}\n");
  static const char *const half[2] = {"bf16", "f16"};
  for (int i = 0; i < 2; i++)
    evtc_sb_printf(b,
      "__device__ __forceinline__ void evtc_sts2_%s(unsigned a, float v0, float v1) {\n"
      "  unsigned w;\n  asm(\"cvt.rn.%sx2.f32 %%0, %%1, %%2;\" : \"=r\"(w) : \"f\"(v1), \"f\"(v0));\n"
      "  asm volatile(\"st.shared.b32 [%%0], %%1;\" :: \"r\"(a), \"r\"(w) : \"memory\");\n"
      "}\n"
      "__device__ __forceinline__ void evtc_st1_%s(char *p, float v) {\n"
      "  unsigned short h;\n  asm(\"cvt.rn.%s.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(v));\n  *(unsigned short *)p = h;\n"
      "}\n"
      "__device__ __forceinline__ void evtc_st2_%s(char *p, float v0, float v1) {\n"
      "  unsigned w;\n  asm(\"cvt.rn.%sx2.f32 %%0, %%1, %%2;\" : \"=r\"(w) : \"f\"(v1), \"f\"(v0));   /* v0 low, v1 high */\n"
      "  *(unsigned *)p = w;\n"
      "}\n",
      half[i], half[i], half[i], half[i], half[i], half[i]);
  evtc_sb_printf(b, "#endif\n\n");
}

void evtc_cuda_emit_sm90_helpers(evtc_sb *b) {
  evtc_cuda_emit_gemm_helpers(b);
  evtc_cuda_emit_cluster_helpers(b);
  evtc_sb_printf(b,
    "#ifndef EVTC_SM90_GEMM_HELPERS\n#define EVTC_SM90_GEMM_HELPERS\n"
    "/* sm_90a GEMM helpers (cuda_emit_gemm.c): TMA, mbarriers, wgmma descriptors */\n"
    "__device__ __forceinline__ void evtc_mbar_init(unsigned bar, unsigned count) {\n"
    "  asm volatile(\"mbarrier.init.shared::cta.b64 [%%0], %%1;\" :: \"r\"(bar), \"r\"(count) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void evtc_mbar_expect_tx(unsigned bar, unsigned bytes) {\n"
    "  asm volatile(\"{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%%0], %%1; }\"\n"
    "               :: \"r\"(bar), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void evtc_mbar_arrive(unsigned bar) {\n"
    "  asm volatile(\"{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%%0]; }\" :: \"r\"(bar) : \"memory\");\n"
    "}\n"
    "/* Waits until the phase of `parity` completed; traps after 2^26 polls (a hang, not a slow GPU).  The loop is\n"
    " * inside the asm: a C loop would be a divergent path to ptxas, which then serialises the wgmma pipeline. */\n"
    "__device__ __forceinline__ void evtc_mbar_wait(unsigned bar, unsigned parity) {\n"
    "  asm volatile(\"{ .reg .pred p; .reg .u32 n; mov.u32 n, 0;\\n\"\n"
    "               \"EVTC_WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [%%0], %%1;\\n\"\n"
    "               \"@p bra EVTC_DONE;\\nadd.u32 n, n, 1;\\nsetp.lt.u32 p, n, 67108864;\\n@p bra EVTC_WAIT;\\ntrap;\\n\"\n"
    "               \"EVTC_DONE: }\" :: \"r\"(bar), \"r\"(parity) : \"memory\");\n"
    "}\n"
    "/* TMA: box at coordinates (c0 innermost, c1, c2) of map into shared address dst, bytes completing on bar. */\n"
    "__device__ __forceinline__ void evtc_tma_load(unsigned dst, const evtc_tmap *map, unsigned bar, int c0, int c1,\n"
    "                                              int c2) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes\"\n"
    "               \" [%%0], [%%1, {%%3, %%4, %%5}], [%%2];\"\n"
    "               :: \"r\"(dst), \"l\"(map), \"r\"(bar), \"r\"(c0), \"r\"(c1), \"r\"(c2) : \"memory\");\n"
    "}\n"
    "/* The same box into the shared memory of every CTA of the cluster in mask, at the same offset dst, its bytes\n"
    " * completing on each one's barrier at offset bar. */\n"
    "__device__ __forceinline__ void evtc_tma_load_mc(unsigned dst, const evtc_tmap *map, unsigned bar, int c0, int c1,\n"
    "                                                 int c2, unsigned short mask) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster\"\n"
    "               \" [%%0], [%%1, {%%3, %%4, %%5}], [%%2], %%6;\"\n"
    "               :: \"r\"(dst), \"l\"(map), \"r\"(bar), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"h\"(mask) : \"memory\");\n"
    "}\n"
    "/* Arrives on the mbarrier at offset bar in the shared memory of cluster CTA `rank` (this one's own or another's).\n"
    " * Release at CTA scope (the default): what it says, that wgmma has read a stage, wgmma.wait_group already\n"
    " * ensured; .release.cluster would put a MEMBAR.ALL.GPU before every arrival (SASS), waiting for every store in\n"
    " * flight. */\n"
    "__device__ __forceinline__ void evtc_mbar_arrive_cta(unsigned bar, unsigned rank) {\n"
    "  asm volatile(\"{ .reg .b32 a; mapa.shared::cluster.u32 a, %%0, %%1;\\n\"\n"
    "               \"mbarrier.arrive.shared::cluster.b64 _, [a]; }\" :: \"r\"(bar), \"r\"(rank) : \"memory\");\n"
    "}\n"
    "/* TMA store of the box at (c0, c1, c2) of map from shared address src, as one bulk group. */\n"
    "__device__ __forceinline__ void evtc_tma_store(const evtc_tmap *map, unsigned src, int c0, int c1, int c2) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%%0, {%%2, %%3, %%4}], [%%1];\"\n"
    "               :: \"l\"(map), \"r\"(src), \"r\"(c0), \"r\"(c1), \"r\"(c2) : \"memory\");\n"
    "  asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n"
    "}\n"
    "/* Until at most one bulk store group still reads shared memory; none; until all are done. */\n"
    "__device__ __forceinline__ void evtc_bulk_wait_read1() { asm volatile(\"cp.async.bulk.wait_group.read 1;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_bulk_wait_read0() { asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_bulk_wait_all() { asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\"); }\n"
    "/* Generic-proxy shared-memory writes visible to the async proxy (TMA), then a warpgroup barrier. */\n"
    "__device__ __forceinline__ void evtc_fence_smem_async() { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n"
    "/* Pingpong turns: named barrier id between two warpgroups, one waits (sync), the other signals (arrive). */\n"
    "__device__ __forceinline__ void evtc_turn_wait(unsigned id) { asm volatile(\"bar.sync %%0, 256;\" :: \"r\"(id) : \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_turn_pass(unsigned id) { asm volatile(\"bar.arrive %%0, 256;\" :: \"r\"(id) : \"memory\"); }\n"
    "/* wgmma shared-memory descriptor, 128B swizzle (see cuda_emit_gemm.c). */\n"
    "__device__ __forceinline__ unsigned long long evtc_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {\n"
    "  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |\n"
    "         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);\n"
    "}\n"
    "__device__ __forceinline__ void evtc_wgmma_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_wgmma_commit() {\n"
    "  asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n"
    "}\n"
    "template <int N> __device__ __forceinline__ void evtc_wgmma_wait() {\n"
    "  asm volatile(\"wgmma.wait_group.sync.aligned %%0;\" :: \"n\"(N) : \"memory\");\n"
    "}\n"
    "/* stmatrix .x4: lane 8 j + r gives the shared address of row r of matrix j, register j of lane l holds row l / 4,\n"
    " * columns 2 (l %% 4) and + 1 of matrix j (a visitor epilogue's quad exchange, cuda_emit_evt.c) */\n"
    "__device__ __forceinline__ void evtc_stsm_x4(unsigned a, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {\n"
    "  asm volatile(\"stmatrix.sync.aligned.m8n8.x4.shared.b16 [%%0], {%%1, %%2, %%3, %%4};\" :: \"r\"(a), \"r\"(r0), \"r\"(r1),\n"
    "               \"r\"(r2), \"r\"(r3) : \"memory\");\n"
    "}\n"
    "/* Split-K's and the split tail's fix-up: the cooperative consumers' barrier (both warpgroups); a part's partial\n"
    " * sums into the workspace and back, through L2 only (another SM wrote them); the arrival of a part at its\n"
    " * tile's count: every thread's stores fenced before the part's barrier, after which one thread adds 1 and\n"
    " * learns how many came before. */\n"
    "__device__ __forceinline__ void evtc_consumers_sync() { asm volatile(\"bar.sync 5, 256;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_split_st4(float *p, float x, float y, float z, float w) {\n"
    "  __stcg((float4 *)p, make_float4(x, y, z, w));\n"
    "}\n"
    "__device__ __forceinline__ float4 evtc_split_ld4(const float *p) { return __ldcg((const float4 *)p); }\n"
    "/* no load moves across it: partial tiles read a chunk at a time keep their registers beside the accumulators */\n"
    "__device__ __forceinline__ void evtc_split_order() { asm volatile(\"\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ int evtc_split_arrive(int *cnt) { return atomicAdd(cnt, 1); }\n"
    "#endif\n\n");
}

/* ---- per-kernel pieces ---- */

/* NAME_mma: one wgmma m64nNk16 into d[N/2] (scale-d 1: D += A B), and NAME_pin, which tells the compiler that
 * asm touched every accumulator (it must not move reads or writes of d across the wgmma fences and waits). */
static void emit_mma(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  const int n = c->tile_n, regs = n / 2;
  const char *t = v->in == EVTC_BF16 ? "bf16" : "f16";
  evtc_sb_printf(b, "__device__ __forceinline__ void %s_mma(float (&d)[%d], unsigned long long da, unsigned long long db) {\n",
                 name, regs);
  evtc_sb_printf(b, "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %%%d, 0;\\n\"\n", regs + 2);
  evtc_sb_printf(b, "    \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, t, t);
  for (int i = 0; i < regs; i++) evtc_sb_printf(b, "%s%%%d", i ? ", " : "", i);
  evtc_sb_printf(b, "}, %%%d, %%%d, p, 1, 1, %d, %d; }\"\n    :", regs, regs + 1, v->a_kmajor ? 0 : 1,
                 v->b_kmajor ? 0 : 1);
  for (int i = 0; i < regs; i++) evtc_sb_printf(b, "%s\"+f\"(d[%d])", i ? (i % 8 ? ", " : ",\n      ") : " ", i);
  evtc_sb_printf(b, "\n    : \"l\"(da), \"l\"(db), \"r\"(1));\n}\n");
  evtc_sb_printf(b, "__device__ __forceinline__ void %s_pin(float (&d)[%d]) {\n#pragma unroll\n"
                    "  for (int i = 0; i < %d; i++) asm volatile(\"\" : \"+f\"(d[i]) :: \"memory\");\n}\n",
                 name, regs, regs);
}

/* The persistent walk: its loop head over units of work, and a unit's k-blocks and tile.  Without a cluster a
 * unit is a tile (or a split-K share of one); a 2x1 cluster walks pairs of vertically adjacent tiles, rank r
 * of the pair taking the lower tile (r = 1) or the upper one, group_m / 2 pairs a raster group (the same rows
 * in flight as group_m tiles); the partner of an odd last tile row is a ghost. */
static void emit_walk_head(evtc_sb *b, const evtc_cuda_gemm_config *c, const char *ind, bool turns) {
  if (c->cluster_m == 2)
    evtc_sb_printf(b, "%sfor (int u = (int)(blockIdx.x >> 1)%s; u < walk_units; u += (int)(gridDim.x >> 1)%s) {\n", ind,
                   turns ? ", it = 0" : "", turns ? ", it++" : "");
  else
    evtc_sb_printf(b, "%sfor (int u = blockIdx.x%s; u < walk_units; u += gridDim.x%s) {\n", ind, turns ? ", it = 0" : "",
                   turns ? ", it++" : "");
}

/* Unit u's tile t (a cluster's: its pair of tiles) and k-blocks [kb0, kb1): a whole tile or a split-K share of one,
 * then the split tail's shares. */
static void emit_unit_kblocks(evtc_sb *b, const evtc_cuda_gemm_config *c, const char *ind) {
  const char *unit = c->cluster_m == 2 ? "pair" : "t";
  if (c->cluster_m == 2)
    evtc_sb_printf(b, "%sint pair = u, kb0 = 0, kb1 = kblocks;\n%sif (u >= dp_units) {\n", ind, ind);
  else
    evtc_sb_printf(b,
      "%sint t, kb0, kb1;\n"
      "%sif (u < dp_units)\n"
      "%s  t = u / splits, kb0 = (u - t * splits) * kblocks / splits, kb1 = (u - t * splits + 1) * kblocks / splits;\n"
      "%selse {\n",
      ind, ind, ind, ind);
  evtc_sb_printf(b,
    "%s  const int v = u - dp_units, sh = v %% dims.tail_splits;\n"
    "%s  %s = dp_units + v / dims.tail_splits, kb0 = sh * kblocks / dims.tail_splits, kb1 = (sh + 1) * kblocks / dims.tail_splits;\n"
    "%s}\n",
    ind, ind, unit, ind);
}

static void emit_unit_tile(evtc_sb *b, const evtc_cuda_gemm_config *c, const char *ind) {
  evtc_sb_printf(b, "%sint bat, m0, n0;\n", ind);
  if (c->cluster_m != 2) {
    evtc_sb_printf(b, "%sevtc_gemm_tile(t, tiles_m, tiles_n, %d, %d, %d, &bat, &m0, &n0);\n", ind, c->group_m, c->tile_m,
                   c->tile_n);
    return;
  }
  evtc_sb_printf(b,
    "%sevtc_gemm_tile(pair, (tiles_m + 1) / 2, tiles_n, %d, %d, %d, &bat, &m0, &n0);\n"
    "%sm0 += (int)crank * %d;\n"
    "%sconst bool ghost = m0 >= dims.M;   /* an odd last tile row's partner: loads its half of B, computes nothing */\n"
    "%sconst int t = (bat * tiles_m + m0 / %d) * tiles_n + n0 / %d;\n"
    "%s(void)t;\n",
    ind, c->group_m / 2 > 1 ? c->group_m / 2 : 1, 2 * c->tile_m, c->tile_n, ind, c->tile_m, ind, ind, c->tile_m, c->tile_n,
    ind);
}

/* A consumer warp's release of ring stage `stage` (a C expression): its first lane arrives on the stage's empty
 * barrier; in a 2x1 cluster lanes 0 and 1 arrive on both CTAs' (either producer multicasts into this stage). */
static void emit_release(evtc_sb *b, const evtc_cuda_gemm_config *c, const char *ind, const char *cond, const char *stage) {
  if (c->cluster_m == 2)
    evtc_sb_printf(b, "%sif (%slane < 2) evtc_mbar_arrive_cta(bar0 + 8u * (%d + %s), (unsigned)lane);\n", ind, cond,
                   c->stages, stage);
  else
    evtc_sb_printf(b, "%sif (%slane == 0) evtc_mbar_arrive(bar0 + 8u * (%d + %s));\n", ind, cond, c->stages, stage);
}

/* The producer thread's loop: TMA copies of every k-block of every tile into the ring.  In a 2x1 cluster it
 * loads its own A and its half of B (rows n0 + (tile_n / 2) rank.. of a K-major B, k-rows 32 rank.. of each
 * 64-wide panel of an N-major one), multicast into both CTAs' stage, and expects A's bytes and all of B's. */
static void emit_producer(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  const int S = c->stages;
  const unsigned a_bytes = (unsigned)c->tile_m * ROW_BYTES;
  evtc_sb_printf(b,
    "    if (threadIdx.x == 0) {\n"
    "      unsigned s = 0, ph = 0;\n");
  emit_walk_head(b, c, "      ", false);
  emit_unit_kblocks(b, c, "        ");
  emit_unit_tile(b, c, "        ");
  const bool mc = c->cluster_m == 2;
  const unsigned half_n = (unsigned)c->tile_n / 2;
  /* bytes per stage: whole boxes, skipping MN-major panels (and a cluster's K-major halves of B) wholly past M or
   * N; a ghost's A none */
  if (v->a_kmajor)
    evtc_sb_printf(b, "        unsigned bytes = %s%uu;\n", mc ? "ghost ? 0u : " : "", a_bytes);
  else
    evtc_sb_printf(b, "        const int pa = (dims.M - m0 + 63) / 64;\n"
                      "        unsigned bytes = pa <= 0 ? 0u : (unsigned)(pa < %d ? pa : %d) * %du;\n",
                   c->tile_m / 64, c->tile_m / 64, PANEL_BYTES);
  if (v->b_kmajor && mc)
    evtc_sb_printf(b, "        bytes += (n0 + %u < dims.N ? 2u : 1u) * %uu;\n", half_n, half_n * ROW_BYTES);
  else if (v->b_kmajor)
    evtc_sb_printf(b, "        bytes += %uu;\n", (unsigned)c->tile_n * ROW_BYTES);
  else
    evtc_sb_printf(b, "        const int pb = (dims.N - n0 + 63) / 64;\n"
                      "        bytes += (unsigned)(pb < %d ? pb : %d) * %du;\n",
                   c->tile_n / 64, c->tile_n / 64, PANEL_BYTES);
  evtc_sb_printf(b,
    "        for (int kb = kb0; kb < kb1; kb++) {\n"
    "          evtc_mbar_wait(bar0 + 8u * (%d + s), ph ^ 1u);             /* stage s empty */\n"
    "          const unsigned full = bar0 + 8u * s, sa = ring + s * %uu, sb = sa + %uu;\n"
    "          evtc_mbar_expect_tx(full, bytes);\n",
    S, evtc_cuda_gemm_stage_bytes(c), a_bytes);
  if (v->a_kmajor)
    evtc_sb_printf(b, "          %sevtc_tma_load(sa, &tma_a, full, kb * 64, m0, bat);\n", mc ? "if (!ghost) " : "");
  else
    evtc_sb_printf(b, "#pragma unroll\n"
                      "          for (int p = 0; p < %d; p++)\n"
                      "            if (m0 + 64 * p < dims.M) evtc_tma_load(sa + p * %du, &tma_a, full, m0 + 64 * p, kb * 64, bat);\n",
                   c->tile_m / 64, PANEL_BYTES);
  if (v->b_kmajor && mc)
    evtc_sb_printf(b, "          if (n0 + %u * (int)crank < dims.N)\n"
                      "            evtc_tma_load_mc(sb + crank * %uu, &tma_b, full, kb * 64, n0 + %u * (int)crank, bat, 3);\n",
                   half_n, half_n * ROW_BYTES, half_n);
  else if (v->b_kmajor)
    evtc_sb_printf(b, "          evtc_tma_load(sb, &tma_b, full, kb * 64, n0, bat);\n");
  else if (mc)
    evtc_sb_printf(b, "#pragma unroll\n"
                      "          for (int p = 0; p < %d; p++)\n"
                      "            if (n0 + 64 * p < dims.N)\n"
                      "              evtc_tma_load_mc(sb + p * %du + crank * %du, &tma_b, full, n0 + 64 * p, kb * 64 + 32 * (int)crank, bat, 3);\n",
                   c->tile_n / 64, PANEL_BYTES, PANEL_BYTES / 2);
  else
    evtc_sb_printf(b, "#pragma unroll\n"
                      "          for (int p = 0; p < %d; p++)\n"
                      "            if (n0 + 64 * p < dims.N) evtc_tma_load(sb + p * %du, &tma_b, full, n0 + 64 * p, kb * 64, bat);\n",
                   c->tile_n / 64, PANEL_BYTES);
  evtc_sb_printf(b,
    "          if (++s == %d) { s = 0; ph ^= 1u; }\n"
    "        }\n"
    "      }\n"
    "    }\n",
    S);
}

/* Whether hook epi loads ahead of use (cuda_emit_gemm.h: prefetch_blocks). */
bool evtc_cuda_gemm_prefetches(const evtc_cuda_gemm_epilogue *epi) {
  return epi && epi->emit_element && epi->emit_prefetch && epi->emit_prefetch_begin && epi->prefetch_blocks > 0;
}

void evtc_cuda_gemm_emit_prefetch_first(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi) {
  if (!epi || !epi->emit_element || !epi->emit_prefetch_begin) return;
  evtc_sb_printf(b, "#define EVTC_IN_M(x) ((x) < dims.M)\n#define EVTC_IN_N(x) ((x) < dims.N)\n");
  epi->emit_prefetch_begin(b, "      ", epi->ctx);
  for (int j = 0; evtc_cuda_gemm_prefetches(epi) && j < epi->prefetch_blocks && j < c->tile_n / 8; j++) {
    char jx[16];
    snprintf(jx, sizeof jx, "%d", j);
    epi->emit_prefetch(b, "      ", jx, epi->ctx);
  }
  evtc_sb_printf(b, "#undef EVTC_IN_M\n#undef EVTC_IN_N\n");
}

/* The epilogue hook's loops over a tile: every accumulator element inside the bounds, with r, c, rg (and bat)
 * in scope.  8-column blocks outside (a column's partial over the thread's rows is complete after the rows:
 * the hook's col_end), rows inside, the thread's two adjacent columns innermost (pair_begin / pair_end
 * around them: paired stores; emit_pair, when the hook has it, computes both at once); every lane runs every
 * iteration (warp shuffles in col_end / tile_end need them all).  Bounds are tested through EVTC_IN_M(row) and EVTC_IN_N(column), defined by the caller. */
static void emit_hook_loops(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi) {
  const int wm = evtc_cuda_gemm_atoms(c), nj = c->tile_n / 8;
  evtc_sb_printf(b, "#pragma unroll\n      for (int j = 0; j < %d; j++) {\n", nj);
  if (evtc_cuda_gemm_prefetches(epi) && epi->prefetch_blocks < nj) {
    char jx[32];
    snprintf(jx, sizeof jx, "j + %d", epi->prefetch_blocks);
    evtc_sb_printf(b, "        if (j + %d < %d) {\n", epi->prefetch_blocks, nj);
    epi->emit_prefetch(b, "          ", jx, epi->ctx);
    evtc_sb_printf(b, "        }\n");
  }
  if (epi->emit_col_begin) epi->emit_col_begin(b, "        ", epi->ctx);
  evtc_sb_printf(b,
    "#pragma unroll\n"
    "        for (int i = 0; i < %d; i++) {\n"
    "#pragma unroll\n"
    "          for (int h = 0; h < 2; h++) {\n"
    "            const long long r = m0 + (cw * %d + i) * 64 + warp * 16 + h * 8 + (lane >> 2);\n"
    "            const long long c0 = n0 + j * 8 + (lane & 3) * 2, rg = (long long)bat * dims.M + r;\n"
    "            (void)c0; (void)rg;\n",
    wm, wm);
  if (epi->emit_pair_begin) epi->emit_pair_begin(b, "            ", epi->ctx);
  if (epi->emit_pair) {
    epi->emit_pair(b, "            ", epi->ctx);
  } else {
    evtc_sb_printf(b,
      "#pragma unroll\n"
      "            for (int e = 0; e < 2; e++) {\n"
      "              const long long c = c0 + e;\n"
      "              if (EVTC_IN_M(r) && EVTC_IN_N(c)) {\n"
      "                const float acc_v = acc[i][4 * j + 2 * h + e];\n");
    epi->emit_element(b, "                ", "acc_v", epi->ctx);
    evtc_sb_printf(b, "              }\n            }\n");
  }
  if (epi->emit_pair_end) epi->emit_pair_end(b, "            ", epi->ctx);
  evtc_sb_printf(b, "          }\n        }\n");
  if (epi->emit_col_end) epi->emit_col_end(b, "        ", epi->ctx);
  evtc_sb_printf(b, "      }\n");
}

/* The epilogue hook on a tile: the loops twice, for a tile wholly inside the bounds (no tests: fewer
 * instructions per element where nearly all tiles are) and for an edge tile. */
void evtc_cuda_gemm_emit_hook_tile(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi) {
  if (epi->emit_tile_begin) epi->emit_tile_begin(b, "      ", epi->ctx);
  evtc_sb_printf(b, "      if (m0 + %d <= dims.M && n0 + %d <= dims.N) {\n"
                    "#define EVTC_FULL_TILE 1\n#define EVTC_IN_M(x) true\n#define EVTC_IN_N(x) true\n", c->tile_m, c->tile_n);
  emit_hook_loops(b, c, epi);
  evtc_sb_printf(b, "#undef EVTC_FULL_TILE\n#undef EVTC_IN_M\n#undef EVTC_IN_N\n      } else {\n"
                    "#define EVTC_FULL_TILE 0\n#define EVTC_IN_M(x) ((x) < dims.M)\n#define EVTC_IN_N(x) ((x) < dims.N)\n");
  emit_hook_loops(b, c, epi);
  evtc_sb_printf(b, "#undef EVTC_FULL_TILE\n#undef EVTC_IN_M\n#undef EVTC_IN_N\n      }\n");
  if (epi->emit_tile_end) epi->emit_tile_end(b, "      ", epi->ctx);
}

void evtc_cuda_gemm_emit_direct_store(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  const int wm = evtc_cuda_gemm_atoms(c), nj = c->tile_n / 8;
  const char *t = v->out == EVTC_F32 ? "f32" : v->out == EVTC_BF16 ? "bf16" : "f16";
  const size_t es = evtc_dtype_size(v->out);
  evtc_sb_printf(b,
    "        char *const out_base = (char *)out_ptr + (long long)bat * dims.c_bstride * %zu;\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < %d; i++) {\n"
    "#pragma unroll\n"
    "          for (int h = 0; h < 2; h++) {\n"
    "            const long long r = m0 + (cw * %d + i) * 64 + warp * 16 + h * 8 + (lane >> 2);\n"
    "            if (r < dims.M) {\n"
    "              char *const row = out_base + r * dims.ldc * %zu;\n"
    "#pragma unroll\n"
    "              for (int j = 0; j < %d; j++) {\n"
    "                const long long c = n0 + j * 8 + (lane & 3) * 2;\n"
    "                const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];\n"
    "                if (pairs && c + 1 < dims.N) {\n"
    "                  evtc_st2_%s(row + c * %zu, v0, v1);\n"
    "                } else {\n"
    "                  if (c < dims.N) evtc_st1_%s(row + c * %zu, v0);\n"
    "                  if (c + 1 < dims.N) evtc_st1_%s(row + (c + 1) * %zu, v1);\n"
    "                }\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n",
    es, wm, wm, es, nj, t, es, t, es, t, es);
}

void evtc_cuda_gemm_emit_store_setup(evtc_sb *b, const evtc_cuda_gemm_variant *v) {
  const size_t es = evtc_dtype_size(v->out);
  evtc_sb_printf(b, "    /* direct stores: two columns at a time when every row and batch start keeps them %zu-byte aligned */\n"
                    "    const bool pairs = ((dims.ldc | dims.c_bstride) & 1) == 0 && ((unsigned long long)out_ptr & %zu) == 0;\n",
                 2 * es, 2 * es - 1);
}

/* The built-in store of D.  Staged (dims.tma_store, when D's strides suit TMA): per 64-row atom and per
 * subtile of 128 bytes of columns, the warpgroup converts its accumulators into one of its two 8 KiB
 * buffers in the 128B-swizzled layout of a TMA box {128 bytes, 64 rows} (row r at 128 r, 16-byte chunk k
 * at k ^ (r % 8): the 8 rows x 4 lanes of one store instruction hit 32 different banks), fences it for the
 * async proxy and one thread issues the TMA store, which clips rows past M and columns past N (in whole
 * 16-byte units: measured on an H200, a row's last partial unit is written whole, so a tile holding a
 * column edge that is not 16-byte aligned takes the direct path) and runs while the warpgroup moves on; a buffer is rewritten only once its previous store has read it
 * (wait_group.read 1 before each subtile, the running subtile count dq picking the buffer).  Direct
 * otherwise (evtc_cuda_gemm_emit_direct_store): each thread stores its pairs of columns, with bounds checks. */
static void emit_epilogue_store(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  const int wm = evtc_cuda_gemm_atoms(c);
  const char *t = v->out == EVTC_F32 ? "f32" : v->out == EVTC_BF16 ? "bf16" : "f16";
  const size_t es = evtc_dtype_size(v->out);
  const int sub_cols = ROW_BYTES / (int)es, nsub = c->tile_n / sub_cols;
  evtc_sb_printf(b,
    "      /* TMA writes whole 16-byte units along a row: a tile whose last column ends inside one stores directly */\n"
    "      if (dims.tma_store && (n0 + %d <= dims.N || (dims.N * %zu) %% 16 == 0)) {\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < %d; i++) {\n"
    "#pragma unroll\n"
    "          for (int q = 0; q < %d; q++, dq++) {        /* subtile: 64 rows x %d columns */\n"
    "            const unsigned buf = stage_d + (dq & 1u) * %uu;\n"
    "            if (leader) evtc_bulk_wait_read1();\n"
    "            evtc_wg_sync(1 + wg);\n"
    "#pragma unroll\n"
    "            for (int jj = 0; jj < %d; jj++) {\n"
    "#pragma unroll\n"
    "              for (int h = 0; h < 2; h++) {\n"
    "                const unsigned row = warp * 16 + h * 8 + (lane >> 2), byte = (jj * 8 + (lane & 3) * 2) * %zuu;\n"
    "                evtc_sts2_%s(buf + row * 128u + ((((byte >> 4) ^ row) & 7u) << 4) + (byte & 15u),\n"
    "                             acc[i][4 * (q * %d + jj) + 2 * h], acc[i][4 * (q * %d + jj) + 2 * h + 1]);\n"
    "              }\n"
    "            }\n"
    "            evtc_fence_smem_async();\n"
    "            evtc_wg_sync(1 + wg);\n"
    "            if (leader) evtc_tma_store(&tma_d, buf, n0 + q * %d, m0 + (cw * %d + i) * 64, bat);\n"
    "          }\n"
    "        }\n"
    "      } else {\n",
    c->tile_n, es, wm, nsub, sub_cols, (unsigned)D_SUBTILE, sub_cols / 8, es, t, sub_cols / 8, sub_cols / 8, sub_cols, wm);
  evtc_cuda_gemm_emit_direct_store(b, c, v);
  evtc_sb_printf(b, "      }\n");
}

/* The fix-up of a tile whose k-blocks more than one unit of work computed: a split-K unit (dims.splits > 1, a
 * kernel with an epilogue hook: `splits` parts, the unit's share u % splits) or a split tail's (tail_splits parts,
 * the share (u - dp_units) % tail_splits; slots and counts from the tail's first tile on, a cluster's two tiles
 * each their own).  Each part's consumers store their f32 accumulators into the workspace (one tile_m x tile_n
 * slot a part, float4 q of thread tt at 4 (q NT + tt): each store of the NT threads contiguous), fence them and
 * meet; one thread adds the part to the tile's count (dims.split_cnt, zero before the launch).  The
 * part that finds every other one there resets the count to 0 for the next launch, adds the others' partial
 * tiles to its own and runs the epilogue; the others skip it (emit_tile_skip: what the hook started for the
 * tile is consumed).  The sum does not depend on which part comes last: two parts add the other's to their own
 * (a + b is b + a), more are all read back in part order.  The flag that says which (one int per consumer
 * warpgroup) follows the mbarriers in shared memory. */
static void emit_fixup(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi) {
  const int wm = evtc_cuda_gemm_atoms(c), q4 = c->tile_n / 8, nt = 128 * evtc_cuda_gemm_row_groups(c);
  const int chunk = q4 < 8 ? q4 : 8;   /* each part's float4s read 8 at a time, the parts' chunks together */
  const int flag_bar = 2 * c->stages + (epi && epi->aux_smem ? c->consumers : 0);
  const char *sync = c->pingpong || c->consumers == 1 ? "evtc_wg_sync(1 + wg)" : "evtc_consumers_sync()";
  evtc_sb_printf(b,
    "      int part = 0, parts = 1, cnt_i = 0;   /* this unit's part of its tile, of `parts`; the tile's count */\n"
    "%s",
    c->cluster_m == 2   /* a cluster's tail pair: a count and slots for each CTA's tile */
        ? "      if (u >= dp_units)\n"
          "        parts = dims.tail_splits, part = (u - dp_units) % parts, cnt_i = 2 * ((u - dp_units) / parts) + (int)crank;\n"
        : "      if (splits > 1) part = u - t * splits, parts = splits, cnt_i = t;\n"
          "      else if (u >= dp_units) cnt_i = t - dp_units, parts = dims.tail_splits, part = u - dp_units - cnt_i * parts;\n");
  evtc_sb_printf(b,
    "      if (parts > 1) {\n"
    "        const long long slot0 = (long long)cnt_i * parts;   /* the tile's first part's slot */\n"
    "        const int tt = threadIdx.x - 128 - %s;\n"
    "        volatile int *const split_last = (volatile int *)(evtc_smem + (bar0 + %du - evtc_smem_u32(evtc_smem))) + %s;\n"
    "        float *const wsu = dims.split_ws + (slot0 + part) * %d;\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < %d; i++)\n"
    "#pragma unroll\n"
    "          for (int q = 0; q < %d; q++)\n"
    "            evtc_split_st4(wsu + ((i * %d + q) * %d + tt) * 4, acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2],\n"
    "                           acc[i][4 * q + 3]);\n"
    "        __threadfence();\n"
    "        %s;\n"
    "        if (tt == 0) {\n"
    "          const int before = evtc_split_arrive(dims.split_cnt + cnt_i);\n"
    "          if (before == parts - 1) dims.split_cnt[cnt_i] = 0;   /* every part is in: zero for the next launch */\n"
    "          *split_last = before == parts - 1;\n"
    "        }\n"
    "        %s;\n"
    "        if (!*split_last) {\n",
    c->pingpong ? "128 * wg" : "0", 8 * flag_bar, c->pingpong ? "wg" : "0", c->tile_m * c->tile_n, wm, q4, q4, nt, sync,
    sync);
  if (epi && epi->emit_tile_skip) epi->emit_tile_skip(b, "          ", epi->ctx);
  evtc_sb_printf(b,
    "          continue;\n"
    "        }\n"
    "        __threadfence();\n"
    "        const float *const p0 = dims.split_ws + slot0 * %d + tt * 4;\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < %d; i++)\n"
    "#pragma unroll\n"
    "          for (int qc = 0; qc < %d; qc += %d) {   /* a chunk of %d float4s of every part's partial tile at once */\n"
    "            for (int sp = 0; sp < parts; sp++) {\n"
    "              if (parts == 2 && sp == part) continue;\n"
    "              const bool first = parts > 2 && sp == 0;\n"
    "              const float *const p = p0 + (long long)sp * %d;\n"
    "#pragma unroll\n"
    "              for (int q = 0; q < %d; q++) {\n"
    "                const float4 w = evtc_split_ld4(p + (i * %d + qc + q) * %d);\n"
    "                float *const a = &acc[i][4 * (qc + q)];\n"
    "                if (first) a[0] = w.x, a[1] = w.y, a[2] = w.z, a[3] = w.w;\n"
    "                else a[0] += w.x, a[1] += w.y, a[2] += w.z, a[3] += w.w;\n"
    "              }\n"
    "            }\n"
    "            evtc_split_order();\n"
    "          }\n"
    "      }\n",
    c->tile_m * c->tile_n, wm, q4, chunk, chunk, c->tile_m * c->tile_n, chunk, q4, 4 * nt);
}

/* A consumer warpgroup: main loop over the ring, then the epilogue, tile after tile. */
static void emit_consumer(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                          const evtc_cuda_gemm_variant *v, const evtc_cuda_gemm_epilogue *epi) {
  const int S = c->stages, wm = evtc_cuda_gemm_atoms(c), regs = c->tile_n / 2;
  const unsigned a_bytes = (unsigned)c->tile_m * ROW_BYTES;
  /* k16 step within the 64-wide block: 32 bytes along a K-major row, 16 k-rows (2048 bytes) for MN-major */
  const unsigned a_step = v->a_kmajor ? 32 : 2048, b_step = v->b_kmajor ? 32 : 2048;
  const unsigned a_lbo = v->a_kmajor ? 16 : PANEL_BYTES, b_lbo = v->b_kmajor ? 16 : PANEL_BYTES;
  /* wg: the consumer warpgroup; cw: its block of rows in a tile (0 with pingpong: each owns whole tiles) */
  evtc_sb_printf(b, "    const int wg = (threadIdx.x >> 7) - 1, cw = %s, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;\n"
                    "    (void)warp; (void)cw;\n",
                 c->pingpong ? "0" : "wg");
  if (epi && epi->emit_element)
    evtc_sb_printf(b, "    unsigned char *const hook_smem = evtc_smem + (dbuf - evtc_smem_u32(evtc_smem)) + (unsigned)wg * %uu;\n"
                      "    (void)hook_smem;\n", (unsigned)EVTC_CUDA_GEMM_HOOK_SMEM);
  if (epi && epi->aux_smem)
    evtc_sb_printf(b, "    const unsigned aux_tile = dbuf + %uu + (unsigned)wg * %uu, aux_bar = bar0 + 8u * (%d + wg);\n"
                      "    const unsigned char *const aux_smem = evtc_smem + (aux_tile - evtc_smem_u32(evtc_smem));\n"
                      "    (void)aux_smem;\n",
                   (unsigned)(c->consumers * 2 * D_SUBTILE), epi->aux_smem, 2 * S);
  if (epi && epi->emit_setup) epi->emit_setup(b, "    ", epi->ctx);
  if (!(epi && epi->emit_element)) {
    evtc_cuda_gemm_emit_store_setup(b, v);
    evtc_sb_printf(b, "    /* staged stores: this warpgroup's two subtile buffers, its TMA-issuing thread */\n"
                      "    const unsigned stage_d = dbuf + (unsigned)wg * %uu;\n"
                      "    const bool leader = (threadIdx.x & 127) == 0;\n"
                      "    unsigned dq = 0;\n",
                   2u * D_SUBTILE);
  }
  evtc_sb_printf(b,
    "    float acc[%d][%d];\n"
    "    unsigned s = 0, ph = 0;\n",
    wm, regs);
  emit_walk_head(b, c, "    ", true);
  evtc_sb_printf(b, "      (void)it;\n");
  emit_unit_kblocks(b, c, "      ");
  if (c->pingpong)
    evtc_sb_printf(b,
      "      if ((it & 1) != wg) {               /* the other warpgroup's tile: its k-blocks pass by in the ring */\n"
      "        const unsigned q = s + (unsigned)(kb1 - kb0);\n"
      "        s = q %% %uu;\n"
      "        ph ^= (q / %uu) & 1u;\n"
      "        continue;\n"
      "      }\n", (unsigned)S, (unsigned)S);
  emit_unit_tile(b, c, "      ");
  const char *next = c->cluster_m == 2 ? "u + (int)(gridDim.x >> 1) < walk_units" : "u + (int)gridDim.x < walk_units";   /* another unit */
  if (c->cluster_m == 2) {   /* a ghost tile: its stages pass through this CTA, taking the pingpong turns */
    evtc_sb_printf(b, "      if (ghost) {\n");
    if (c->pingpong) evtc_sb_printf(b, "        if (it > 0 || wg > 0) evtc_turn_wait(3 + wg);\n");
    evtc_sb_printf(b,
      "        for (int kb = kb0; kb < kb1; kb++) {\n"
      "          evtc_mbar_wait(bar0 + 8u * s, ph);\n"
      "          __syncwarp();   /* every lane past the wait before lanes 0 and 1 release the stage for the warp */\n");
    emit_release(b, c, "          ", "", "s");
    evtc_sb_printf(b, "          if (++s == %d) { s = 0; ph ^= 1u; }\n        }\n", S);
    if (c->pingpong) evtc_sb_printf(b, "        if (%s) evtc_turn_pass(3 + (wg ^ 1));\n", next);
    evtc_sb_printf(b, "        continue;\n      }\n");
  }
  if (epi && epi->emit_tile_loads) epi->emit_tile_loads(b, "      ", epi->ctx);
  evtc_cuda_gemm_emit_prefetch_first(b, c, epi);
  if (epi && epi->emit_acc_init) {
    epi->emit_acc_init(b, "      ", epi->ctx);
    evtc_sb_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) %s_pin(acc[i]);\n", wm, name);
  } else {
    evtc_sb_printf(b,
      "#pragma unroll\n"
      "      for (int i = 0; i < %d; i++) {\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n"
      "        %s_pin(acc[i]);\n"
      "      }\n", wm, regs, name);
  }
  evtc_sb_printf(b, "      unsigned prev = 0;\n");
  if (c->pingpong)   /* the other warpgroup's k-blocks must all have been waited for: see pingpong above */
    evtc_sb_printf(b, "      if (it > 0 || wg > 0) evtc_turn_wait(3 + wg);   /* this warpgroup's turn on the tensor cores */\n");
  evtc_sb_printf(b,
    "      for (int kb = kb0; kb < kb1; kb++) {\n"
    "        evtc_mbar_wait(bar0 + 8u * s, ph);                      /* stage s full */\n"
    "        const unsigned sa = ring + s * %uu + (unsigned)cw * %uu, sb = ring + s * %uu + %uu;\n"
    "        evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < 4; kk++) {\n"
    "          const unsigned long long db = evtc_wgmma_desc(sb + kk * %uu, %uu, 1024u);\n"
    "#pragma unroll\n"
    "          for (int i = 0; i < %d; i++)\n"
    "            %s_mma(acc[i], evtc_wgmma_desc(sa + i * %uu + kk * %uu, %uu, 1024u), db);\n"
    "        }\n"
    "        evtc_wgmma_commit();\n"
    "        if (kb > kb0) {                      /* the previous k-block's group is done: free its stage */\n"
    "          evtc_wgmma_wait<1>();\n",
    evtc_cuda_gemm_stage_bytes(c), (unsigned)wm * PANEL_BYTES, evtc_cuda_gemm_stage_bytes(c), a_bytes, b_step, b_lbo, wm, name,
    (unsigned)PANEL_BYTES, a_step, a_lbo);
  emit_release(b, c, "          ", "", "prev");
  evtc_sb_printf(b,
    "        }\n"
    "        prev = s;\n"
    "        if (++s == %d) { s = 0; ph ^= 1u; }\n"
    "      }\n", S);
  if (c->pingpong)   /* the next tile is the other warpgroup's */
    evtc_sb_printf(b, "      if (%s) evtc_turn_pass(3 + (wg ^ 1));\n", next);
  evtc_sb_printf(b, "      evtc_wgmma_wait<0>();               /* unconditional: ptxas must see every path drained */\n");
  emit_release(b, c, "      ", "kb1 > kb0 && ", "prev");
  evtc_sb_printf(b,
    "#pragma unroll\n"
    "      for (int i = 0; i < %d; i++) %s_pin(acc[i]);\n",
    wm, name);
  if (epi && epi->emit_element) {
    emit_fixup(b, c, epi);
    evtc_cuda_gemm_emit_hook_tile(b, c, epi);
    evtc_sb_printf(b, "    }\n");
    if (epi->bulk_stores) evtc_sb_printf(b, "    if ((threadIdx.x & 31) == 0) evtc_bulk_wait_all();   /* the hook's TMA stores */\n");
  } else {
    emit_fixup(b, c, NULL);
    emit_epilogue_store(b, c, v);
    evtc_sb_printf(b, "    }\n    if (leader) evtc_bulk_wait_all();   /* shared memory must outlive the last store */\n");
  }
}

void evtc_cuda_gemm_emit_comment(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                                 const evtc_cuda_gemm_variant *v) {
  char cfg[64];
  evtc_cuda_gemm_config_name(c, cfg, sizeof cfg);
  evtc_sb_printf(b, "/* GEMM %s%s: %s x %s -> %s, A %s, B %s, tile %s */\n", name, c->sm80 ? " (sm_80 template)" : "",
                 evtc_dtype_name(v->in), evtc_dtype_name(v->in), evtc_dtype_name(v->out), v->a_kmajor ? "M x K" : "K x M",
                 v->b_kmajor ? "N x K" : "K x N", cfg);
}

void evtc_cuda_gemm_emit_signature(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                                   const evtc_cuda_gemm_epilogue *epi) {
  evtc_sb_printf(b,
    "extern \"C\" __global__ void __launch_bounds__(%u, 1)%s\n"
    "%s(const __grid_constant__ evtc_tmap tma_a, const __grid_constant__ evtc_tmap tma_b,\n"
    "   const __grid_constant__ evtc_tmap tma_d, void *out_ptr, const evtc_gemm_dims dims",
    evtc_cuda_gemm_threads(c), c->cluster_m == 2 ? " __cluster_dims__(2, 1, 1)" : "", name);
  if (epi && epi->emit_params) epi->emit_params(b, epi->ctx);
}

void evtc_cuda_gemm_emit(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                         const evtc_cuda_gemm_variant *v, const evtc_cuda_gemm_epilogue *epi) {
  char why[160];
  EVTC_ASSERT(evtc_cuda_gemm_config_check(c, v, why, sizeof why));
  if (c->sm80) {
    evtc_cuda_gemm80_emit(b, name, c, v, epi);
    return;
  }
  const int S = c->stages;
  evtc_cuda_emit_sm90_helpers(b);
  evtc_cuda_gemm_emit_comment(b, name, c, v);
  emit_mma(b, name, c, v);
  evtc_cuda_gemm_emit_signature(b, name, c, epi);
  const unsigned aux = epi ? epi->aux_smem : 0;
  evtc_sb_printf(b,
    ") {\n"
    "  extern __shared__ __align__(1024) unsigned char evtc_smem[];\n"
    "  const unsigned ring = (evtc_smem_u32(evtc_smem) + 1023u) & ~1023u;   /* 128B swizzle atoms start at 1024 B */\n"
    "  const unsigned dbuf = ring + %uu;     /* two staged-output subtiles per consumer warpgroup */\n"
    "  const unsigned bar0 = dbuf + %uu;     /* full[s] at bar0 + 8 s, empty[s] at bar0 + 8 (%d + s) */\n"
    "  (void)dbuf;\n"
    "  const int tiles_m = (dims.M + %d) / %d, tiles_n = (dims.N + %d) / %d;\n"
    "  const int tiles = tiles_m * tiles_n * dims.batch, kblocks = (dims.K + 63) / 64;\n"
    "  const int splits = %s, units = tiles * splits;   /* split-K: emit_fixup */\n"
    "%s"
    "  if (threadIdx.x == 0) {\n"
    "    for (int s = 0; s < %d; s++) {\n"
    "      evtc_mbar_init(bar0 + 8u * s, 1u);            /* the producer's expect_tx (+ TMA bytes) */\n"
    "      evtc_mbar_init(bar0 + 8u * (%d + s), %du);    /* one arrive per warp reading the stage%s */\n"
    "    }\n",
    (unsigned)S * evtc_cuda_gemm_stage_bytes(c), (unsigned)(c->consumers * (2 * D_SUBTILE + aux)), S, c->tile_m - 1, c->tile_m, c->tile_n - 1, c->tile_n,
    epi && epi->emit_element ? "dims.splits > 1 ? dims.splits : 1" : "1",
    c->cluster_m == 2 ? ""
                      : "  /* the split tail (dims.tail_tiles): whole units before dp_units, then the last tiles' shares */\n"
                        "  const int dp_units = units - dims.tail_tiles, walk_units = dp_units + dims.tail_tiles * dims.tail_splits;\n",
    S, S, 4 * evtc_cuda_gemm_row_groups(c) * c->cluster_m,
    c->cluster_m == 2 ? ", in both CTAs" : "");
  if (aux)   /* one barrier for each consumer warpgroup's TMA tile, after the stages' */
    evtc_sb_printf(b, "    for (int w = 0; w < %d; w++) evtc_mbar_init(bar0 + 8u * (%d + w), 1u);   /* aux_bar */\n",
                   c->consumers, 2 * S);
  evtc_sb_printf(b,
    "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
    "  }\n");
  if (c->cluster_m == 2)
    evtc_sb_printf(b,
      "  /* a 2x1 cluster: the pair's tiles share B, each CTA's producer multicasting half of it into both */\n"
      "  const unsigned crank = evtc_cluster_rank();\n"
      "  const int tile_pairs = (tiles_m + 1) / 2 * tiles_n * dims.batch;\n"
      "  /* the split tail (dims.tail_tiles pairs): whole pairs before dp_units, then the last pairs' shares */\n"
      "  const int dp_units = tile_pairs - dims.tail_tiles, walk_units = dp_units + dims.tail_tiles * dims.tail_splits;\n"
      "  (void)units;\n"
      "  evtc_cluster_sync();                     /* both CTAs' barriers are initialised before either's copies */\n");
  else
    evtc_sb_printf(b, "  __syncthreads();\n");
  evtc_sb_printf(b, "  if (threadIdx.x < 128) {                /* producer warpgroup */\n");
  if (c->consumers == 2) evtc_sb_printf(b, "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\");\n");
  emit_producer(b, c, v);
  evtc_sb_printf(b, "  } else {                                /* consumer warpgroups */\n");
  if (c->consumers == 2) evtc_sb_printf(b, "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\");\n");
  emit_consumer(b, name, c, v, epi);
  evtc_sb_printf(b, "  }\n");
  if (c->cluster_m == 2)
    evtc_sb_printf(b, "  evtc_cluster_sync();                     /* no CTA leaves while its partner may still arrive or copy into it */\n");
  evtc_sb_printf(b, "}\n\n");
}

/* ---- host side ---- */

enum { TMAP_F16 = 6, TMAP_F32 = 7, TMAP_BF16 = 9, SWIZZLE_128B = 3, L2_256B = 3 };

bool evtc_cuda_gemm_problem_check(const evtc_cuda_gemm_variant *v, const evtc_cuda_gemm_problem *p, CUdeviceptr a,
                                  CUdeviceptr b, char *why, size_t cap) {
  const int64_t lim = INT32_MAX;
  if (p->M < 1 || p->N < 1 || p->K < 0 || p->batch < 1) {
    snprintf(why, cap, "empty GEMM %lldx%lldx%lld, batch %lld", (long long)p->M, (long long)p->N, (long long)p->K,
             (long long)p->batch);
    return false;
  }
  if (p->M > lim || p->N > lim || p->K > lim || p->batch > lim) {
    snprintf(why, cap, "GEMM sizes past 2^31");
    return false;
  }
  if (((p->M + 63) / 64) * ((p->N + 63) / 64) * p->batch > lim) {
    snprintf(why, cap, "more than 2^31 output tiles");
    return false;
  }
  struct {
    const char *name, *ld_name;
    int64_t ld, bstride, min_ld;
    CUdeviceptr base;
  } ops[2] = {{"A", "lda", p->lda, p->a_bstride, v->a_kmajor ? p->K : p->M, a},
              {"B", "ldb", p->ldb, p->b_bstride, v->b_kmajor ? p->K : p->N, b}};
  for (int i = 0; i < 2; i++) {
    if (ops[i].base % 16) {
      snprintf(why, cap, "operand %s is not 16-byte aligned (TMA, 16-byte copies)", ops[i].name);
      return false;
    }
    if (ops[i].ld < ops[i].min_ld || ops[i].ld % 8) {
      snprintf(why, cap, "operand %s: row stride %s = %lld (needs >= %lld and a multiple of 8 elements: TMA, 16-byte copies)",
               ops[i].name, ops[i].ld_name, (long long)ops[i].ld, (long long)ops[i].min_ld);
      return false;
    }
    if (p->batch > 1 && (ops[i].bstride <= 0 || ops[i].bstride % 8)) {
      snprintf(why, cap, "operand %s: batch stride %lld (needs > 0 and a multiple of 8 elements: TMA, 16-byte copies)", ops[i].name,
               (long long)ops[i].bstride);
      return false;
    }
  }
  if (p->ldc < p->N || (p->batch > 1 && p->c_bstride < 0)) {
    snprintf(why, cap, "output strides ldc %lld, batch %lld for N = %lld", (long long)p->ldc,
             (long long)p->c_bstride, (long long)p->N);
    return false;
  }
  return true;
}

/* The 3-D map {inner, outer, batch} of one matrix of type t with boxes {128 bytes, box_outer, 1}. */
static evtc_status encode(const evtc_cuda_driver *drv, evtc_cuda_tensor_map *m, evtc_dtype t, CUdeviceptr base,
                          int64_t inner, int64_t outer, int64_t ld, int64_t bstride, int64_t batch,
                          unsigned box_outer, const char *what, evtc_diag *d) {
  const unsigned long long es = evtc_dtype_size(t);
  unsigned long long dim[3] = {(unsigned long long)(inner > 0 ? inner : 1), (unsigned long long)outer,
                               (unsigned long long)batch};
  /* a batch stride only matters when batch > 1; otherwise the packed size keeps the driver's checks happy */
  unsigned long long stride[2] = {(unsigned long long)ld * es,
                                  (unsigned long long)(batch > 1 ? bstride : ld * outer) * es};
  unsigned box[3] = {(unsigned)(ROW_BYTES / es), box_outer, 1}, estride[3] = {1, 1, 1};
  int type = t == EVTC_BF16 ? TMAP_BF16 : t == EVTC_F16 ? TMAP_F16 : TMAP_F32;
  CUresult r = drv->cuTensorMapEncodeTiled(m, type, 3, (void *)(uintptr_t)base, dim, stride, box, estride, 0,
                                           SWIZZLE_128B, L2_256B, 0);
  char where[160];
  snprintf(where, sizeof where, "cuTensorMapEncodeTiled (GEMM operand %s: %llu x %llu x %llu, strides %llu, %llu bytes)",
           what, dim[0], dim[1], dim[2], stride[0], stride[1]);
  return evtc_cuda_fail(drv, r, where, EVTC_ERR_RUNTIME, d);
}

static int64_t tiles_of(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p) {
  return ((p->M + c->tile_m - 1) / c->tile_m) * ((p->N + c->tile_n - 1) / c->tile_n) * p->batch;
}

/* What the persistent grid walks: tiles, split-K's units, or a cluster's pairs of tiles along M. */
static int64_t walk_units(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p) {
  if (c->cluster_m == 2)
    return ((p->M + 2 * c->tile_m - 1) / (2 * c->tile_m)) * ((p->N + c->tile_n - 1) / c->tile_n) * p->batch;
  return tiles_of(c, p) * (p->splits > 1 ? p->splits : 1);
}

int64_t evtc_cuda_gemm_grid(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p, int64_t sm_count) {
  const int64_t units = walk_units(c, p), slots = c->cluster_m == 2 ? (sm_count / 2 > 0 ? sm_count / 2 : 1) : sm_count;
  return c->cluster_m * (units < slots ? units : slots);
}

void evtc_cuda_gemm_tail(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p, int64_t grid, int *tiles_out,
                         int *splits_out) {
  const int64_t units = walk_units(c, p), slots = grid / c->cluster_m, kblocks = (p->K + 63) / 64;
  const int64_t r = slots > 0 ? units % slots : 0;
  *tiles_out = *splits_out = 0;
  if (p->tail_split < 2 || c->sm80 || p->splits > 1 || units <= slots || r == 0) return;
  int64_t s = slots / r;
  if (s > p->tail_split) s = p->tail_split;
  const int64_t most = kblocks / (p->tail_min_kblocks > 1 ? p->tail_min_kblocks : 1);
  if (s > most) s = most;
  if (s < 2) return;
  *tiles_out = (int)r;
  *splits_out = (int)s;
}

int64_t evtc_cuda_gemm_split_floats(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p, int64_t sm_count) {
  const int64_t tile = (int64_t)c->tile_m * c->tile_n;
  if (p->splits > 1) return tiles_of(c, p) * p->splits * tile;
  int tail, parts;
  evtc_cuda_gemm_tail(c, p, evtc_cuda_gemm_grid(c, p, sm_count), &tail, &parts);
  return (int64_t)tail * c->cluster_m * parts * tile;
}

int64_t evtc_cuda_gemm_split_counts(const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_problem *p, int64_t sm_count) {
  if (p->splits > 1) return tiles_of(c, p);
  int tail, parts;
  evtc_cuda_gemm_tail(c, p, evtc_cuda_gemm_grid(c, p, sm_count), &tail, &parts);
  return (int64_t)tail * c->cluster_m;
}

evtc_status evtc_cuda_gemm_tile_map(const evtc_cuda_driver *drv, evtc_cuda_tensor_map *m, evtc_dtype t, CUdeviceptr base,
                                    int64_t cols, int64_t rows, int64_t ld, unsigned box_rows, evtc_diag *d) {
  return encode(drv, m, t, base, cols, rows, ld, 0, 1, box_rows, "epilogue tile", d);
}

evtc_status evtc_cuda_gemm_launch_init(evtc_cuda_gemm_launch *L, const evtc_cuda_driver *drv,
                                       const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v,
                                       const evtc_cuda_gemm_problem *p, CUdeviceptr a, CUdeviceptr b,
                                       CUdeviceptr out, int sm_count, evtc_diag *d) {
  char why[256];
  memset(L, 0, sizeof *L);
  if (!evtc_cuda_gemm_config_check(c, v, why, sizeof why) || !evtc_cuda_gemm_problem_check(v, p, a, b, why, sizeof why))
    return evtc_diag_set(d, EVTC_ERR_INVALID, "%s GEMM %lldx%lldx%lld: %s", c->sm80 ? "sm80" : "sm90", (long long)p->M, (long long)p->N,
                         (long long)p->K, why);
  const int splits = p->splits > 1 ? p->splits : 1;
  if (splits > 1 && (c->sm80 || splits > (p->K + 63) / 64))
    return evtc_diag_set(d, EVTC_ERR_INVALID, "GEMM %lldx%lldx%lld: split-K into %d units (%s)", (long long)p->M,
                         (long long)p->N, (long long)p->K, splits,
                         c->sm80 ? "the sm_80 template has none" : "more than its k-blocks of 64");
  if (splits > 1 && c->cluster_m > 1)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "GEMM %lldx%lldx%lld: split-K on a 2x1 cluster (its pairs walk whole tiles)",
                         (long long)p->M, (long long)p->N, (long long)p->K);
  /* pairs of tiles along M, one cluster of two CTAs (two SMs) each; on the H200 all 66 clusters of a grid of 132
   * run at once (cuOccupancyMaxActiveClusters, gpu_gemm_bench); where fewer do, evtc_cuda_gemm_fit_clusters
   * (cuda_gemm.h) clamps the grid once the kernel is loaded */
  L->grid[0] = (unsigned)evtc_cuda_gemm_grid(c, p, sm_count);
  L->grid[1] = L->grid[2] = 1;
  L->block[0] = evtc_cuda_gemm_threads(c);
  L->block[1] = L->block[2] = 1;
  L->smem = evtc_cuda_gemm_smem_bytes(c);
  L->params[0] = &L->map_a;
  L->params[1] = &L->map_b;
  L->params[2] = &L->map_d;
  L->params[3] = &L->out;
  L->params[4] = &L->dims;
  L->out = out;
  L->dims = (evtc_cuda_gemm_dims){.M = (int32_t)p->M, .N = (int32_t)p->N, .K = (int32_t)p->K,
                                  .batch = (int32_t)p->batch, .ldc = p->ldc, .c_bstride = p->c_bstride,
                                  .a = a, .b = b, .lda = p->lda, .ldb = p->ldb, .a_bstride = p->a_bstride,
                                  .b_bstride = p->b_bstride, .splits = splits};
  evtc_cuda_gemm_tail(c, p, L->grid[0], &L->dims.tail_tiles, &L->dims.tail_splits);
  if (c->sm80) return EVTC_OK;   /* no tensor maps: the kernel copies from dims.a and dims.b */
  const int64_t k1 = p->K > 0 ? p->K : 1;
  evtc_status s = v->a_kmajor ? encode(drv, &L->map_a, v->in, a, p->K, p->M, p->lda, p->a_bstride, p->batch,
                                       (unsigned)c->tile_m, "A", d)
                              : encode(drv, &L->map_a, v->in, a, p->M, k1, p->lda, p->a_bstride, p->batch, 64, "A", d);
  if (s != EVTC_OK) return s;
  /* a 2x1 cluster's CTAs each load half of B's block: half its rows (K-major), half its k-rows (N-major) */
  const unsigned b_split = (unsigned)c->cluster_m;
  s = v->b_kmajor ? encode(drv, &L->map_b, v->in, b, p->K, p->N, p->ldb, p->b_bstride, p->batch,
                           (unsigned)c->tile_n / b_split, "B", d)
                  : encode(drv, &L->map_b, v->in, b, p->N, k1, p->ldb, p->b_bstride, p->batch, 64 / b_split, "B", d);
  if (s != EVTC_OK) return s;
  /* D through TMA stores when its base and strides are 16-byte aligned; the kernel stores directly otherwise */
  const int64_t es = (int64_t)evtc_dtype_size(v->out);
  bool tma_store = out != 0 && out % 16 == 0 && p->ldc * es % 16 == 0 && (p->batch == 1 || p->c_bstride * es % 16 == 0) &&
                   p->c_bstride * es < ((int64_t)1 << 40);
  if (tma_store && encode(drv, &L->map_d, v->out, out, p->N, p->M, p->ldc, p->c_bstride, p->batch,
                          p->d_box_rows ? (unsigned)p->d_box_rows : 64u, "D", d))
    return d->status;
  L->dims.tma_store = tma_store;
  return EVTC_OK;
}
