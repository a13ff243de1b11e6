/* emu_tmap.h -- a TMA tensor map as the GEMM emulation keeps it (tests/test_gemm_emu_slow.py): what
 * cuTensorMapEncodeTiled was given, written by the emulated driver (gemm_emu.c) into the map's 128 opaque
 * bytes and read back by the emulated TMA copies (shim_gemm.h).  C and C++. */
#ifndef EMU_TMAP_H
#define EMU_TMAP_H
#include <stdint.h>

typedef struct emu_tmap {
  uint64_t base;           /* host address of element (0, 0, 0) */
  uint32_t elem;           /* bytes an element: 2 (bf16, f16) or 4 (f32) */
  uint32_t swizzle;        /* the driver's CUtensorMapSwizzle: 3 is 128B, the only one the GEMM asks for */
  uint64_t dim[3];         /* elements along each dimension, innermost first */
  uint64_t stride[2];      /* bytes from one index of dimension 1 (2) to the next */
  uint32_t box[3];         /* elements a box covers along each dimension */
} emu_tmap;

#endif
