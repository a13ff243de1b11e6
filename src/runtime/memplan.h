/* memplan.h -- the memory planner: liveness-based reuse of buffer space.
 *
 * Each value is live from the kernel that writes it to the last kernel that
 * reads it.  The planner walks the kernels in launch order, placing each
 * kernel's new values at the lowest free offset of one arena that fits
 * (first fit over a free list kept sorted and merged), and frees each value
 * after its last reader.  A value is never placed over one that is live at
 * the same kernel, so a kernel's outputs never overlap its inputs.
 */
#ifndef EVTC_MEMPLAN_H
#define EVTC_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct evtc_memplan_value {
  size_t bytes;
  int first, last;          /* kernel indices: written by `first`, last read by `last` (>= first) */
  size_t offset;            /* set by the planner; 64-byte aligned */
} evtc_memplan_value;

/* Places n values; returns the arena's peak size in bytes. */
size_t evtc_memplan(evtc_memplan_value *v, int n, int n_kernels);

#endif
