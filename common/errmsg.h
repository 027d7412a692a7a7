/* SPDX-License-Identifier: BSD-3-Clause */
/* The one way every module fills its caller's (err, errlen) buffer. */
#ifndef MPI_PSTATE_ERRMSG_H
#define MPI_PSTATE_ERRMSG_H
#include <stddef.h>

/* printf into err (truncating); err may be NULL or errlen 0: nothing is written. */
__attribute__((format(printf, 3, 4))) void mpi_pstate_errmsg_set(char *err, size_t errlen,
                                                                 const char *fmt, ...);

#endif
