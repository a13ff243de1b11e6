/* npy.h -- NumPy .npy files in and out of evtc.
 *
 * Tensors cross the command line as .npy files (`evtc run --input`, the
 * outputs it writes, training data).  Supported: format versions 1.0, 2.0
 * and 3.0, C order, little-endian dtypes <f8 <f4 <f2 <i8 <i4 |u1 |i1 |b1
 * (u1 and i1 load as i32, f2 as f16).  In memory the values are doubles,
 * row-major, as everywhere else in the runtime.
 */
#ifndef EVTC_NPY_H
#define EVTC_NPY_H

#include "ir/ir.h"

/* Reads `path`.  On success *type is the file's dtype and shape (contiguous)
 * and *data a malloc'd array of numel doubles that the caller frees.  A bad
 * file (not .npy, truncated, Fortran order, unsupported dtype, rank > 6)
 * gives EVTC_ERR_INVALID, an unreadable one EVTC_ERR_IO; the message in d
 * names the file and the cause, and *data is NULL. */
evtc_status evtc_npy_read(const char *path, evtc_type *type, double **data, evtc_diag *d);

/* Writes numel(type) values as a .npy file of the type's dtype and shape
 * (bf16 is written as <f4: NumPy has no bfloat16).  The write is atomic
 * (temporary file in the same directory, fsync, rename).  EVTC_ERR_IO with
 * the file's name in d on failure. */
evtc_status evtc_npy_write(const char *path, const evtc_type *type, const double *data, evtc_diag *d);

#endif
