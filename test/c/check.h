/*
 * check.h -- the C unit tests' one assertion: CHECK(cond) reports a
 * failed condition with its place and counts it in `failures', which the
 * test's main turns into its exit status.  One test program per file, one
 * thread checking at a time or the count is approximate (the tests check
 * after joining their threads).
 */
#ifndef MF_TEST_CHECK_H
#define MF_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

#endif
