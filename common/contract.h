/* The environment contract between the SPANK plugin, the node agent, the
 * `mpi-pstate exec` launcher and the preload library: every variable any of
 * them exports or reads, in one table.
 *
 * MPI_PSTATE_ENV_TABLE(X) expands X(ID, name, set_by, values, doc) once per
 * variable:
 *   ID      suffix of MPI_PSTATE_ENV_<ID> (the name as a string literal) and
 *           of enum mpi_pstate_env_id (MPI_PSTATE_ENVID_<ID>)
 *   name    the variable
 *   set_by  who exports it (the reader is always the preload library unless
 *           said otherwise)
 *   values  accepted values, canonical form first
 *   doc     one sentence for docs/preload.md and mpi-pstate-preload(7)
 *
 * The first five are user options (common/options.def holds their parser
 * and user-facing documentation; tests/unit/test_slot_contract.c checks that
 * both tables name the same variables).  The others are internal to
 * mpi-pstate.  Values are read once, when MPI is initialised; a bad value
 * makes the library print one message (rank 0) and pass every call through.
 */
#ifndef MPI_PSTATE_CONTRACT_H
#define MPI_PSTATE_CONTRACT_H

#define MPI_PSTATE_ENV_TABLE(X)                                                                    \
        X(MODE, "MPI_PSTATE_MODE", "plugin, exec", "off|on|profile",                               \
          "off: pure pass-through; on: publish every blocking call in the rank's slot so the "     \
          "node agent can clock the core down; profile: measure the same way, but the agent "      \
          "never changes a frequency")                                                             \
        X(THRESHOLD, "MPI_PSTATE_THRESHOLD", "plugin, exec", "<us>|<n>us|<n>ms|<n>s",              \
          "a blocking call lasting longer than this counts as a long wait (the agent clocks "      \
          "down after it); the plugin exports plain microseconds")                                 \
        X(LOW, "MPI_PSTATE_LOW", "plugin", "min|<kHz>|<n>MHz|<n>GHz",                              \
          "frequency of a waiting rank's core; read by the node agent, validated by the library")  \
        X(GOVERNOR, "MPI_PSTATE_GOVERNOR", "plugin", "keep|performance|powersave|...",             \
          "cpufreq governor of the step; read by the node agent, validated by the library")        \
        X(BIND, "MPI_PSTATE_BIND", "plugin", "none|cores|compact|scatter",                         \
          "how the plugin pinned the ranks; the library records the rank's CPU set in its slot")   \
        X(SHM, "MPI_PSTATE_SHM", "plugin or agent", "<absolute path>",                             \
          "the step's shared-memory segment (common/slot.h), one slot per local rank; unset: "     \
          "the library makes a private one-slot segment")                                          \
        X(PROFILE_DIR, "MPI_PSTATE_PROFILE_DIR", "exec, user", "<directory>",                      \
          "where each rank writes rank-<R>.json and rank-<R>.csv at MPI_Finalize (or at exit "     \
          "without finalize); unset: no profile files")                                            \
        X(VERBOSE, "MPI_PSTATE_VERBOSE", "user", "0|1|2",                                          \
          "1: one line per rank at init and finalize on stderr; 2: also ABI detection")            \
        X(LOCAL_RANK, "MPI_PSTATE_LOCAL_RANK", "plugin", "<n>",                                    \
          "slot index in the segment; launcher variables (OMPI_COMM_WORLD_LOCAL_RANK, "            \
          "MPI_LOCALRANKID, PMI_LOCAL_RANK) win over it, SLURM_LOCALID is the last resort")        \
        X(ABI, "MPI_PSTATE_ABI", "user", "auto|ompi|mpich",                                        \
          "skip MPI detection and load this backend (for an MPI the detection does not know)")     \
        X(CLOCK, "MPI_PSTATE_CLOCK", "user", "auto|tsc|monotonic",                                 \
          "time source of the hot path; auto picks tsc when the kernel's clocksource is tsc")      \
        X(PRELOAD, "MPI_PSTATE_PRELOAD", "user", "<path of libmpi-pstate.so>",                     \
          "read by mpi-pstate-exec only: the front library to preload instead of the installed "   \
          "one")                                                                                   \
        X(UNMEASURED, "MPI_PSTATE_UNMEASURED", "plugin", "container",                              \
          "the library is not in the task's root (a container): not preloaded, nothing measured")

enum mpi_pstate_env_id {
#define MPI_PSTATE_ENV_ENUM_(ID, name, set_by, values, doc) MPI_PSTATE_ENVID_##ID,
        MPI_PSTATE_ENV_TABLE(MPI_PSTATE_ENV_ENUM_)
#undef MPI_PSTATE_ENV_ENUM_
            MPI_PSTATE_ENVID_COUNT
};

/* String macros, so that a typo in a name is a compile error. */
#define MPI_PSTATE_ENV_MODE "MPI_PSTATE_MODE"
#define MPI_PSTATE_ENV_THRESHOLD "MPI_PSTATE_THRESHOLD"
#define MPI_PSTATE_ENV_LOW "MPI_PSTATE_LOW"
#define MPI_PSTATE_ENV_GOVERNOR "MPI_PSTATE_GOVERNOR"
#define MPI_PSTATE_ENV_BIND "MPI_PSTATE_BIND"
#define MPI_PSTATE_ENV_SHM "MPI_PSTATE_SHM"
#define MPI_PSTATE_ENV_PROFILE_DIR "MPI_PSTATE_PROFILE_DIR"
#define MPI_PSTATE_ENV_VERBOSE "MPI_PSTATE_VERBOSE"
#define MPI_PSTATE_ENV_LOCAL_RANK "MPI_PSTATE_LOCAL_RANK"
#define MPI_PSTATE_ENV_ABI "MPI_PSTATE_ABI"
#define MPI_PSTATE_ENV_CLOCK "MPI_PSTATE_CLOCK"
#define MPI_PSTATE_ENV_PRELOAD "MPI_PSTATE_PRELOAD"

/* Launcher variables that give the local rank, most specific first: the
 * innermost launcher sets its own, while SLURM_LOCALID (and a plugin-set
 * MPI_PSTATE_LOCAL_RANK) are inherited unchanged by every rank an mpirun or
 * mpiexec inside a job step starts. */
#define MPI_PSTATE_LOCAL_RANK_VARS                                                                 \
        "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",                         \
            MPI_PSTATE_ENV_LOCAL_RANK, "SLURM_LOCALID"

#endif
