/* check.h: what the API test programs of tests/c share.  CHECK(cond) counts a check and, when
 * cond is false, prints one FAIL line: the program (CHECK_NAME, defined before the include),
 * the line, the condition, errno, and check_where (a program may say where it is, e.g. "shift
 * 12").  check_report() ends main: "ok N checks" and 0, or the count of failures and 1. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H
#include <errno.h>
#include <stdio.h>

static int checks, failures;
static char check_where[64];

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) {                                                                   \
            failures++;                                                                  \
            printf(CHECK_NAME ": FAIL line %d%s%s: %s (errno %d)\n", __LINE__,            \
                   check_where[0] ? " " : "", check_where, #cond, errno);                \
        }                                                                                \
    } while (0)

static int check_report(const char *detail)
{
    if (failures) {
        printf(CHECK_NAME ": %d of %d checks failed%s\n", failures, checks, detail);
        return 1;
    }
    printf("ok %d checks\n", checks);
    return 0;
}
#endif
