/* SPDX-License-Identifier: BSD-3-Clause */
/* The preload library's one way to print: a line on stderr, written with
 * one write() so that the lines of many ranks never interleave.  Shared by
 * the front and the backends, which link nothing in common. */
#ifndef MPI_PSTATE_PRELOAD_SAY_H
#define MPI_PSTATE_PRELOAD_SAY_H
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((format(printf, 1, 0))) static inline void mp_vsay(const char *fmt, va_list ap)
{
        char buf[1024];
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);

        if (n < 0)
                return;
        if ((size_t)n > sizeof(buf) - 2)
                n = sizeof(buf) - 2;
        buf[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
        (void)w;
}

#endif
