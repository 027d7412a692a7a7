/* The environment contract (common/contract.h) and the user option table
 * (common/options.def) name the same variables, and the string macros of
 * the contract match its table. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "options.h"
#include "check_main.h"

struct entry {
        int id;
        const char *name, *set_by, *values, *doc;
};

static const struct entry table[] = {
#define ENTRY(ID, name, set_by, values, doc) {MPI_PSTATE_ENVID_##ID, name, set_by, values, doc},
    MPI_PSTATE_ENV_TABLE(ENTRY)
#undef ENTRY
};
#define NENTRIES (sizeof(table) / sizeof(table[0]))

static const struct entry *find(const char *name)
{
        for (size_t i = 0; i < NENTRIES; i++)
                if (strcmp(table[i].name, name) == 0)
                        return &table[i];
        return NULL;
}

START_TEST(every_option_is_in_the_contract)
{
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *o = mpi_pstate_options_info(id);

                ck_assert_ptr_nonnull(o);
                ck_assert_msg(find(o->env) != NULL, "%s is missing from contract.h", o->env);
        }
        ck_assert_ptr_null(find("MPI_PSTATE_NOPE"));
}
END_TEST

START_TEST(macros_match_the_table)
{
        ck_assert_uint_eq(NENTRIES, MPI_PSTATE_ENVID_COUNT);
        for (size_t i = 0; i < NENTRIES; i++) {
                ck_assert_int_eq(table[i].id, (int)i);
                ck_assert_msg(strncmp(table[i].name, "MPI_PSTATE_", 11) == 0, "%s", table[i].name);
                ck_assert(strlen(table[i].doc) > 20);
                ck_assert(strlen(table[i].values) > 0);
                for (size_t j = 0; j < i; j++)
                        ck_assert_str_ne(table[i].name, table[j].name);
        }
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_MODE].name, MPI_PSTATE_ENV_MODE);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_THRESHOLD].name, MPI_PSTATE_ENV_THRESHOLD);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_LOW].name, MPI_PSTATE_ENV_LOW);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_GOVERNOR].name, MPI_PSTATE_ENV_GOVERNOR);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_BIND].name, MPI_PSTATE_ENV_BIND);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_SHM].name, MPI_PSTATE_ENV_SHM);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_PROFILE_DIR].name, MPI_PSTATE_ENV_PROFILE_DIR);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_VERBOSE].name, MPI_PSTATE_ENV_VERBOSE);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_LOCAL_RANK].name, MPI_PSTATE_ENV_LOCAL_RANK);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_ABI].name, MPI_PSTATE_ENV_ABI);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_CLOCK].name, MPI_PSTATE_ENV_CLOCK);
        ck_assert_str_eq(table[MPI_PSTATE_ENVID_PRELOAD].name, MPI_PSTATE_ENV_PRELOAD);
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

        tcase_add_test(tc, every_option_is_in_the_contract);
        tcase_add_test(tc, macros_match_the_table);
        tcase_add_test(tc, local_rank_order);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(slot_contract_suite(), false);
}
