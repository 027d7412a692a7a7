/* SPDX-License-Identifier: BSD-3-Clause */
/* The container detection of spank/container.c against what the user
 * controls.  A container bundle's config.json is the user's, read by root in
 * slurmstepd: spank/container.c reads it in one pass with bounded nesting
 * and size (a 256 KiB file of nested "path" keys, on a 64 KiB stack), as
 * strict JSON (keys inside strings are text, not keys), and never reads, nor
 * lets the plugin log, a bundle path with a control character. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container.h"
#include "fakesys.h"
#include "check_main.h"

#define LIB "/usr/local/lib/mpi-pstate/libmpi-pstate.so"

static struct fakesys fs;
static char *dir = fs.root; /* the bundle */
static char cfg[600];

static void put(const char *path, const char *text, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
        close(fd);
}

static void put_cfg(const char *text)
{
        put(cfg, text, strlen(text));
}

/* bundle/rootfs has the library */
static void library_in_root(const char *bundle)
{
        char path[700];

        snprintf(path, sizeof(path), "%s/rootfs/usr/local/lib/mpi-pstate", bundle);
        for (char *p = path + strlen(bundle) + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        mkdir(path, 0755);
                        *p = '/';
                }
        ck_assert_int_eq(mkdir(path, 0755), 0);
        strcat(path, "/libmpi-pstate.so");
        put(path, "", 0);
}

static void setup(void)
{
        fakesys_init(&fs);
        snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
        library_in_root(dir);
}

static void teardown(void)
{
        fakesys_cleanup(&fs);
}

/* text: head, then unit repeated up to size bytes in all (no closing). */
static char *nested(const char *head, const char *unit, size_t size)
{
        char *t = malloc(size + 1);
        size_t n = strlen(head), u = strlen(unit);

        ck_assert_ptr_nonnull(t);
        memcpy(t, head, n);
        while (u && n + u <= size) {
                memcpy(t + n, unit, u);
                n += u;
        }
        memset(t + n, ' ', size - n);
        t[size] = '\0';
        return t;
}

static void *sees_thread(void *arg)
{
        (void)arg;
        return (void *)(intptr_t)mpi_pstate_container_oci_sees(dir, LIB);
}

/* oci_sees on a 64 KiB stack: a recursion per level would overflow it.
 * aarch64's glibc refuses less than its PTHREAD_STACK_MIN (128 KiB, for
 * 64 KiB pages): that one there, still 1/32 of what the recursion took. */
static int sees_on_small_stack(void)
{
        long min = sysconf(_SC_THREAD_STACK_MIN);
        size_t size = min > 64 * 1024 ? (size_t)min : 64 * 1024;
        pthread_attr_t attr;
        pthread_t t;
        void *rc;

        ck_assert_int_eq(pthread_attr_init(&attr), 0);
        ck_assert_int_eq(pthread_attr_setstacksize(&attr, size), 0);
        ck_assert_int_eq(pthread_create(&t, &attr, sees_thread, NULL), 0);
        ck_assert_int_eq(pthread_join(t, &rc), 0);
        pthread_attr_destroy(&attr);
        return (int)(intptr_t)rc;
}

START_TEST(deeply_nested_256k_is_refused_without_recursion)
{
        /* 256 KiB less one byte: the largest file read.  Before, about
         * 37,000 frames, one per "path" key, and a segfault at 4 MiB. */
        static const char *const heads[] = {"{\"root\":", "{\"mounts\":[{\"destination\":", "["};
        static const char *const units[] = {"{\"path\":", "{\"path\":", "["};

        for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
                char *t = nested(heads[i], units[i], 256 * 1024 - 1);

                put_cfg(t);
                free(t);
                ck_assert_int_eq(sees_on_small_stack(), -E2BIG);
        }
}
END_TEST

START_TEST(nesting_within_the_bound_is_read)
{
        char t[4096];
        size_t n = 0;

        /* 60 levels of something else, then the real answer */
        n += (size_t)snprintf(t + n, sizeof(t) - n, "{\"annotations\":");
        for (int i = 0; i < 60; i++)
                n += (size_t)snprintf(t + n, sizeof(t) - n, "{\"path\":");
        n += (size_t)snprintf(t + n, sizeof(t) - n, "1");
        for (int i = 0; i < 60; i++)
                n += (size_t)snprintf(t + n, sizeof(t) - n, "}");
        snprintf(t + n, sizeof(t) - n, ",\"root\":{\"path\":\"rootfs\"}}");
        put_cfg(t);
        ck_assert_int_eq(sees_on_small_stack(), 1);
        /* a tmpfs over the library's directory hides it */
        t[n] = '\0';
        snprintf(t + n, sizeof(t) - n,
                 ",\"mounts\":[{\"destination\":\"/usr/local/lib/\",\"type\":\"tmpfs\","
                 "\"options\":[\"nosuid\",{\"x\":[1,2]}]}]}");
        put_cfg(t);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 0);
}
END_TEST

