#!/usr/bin/env bash
# Other people's tests under HC (issue 35): mimalloc's test-stress, fetched and built outside
# the repository (never committed), run under LD_PRELOAD of each library given, at 1 to 64
# threads, each run under a time limit; prints the pass counts per library as Markdown.
#
#   bench/external_suites.sh [--work DIR] [--mimalloc SRC] [--glibc SRC] [--runs N] LIB...
#
#   LIB          a malloc shared library to preload, or "glibc" for none
#                (e.g. build/libhcmalloc.so build/libhcmalloc-debug.so)
#   --work DIR   where sources and binaries go (default /tmp/hctune-external)
#   --mimalloc SRC  a mimalloc checkout to use instead of cloning
#                https://github.com/microsoft/mimalloc (depth 1) into DIR
#   --runs N     runs of each thread count (default 2)
#   --glibc SRC  also glibc's own malloc tests (malloc/tst-*.c of SRC, a glibc checkout at the
#                installed glibc's version, e.g. git clone --branch glibc-2.36
#                https://sourceware.org/git/glibc.git), each built standalone against a small
#                stand-in for glibc's test support (written below, not glibc's), run under
#                glibc first: only the tests the installed glibc passes count; then under each
#                LIB, each with a 300 s limit.  Tests that need glibc internals do not build and
#                are listed as such.
#
# test-stress is built with -DUSE_STD_MALLOC (plain malloc/calloc/realloc/free), so it tests
# whatever the preloaded library provides: each run allocates, transfers blocks between
# threads and frees them over ITER generations of threads, and checks every block's contents
# (an assert).  A run passes when it exits 0 within the limit.
set -euo pipefail

work=/tmp/hctune-external
mimalloc=""
glibc=""
runs=2
libs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work=$2; shift 2 ;;
        --mimalloc) mimalloc=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --glibc) glibc=$2; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        -*) echo "external_suites.sh: unknown option $1" >&2; exit 2 ;;
        *) libs+=("$1"); shift ;;
    esac
