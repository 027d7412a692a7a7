/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment contract (common/contract.h) and the user option table
 * (common/options.def): every option's variable is MPI_PSTATE_<KEY>, the
 * front library's name for the mode is the table's, and no contract name
 * is also an option's. */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "options.h"
#include "check_main.h"

START_TEST(option_variables_follow_their_keys)
{
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *o = mpi_pstate_options_info(id);
                char want[64] = "MPI_PSTATE_";
                size_t n = strlen(want);

                ck_assert_ptr_nonnull(o);
                for (const char *k = o->key; *k && n < sizeof(want) - 1; k++)
                        want[n++] = (char)toupper((unsigned char)*k);
                want[n] = '\0';
                ck_assert_str_eq(o->env, want);
        }
        ck_assert_str_eq(mpi_pstate_options_info(MPI_PSTATE_OPT_MODE)->env, MPI_PSTATE_ENV_MODE);
}
END_TEST

START_TEST(contract_names_are_not_options)
{
        static const char *const names[] = {
            MPI_PSTATE_ENV_SHM,        MPI_PSTATE_ENV_PROFILE_DIR, MPI_PSTATE_ENV_VERBOSE,
            MPI_PSTATE_ENV_LOCAL_RANK, MPI_PSTATE_ENV_ABI,         MPI_PSTATE_ENV_CLOCK,
            MPI_PSTATE_ENV_PRELOAD,    MPI_PSTATE_ENV_UNMEASURED,
        };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++)
                        ck_assert_str_ne(names[i], mpi_pstate_options_info(id)->env);
}
END_TEST

START_TEST(local_rank_order)
{
        static const char *const vars[] = {MPI_PSTATE_LOCAL_RANK_VARS};
        size_t n = sizeof(vars) / sizeof(vars[0]);

        /* launcher variables first, the inherited Slurm one last */
        ck_assert_str_eq(vars[0], "OMPI_COMM_WORLD_LOCAL_RANK");
        ck_assert_str_eq(vars[n - 1], "SLURM_LOCALID");
        ck_assert_str_eq(vars[n - 2], MPI_PSTATE_ENV_LOCAL_RANK);
}
END_TEST

static Suite *slot_contract_suite(void)
{
        Suite *s = suite_create("slot_contract");
        TCase *tc = tcase_create("contract");

        tcase_add_test(tc, option_variables_follow_their_keys);
        tcase_add_test(tc, contract_names_are_not_options);
        tcase_add_test(tc, local_rank_order);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(slot_contract_suite(), false);
}