START_TEST(size_bound)
{
        const size_t max = 256 * 1024;
        char *t = nested("{\"root\":{\"path\":\"rootfs\"}", "", max);

        /* valid JSON padded with blanks to 256 KiB: one byte too many */
        t[max - 1] = '}';
        put_cfg(t);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), -EFBIG);
        t[max - 2] = '}';
        t[max - 1] = '\0';
        put_cfg(t);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 1);
        t[0] = ' '; /* "root": ... without its brace: not JSON */
        put_cfg(t);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), -EINVAL);
        free(t);
}
END_TEST

START_TEST(strict_json)
{
        static const char *const bad[] = {
            "",
            "{\"root\":{\"path\":\"rootfs\"}",
            "{\"root\":{\"path\":\"rootfs\"}} x",
            "{\"root\" {\"path\":\"rootfs\"}}",
            "{\"root\":{\"path\":\"root\nfs\"}}",
            "{\"root\":{\"path\":\"rootfs\\q\"}}",
            "{\"root\":{\"path\":\"rootfs\\u12\"}}",
            "{root:{\"path\":\"rootfs\"}}",
            "{\"mounts\":[{\"destination\":\"/usr\"]}",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                put_cfg(bad[i]);
                ck_assert_msg(mpi_pstate_container_oci_sees(dir, LIB) == -EINVAL, "accepted: %s",
                              bad[i]);
        }
        /* A key inside a string is text: no mount hides the library here. */
        put_cfg("{\"note\":\"\\\"mounts\\\":[{\\\"destination\\\":\\\"/usr\\\"}]\","
                "\"root\":{\"path\":\"rootfs\"}}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 1);
        /* An escape makes a path unusable, never another path: as if
         * absent (root.path defaults to rootfs). */
        put_cfg("{\"root\":{\"path\":\"/\\u0065tc\"}}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 1);
}
END_TEST

START_TEST(strict_numbers_and_literals)
{
        static const char *const bad[] = {
            "{\"a\":tru,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":truex,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":nul,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":01,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":1.,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":-,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":1e,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":+1,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":.5,\"root\":{\"path\":\"rootfs\"}}",
            "{\"a\":1-2,\"root\":{\"path\":\"rootfs\"}}",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                put_cfg(bad[i]);
                ck_assert_msg(mpi_pstate_container_oci_sees(dir, LIB) == -EINVAL, "accepted: %s",
                              bad[i]);
        }
        put_cfg("{\"a\":[-0.5e+3,0,10,1E2,true,false,null],\"root\":{\"path\":\"rootfs\"}}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 1);
}
END_TEST

START_TEST(bundle_path_with_a_newline_is_not_read)
{
        char forged[700], path[800];

        /* A readable bundle whose root has the library: only its name is
         * wrong ("...\n<a forged slurmd log line>"). */
        snprintf(forged, sizeof(forged), "%s/b\nerror: forged", dir);
        ck_assert_int_eq(mkdir(forged, 0755), 0);
        library_in_root(forged);
        snprintf(path, sizeof(path), "%s/config.json", forged);
        put(path, "{\"root\":{\"path\":\"rootfs\"}}", 26);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(forged, LIB), -EINVAL);
        forged[strlen(dir) + 2] = '\t';
        ck_assert_int_eq(mpi_pstate_container_oci_sees(forged, LIB), -EINVAL);
        ck_assert(!mpi_pstate_container_printable(forged));
        ck_assert(!mpi_pstate_container_printable("/a\x7f"));
        ck_assert(mpi_pstate_container_printable("/scratch/bundle dir/x"));
        /* the same bundle under a plain name is read */
        put_cfg("{\"root\":{\"path\":\"rootfs\"}}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, LIB), 1);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("container");
        TCase *tc = tcase_create("oci");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, deeply_nested_256k_is_refused_without_recursion);
        tcase_add_test(tc, nesting_within_the_bound_is_read);
        tcase_add_test(tc, size_bound);
        tcase_add_test(tc, strict_json);
        tcase_add_test(tc, strict_numbers_and_literals);
        tcase_add_test(tc, bundle_path_with_a_newline_is_not_read);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(suite(), false);
}
