/* SPDX-License-Identifier: BSD-3-Clause */
/* The one error message writer (errmsg.h): printf into a caller's
 * (err, errlen) buffer. */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

void mpi_pstate_errmsg_set(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        if (!err || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
}
