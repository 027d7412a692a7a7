/* SPDX-License-Identifier: BSD-3-Clause */
/* The one main() of every Check suite binary (tests/unit/<component>/): a
 * suite file builds its Suite and returns mpi_pstate_check_main(suite, fork)
 * from a one-line main(), after whatever its process needs first. */
#ifndef MPI_PSTATE_CHECK_MAIN_H
#define MPI_PSTATE_CHECK_MAIN_H

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>

/* always_fork: the code under test keeps per-process state, so every test
 * needs its own process whatever CK_FORK in the environment says. */
static inline int mpi_pstate_check_main(Suite *s, bool always_fork)
{
        SRunner *sr = srunner_create(s);
        int failed;

        if (always_fork)
                srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
