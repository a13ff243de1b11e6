/* cuda_emit_mma.c -- the mma.sync-generation device helpers; see cuda_emit_mma.h. */
#include "backend/cuda/cuda_emit_mma.h"

static const char mma_sync_helpers[] =
    "#ifndef EVTC_MMA_SYNC_HELPERS\n"
    "#define EVTC_MMA_SYNC_HELPERS\n"
    "/* mma.sync-generation helpers (cuda_emit_mma.c): ldmatrix, mma.sync m16n8k16, cp.async groups */\n"
    "__device__ __forceinline__ void evtc_ldsm(unsigned *r, unsigned addr) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "__device__ __forceinline__ void evtc_ldsm_t(unsigned *r, unsigned addr) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "template <bool BF> __device__ __forceinline__ void evtc_mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1) {\n"
    "  if (BF)\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "  else\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "__device__ __forceinline__ void evtc_cp_commit() { asm volatile(\"cp.async.commit_group;\\n\" ::); }\n"
    "template <int N> __device__ __forceinline__ void evtc_cp_wait() { asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(N)); }\n"
    "#endif\n\n";

void evtc_cuda_emit_mma_sync_helpers(evtc_sb *b) { evtc_sb_printf(b, "%s", mma_sync_helpers); }
