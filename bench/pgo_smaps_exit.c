/* pgo_smaps_exit.c -- where a short program's resident memory is at its exit: preloaded after
 * the allocator, a destructor copies /proc/self/smaps to $SMAPS_OUT.<pid> (docs/profile-guided.md,
 * "A page size per class").
 *
 *   cc -O2 -shared -fPIC -o smaps_exit.so bench/pgo_smaps_exit.c
 *   SMAPS_OUT=/tmp/sm LD_PRELOAD="build/libhcmalloc.so ./smaps_exit.so" jq -n 1
 *   awk '/^[0-9a-f]+-/{m=$6} /^Rss:/{r[m]+=$2} END{for(k in r) print r[k], k}' /tmp/sm.* | sort -n
 *
 * (an anonymous mapping has no name: its lines sum under the empty key)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((destructor(101))) static void copy_smaps(void)
{
    const char *out = getenv("SMAPS_OUT");
    if (!out)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
    int in = open("/proc/self/smaps", O_RDONLY), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[65536];
    ssize_t n;
    while (in >= 0 && fd >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(fd, buf, (size_t)n) != n)
            break;
    if (in >= 0)
        close(in);
    if (fd >= 0)
        close(fd);
}