done
if [ ${#libs[@]} -eq 0 ]; then
    echo "external_suites.sh: name at least one library (or glibc)" >&2
    exit 2
fi
for lib in "${libs[@]}"; do
    if [ "$lib" != glibc ] && [ ! -f "$lib" ]; then
        echo "external_suites.sh: no such library: $lib" >&2
        exit 2
    fi
done
mkdir -p "$work"
if [ -z "$mimalloc" ]; then
    mimalloc=$work/mimalloc
    [ -d "$mimalloc" ] || git clone -q --depth 1 https://github.com/microsoft/mimalloc "$mimalloc"
fi
src=$mimalloc/test/test-stress.c
if [ ! -f "$src" ]; then
    echo "external_suites.sh: $src not found" >&2
    exit 2
fi
stress=$work/test-stress
cc -O2 -DNDEBUG -DUSE_STD_MALLOC -pthread -o "$stress" "$src"

threads=(1 4 16 64)
echo "mimalloc test-stress (SCALE 25, ITER 10), $runs runs per thread count, $(nproc) cores:"
echo "\`bench/external_suites.sh --runs $runs ${libs[*]}\`"
echo
echo "| library | $(printf '%s threads | ' "${threads[@]}")passed |"
echo "|---|$(printf -- '---|%.0s' "${threads[@]}")---|"
for lib in "${libs[@]}"; do
    row="| $(basename "$lib") |"
    passed=0
    total=0
    for t in "${threads[@]}"; do
        ok=0
        for ((r = 0; r < runs; r++)); do
            total=$((total + 1))
            if [ "$lib" = glibc ]; then
                env -u LD_PRELOAD timeout -s KILL 300 "$stress" "$t" 25 10 >/dev/null 2>&1 && ok=$((ok + 1))
            else
                LD_PRELOAD=$(readlink -f "$lib") timeout -s KILL 300 "$stress" "$t" 25 10 >/dev/null 2>&1 \
                    && ok=$((ok + 1))
            fi
        done
        passed=$((passed + ok))
        row="$row $ok/$runs |"
    done
    echo "$row $passed/$total |"
done

[ -z "$glibc" ] && exit 0

# ---- glibc's malloc tests, standalone ----
shim=$work/glibc-shim
mkdir -p "$shim/support"
cat > "$shim/support/check.h" <<'SHIM'
/* A stand-in for glibc's support/check.h: the macros malloc's tests use. */
#ifndef SHIM_CHECK_H
#define SHIM_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int shim_failed;
static inline void support_record_failure (void) { shim_failed = 1; }
#define SHIM_SAY(...) (printf ("error: %s:%d: ", __FILE__, __LINE__), printf (__VA_ARGS__), putchar ('\n'))
#define FAIL(...) (SHIM_SAY (__VA_ARGS__), support_record_failure ())
#define FAIL_RET(...) do { SHIM_SAY (__VA_ARGS__); support_record_failure (); return 1; } while (0)
#define FAIL_EXIT(st, ...) do { SHIM_SAY (__VA_ARGS__); fflush (stdout); exit (st); } while (0)
#define FAIL_EXIT1(...) FAIL_EXIT (1, __VA_ARGS__)
#define FAIL_UNSUPPORTED(...) FAIL_EXIT (77, __VA_ARGS__)
#define TEST_VERIFY(e) do { if (!(e)) FAIL ("not true: %s", #e); } while (0)
#define TEST_VERIFY_EXIT(e) do { if (!(e)) FAIL_EXIT1 ("not true: %s", #e); } while (0)
#define TEST_COMPARE(a, b) do { long long shim_a = (long long) (a), shim_b = (long long) (b); \
    if (shim_a != shim_b) FAIL ("%s == %s: %lld != %lld", #a, #b, shim_a, shim_b); } while (0)
#define TEST_COMPARE_STRING(a, b) do { const char *shim_a = (a), *shim_b = (b); \
    if ((shim_a == NULL) != (shim_b == NULL) || (shim_a && strcmp (shim_a, shim_b))) \
        FAIL ("%s == %s", #a, #b); } while (0)
#endif
SHIM
cat > "$shim/support/support.h" <<'SHIM'
#ifndef SHIM_SUPPORT_H
#define SHIM_SUPPORT_H
#include <support/check.h>
#include <stdarg.h>
static inline void *xmalloc (size_t n) { void *p = malloc (n); if (!p && n) FAIL_EXIT1 ("xmalloc"); return p; }
static inline void *xcalloc (size_t a, size_t b) { void *p = calloc (a, b); if (!p) FAIL_EXIT1 ("xcalloc"); return p; }
static inline void *xrealloc (void *o, size_t n) { void *p = realloc (o, n); if (!p && n) FAIL_EXIT1 ("xrealloc"); return p; }
static inline char *xstrdup (const char *s) { char *p = strdup (s); if (!p) FAIL_EXIT1 ("xstrdup"); return p; }
static inline char *xasprintf (const char *f, ...)
{ va_list ap; char *r; va_start (ap, f); if (vasprintf (&r, f, ap) < 0) FAIL_EXIT1 ("xasprintf"); va_end (ap); return r; }
#define write_message(s) fputs ((s), stdout)
#include <sys/mman.h>
static inline void *support_shared_allocate (size_t n)
{ void *p = mmap (NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) FAIL_EXIT1 ("mmap"); return p; }
static inline void support_shared_free (void *p) { (void) p; }
#endif
SHIM
cat > "$shim/support/xthread.h" <<'SHIM'
#ifndef SHIM_XTHREAD_H
#define SHIM_XTHREAD_H
#include <pthread.h>
#include <support/check.h>
static inline pthread_t xpthread_create (pthread_attr_t *a, void *(*f) (void *), void *arg)
{ pthread_t t; int e = pthread_create (&t, a, f, arg); if (e) FAIL_EXIT1 ("pthread_create: %d", e); return t; }
static inline void *xpthread_join (pthread_t t)
{ void *r; int e = pthread_join (t, &r); if (e) FAIL_EXIT1 ("pthread_join: %d", e); return r; }
static inline void xpthread_detach (pthread_t t) { if (pthread_detach (t)) FAIL_EXIT1 ("pthread_detach"); }
static inline void xpthread_cancel (pthread_t t) { if (pthread_cancel (t)) FAIL_EXIT1 ("pthread_cancel"); }
static inline void xpthread_barrier_init (pthread_barrier_t *b, pthread_barrierattr_t *a, unsigned n)
{ if (pthread_barrier_init (b, a, n)) FAIL_EXIT1 ("pthread_barrier_init"); }
static inline int xpthread_barrier_wait (pthread_barrier_t *b)
{ int e = pthread_barrier_wait (b); if (e && e != PTHREAD_BARRIER_SERIAL_THREAD) FAIL_EXIT1 ("barrier_wait"); return e == PTHREAD_BARRIER_SERIAL_THREAD; }
static inline void xpthread_barrier_destroy (pthread_barrier_t *b) { pthread_barrier_destroy (b); }
static inline void xpthread_barrierattr_init (pthread_barrierattr_t *a) { pthread_barrierattr_init (a); }
static inline void xpthread_barrierattr_destroy (pthread_barrierattr_t *a) { pthread_barrierattr_destroy (a); }
static inline void xpthread_barrierattr_setpshared (pthread_barrierattr_t *a, int s) { pthread_barrierattr_setpshared (a, s); }
static inline void xpthread_mutex_lock (pthread_mutex_t *m) { if (pthread_mutex_lock (m)) FAIL_EXIT1 ("lock"); }
static inline void xpthread_mutex_unlock (pthread_mutex_t *m) { if (pthread_mutex_unlock (m)) FAIL_EXIT1 ("unlock"); }
static inline void xpthread_attr_setstacksize (pthread_attr_t *a, size_t n) { if (pthread_attr_setstacksize (a, n)) FAIL_EXIT1 ("setstacksize"); }
static inline void xpthread_attr_setdetachstate (pthread_attr_t *a, int s) { if (pthread_attr_setdetachstate (a, s)) FAIL_EXIT1 ("setdetachstate"); }
#endif
SHIM
cat > "$shim/support/xunistd.h" <<'SHIM'
#ifndef SHIM_XUNISTD_H
#define SHIM_XUNISTD_H
#include <unistd.h>
#include <sys/wait.h>
#include <support/check.h>
static inline pid_t xfork (void) { pid_t p = fork (); if (p < 0) FAIL_EXIT1 ("fork"); return p; }
static inline pid_t xwaitpid (pid_t p, int *st, int fl) { pid_t r = waitpid (p, st, fl); if (r < 0) FAIL_EXIT1 ("waitpid"); return r; }
static inline void xclose (int fd) { if (close (fd) < 0) FAIL_EXIT1 ("close"); }
static inline void xpipe (int fds[2]) { if (pipe (fds) < 0) FAIL_EXIT1 ("pipe"); }
static inline void xdup2 (int a, int b) { if (dup2 (a, b) < 0) FAIL_EXIT1 ("dup2"); }
static inline void xunlink (const char *p) { if (unlink (p) < 0) FAIL_EXIT1 ("unlink"); }
#include <fcntl.h>
#include <sys/mman.h>
static inline int xopen (const char *p, int fl, int mode) { int fd = open (p, fl, mode); if (fd < 0) FAIL_EXIT1 ("open %s", p); return fd; }
static inline void *xmmap (void *a, size_t n, int prot, int fl, int fd)
{ void *p = mmap (a, n, prot, fl, fd, 0); if (p == MAP_FAILED) FAIL_EXIT1 ("mmap"); return p; }
static inline void xmunmap (void *p, size_t n) { if (munmap (p, n)) FAIL_EXIT1 ("munmap"); }
#endif
SHIM
cat > "$shim/support/xsignal.h" <<'SHIM'
#ifndef SHIM_XSIGNAL_H
#define SHIM_XSIGNAL_H
#include <signal.h>
#include <support/check.h>
static inline void xsignal (int s, void (*h) (int)) { if (signal (s, h) == SIG_ERR) FAIL_EXIT1 ("signal"); }
static inline void xraise (int s) { if (raise (s)) FAIL_EXIT1 ("raise"); }
#endif
SHIM
cat > "$shim/support/temp_file.h" <<'SHIM'
#ifndef SHIM_TEMP_FILE_H
#define SHIM_TEMP_FILE_H
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static inline int create_temp_file (const char *base, char **name)
{ char *t = malloc (strlen (base) + 32); strcpy (t, "/tmp/"); strcat (t, base); strcat (t, "XXXXXX");
  int fd = mkstemp (t); if (fd >= 0) unlink (t); if (name) *name = t; else free (t); return fd; }
static inline void add_temp_file (const char *n) { (void) n; }
#endif
SHIM
cat > "$shim/support/test-driver.h" <<'SHIM'
/* test-driver.c runs do_test; the default limit a test may scale its work to */
#ifndef DEFAULT_TIMEOUT
#define DEFAULT_TIMEOUT 20
#endif
SHIM
cat > "$shim/support/test-driver.c" <<'SHIM'
/* A stand-in for glibc's test driver: main runs the test function; a recorded failure or a
 * non-zero return fails (77: unsupported). */
#include <support/check.h>
#include <support/test-driver.h>
int main (int argc, char **argv)
{
  (void) argc; (void) argv;
#ifdef PREPARE
  PREPARE (argc, argv);
#endif
#ifdef TEST_FUNCTION
  int r = TEST_FUNCTION;
#elif defined TEST_FUNCTION_ARGV
  int r = TEST_FUNCTION_ARGV (argc, argv);
#else
  int r = do_test ();
#endif
  fflush (stdout);
  return r ? r : shim_failed;
}
SHIM
printf '#include <support/test-driver.c>\n' > "$shim/test-skeleton.c"
printf '#define array_length(a) (sizeof (a) / sizeof ((a)[0]))\n' > "$shim/array_length.h"
cat > "$shim/libc-diag.h" <<'SHIM'
#define DIAG_PUSH_NEEDS_COMMENT _Pragma ("GCC diagnostic push")
#define DIAG_POP_NEEDS_COMMENT _Pragma ("GCC diagnostic pop")
#define DIAG_IGNORE_NEEDS_COMMENT(v, o) _Pragma ("GCC diagnostic ignored \"-Wall\"")
#define DIAG_IGNORE_NEEDS_COMMENT_LLVM(o)
SHIM
mkdir -p "$shim/malloc" "$work/glibc-tests"
cp "$glibc"/malloc/tst-*.h "$shim/malloc/" 2>/dev/null || true
bins=()
nobuild=()
for t in "$glibc"/malloc/tst-*.c; do
    name=$(basename "$t" .c)
    cp "$t" "$shim/malloc/$name.c"
    if cc -O1 -w -D_GNU_SOURCE -fno-builtin -pthread -I "$shim" \
        -o "$work/glibc-tests/$name" "$shim/malloc/$name.c" -ldl >/dev/null 2>&1; then
        bins+=("$name")
    else
        nobuild+=("$name")
    fi
done
glibc_pass=()
for name in "${bins[@]}"; do
    (cd "$work/glibc-tests" && env -u LD_PRELOAD timeout -s KILL 300 "./$name" >/dev/null 2>&1) \
        && glibc_pass+=("$name")
done
echo
echo "glibc's malloc tests ($(basename "$glibc")): ${#bins[@]} built standalone, ${#glibc_pass[@]} pass" \
     "under the installed glibc; not built (glibc internals): ${nobuild[*]}"
echo
echo "| library | passed of the ${#glibc_pass[@]} | failed |"
echo "|---|---|---|"
for lib in "${libs[@]}"; do
    [ "$lib" = glibc ] && continue
    ok=0
    failed=()
    for name in "${glibc_pass[@]}"; do
        if (cd "$work/glibc-tests" && LD_PRELOAD=$(readlink -f "$lib") timeout -s KILL 300 "./$name" \
            >/dev/null 2>&1); then
            ok=$((ok + 1))
        else
            failed+=("$name")
        fi
    done
    echo "| $(basename "$lib") | $ok | ${failed[*]:-none} |"
done
