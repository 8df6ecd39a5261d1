/* hc_all.c -- the HC allocator's translation unit: its files, in order, once.
 *
 * The allocator is one translation unit, so every internal function is static and the
 * compiler sees the whole allocator at once.  This list is the order, said once: hctune.render
 * reads it (render.SOURCES) and templates/malloc.c.j2 inlines each file in turn after the knob
 * #defines, for the Makefile's build/malloc-generic.c, the build cache's libraries, the tests
 * and `hctune emit` alike.  Headers first; then each .c after the ones whose static functions
 * it calls (a call to a later file is declared at the end of hc_internal.h).
 *
 * A new file: add its #include line here, where its callees are above it; nothing else lists
 * the files.  Compiled alone (cc -c hc_all.c) it needs the knob #defines that render gives.
 */
#include "hc_stats.h"
#include "hc_internal.h"
#include "hc_block.h"
#include "hc_lock.h"
#include "hc_page.h"
#include "hc_lists.c"
#include "hc_big.c"
#include "hc_heap.c"
#include "hc_os.c"
#include "hc_coalesce.c"
#include "hc_alloc.c"
#include "hc_free.c"
#include "hc_bigcache.c"
#include "hc_realloc.c"
#include "hc_align.c"
#include "hc_arena.c"
#include "hc_stats.c"
#include "hc_debug.c"
#include "hc_tcache.c"
#include "hc_fit.c"
#include "hc_page.c"
#include "hc_run.c"
#include "hc_remote.c"
#include "hc_glibc.c"
#include "hc_api.c"
