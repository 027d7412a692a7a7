/* SPDX-License-Identifier: BSD-3-Clause */
/* Containers: does the preload library exist in the root the task will run
 * in?  With Slurm's --container (an OCI bundle), Apptainer/Singularity run
 * as the task, or a plugin that moves the task into another root before
 * mpi-pstate's task_init (pyxis/enroot joins the container there), a host
 * path in LD_PRELOAD that the container lacks makes ld.so print an error in
 * every process.  The plugin then leaves LD_PRELOAD alone and records the
 * step as "not measured (container)"; where the site bind-mounts the
 * library (docs/admin.md, "Containers") it is found and measured.
 *
 * Everything read here comes from the user (the bundle's config.json, the
 * environment, the task's own root): it decides only whether this job's
 * ranks are measured, never a path root acts on.  No Slurm types. */
#ifndef MPI_PSTATE_SPANK_CONTAINER_H
#define MPI_PSTATE_SPANK_CONTAINER_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum mpi_pstate_container {
        MPI_PSTATE_CONTAINER_NONE = 0,
        MPI_PSTATE_CONTAINER_OCI,       /* srun --container=BUNDLE (SLURM_CONTAINER) */
        MPI_PSTATE_CONTAINER_APPTAINER, /* the task is apptainer or singularity */
        MPI_PSTATE_CONTAINER_ROOT,      /* the task's root differs from slurmstepd's */
};

/* "oci", "apptainer", "root"; NULL for none. */
const char *mpi_pstate_container_name(enum mpi_pstate_container c);

/* The step's kind from its SLURM_CONTAINER value (NULL or "" when unset)
 * and the task's argv[0] (NULL when unknown). */
enum mpi_pstate_container mpi_pstate_container_of_step(const char *oci_bundle, const char *argv0);

/* Whether an OCI bundle's container sees path: a mount of config.json
 * whose destination holds path (the site's bind mount), else path under
 * the bundle's root.path exists.  1 yes, 0 no, negative errno when the
 * bundle cannot be read (then the caller keeps the library: ld.so's
 * message is better than silently measuring nothing on a guess): -EINVAL
 * for a bundle path with a control character (never read, never to be
 * logged) or a config.json that is not JSON, -E2BIG for one nested deeper
 * than 64 levels, -EFBIG for one above 256 KiB.  One pass, no recursion:
 * its stack use does not depend on the file. */
int mpi_pstate_container_oci_sees(const char *bundle, const char *path);

/* Whether s (not NULL) is free of control characters (< 0x20, DEL): the
 * only user strings the plugin writes to slurmd's log. */
bool mpi_pstate_container_printable(const char *s);

/* Whether apptainer binds a directory holding path: binds is a
 * comma-separated list of src[:dst[:opts]] (APPTAINER_BIND and friends,
 * joined), conf an apptainer.conf/singularity.conf whose "bind path = "
 * lines count too (NULL: none).  1 yes, 0 no. */
int mpi_pstate_container_apptainer_sees(const char *binds, const char *conf, const char *path);

/* The identity of a root directory ("/" of the caller), to notice in the
 * task that an earlier plugin moved it into another root. */
struct mpi_pstate_root_id {
        dev_t dev;
        ino_t ino;
        bool ok;
};
void mpi_pstate_container_root_id(struct mpi_pstate_root_id *id);
bool mpi_pstate_container_root_moved(const struct mpi_pstate_root_id *step);

#endif
