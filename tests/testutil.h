/* testutil.h -- shared helpers for the Check suites. */
#ifndef KVPLAN_TESTUTIL_H
#define KVPLAN_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvplan/error.h"

/* Run one suite and return the number of failures (the test binary's exit code). */
static inline int run_suite(Suite *s)
{
    SRunner *r = srunner_create(s);
    int failed;
    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}

/* Fail the test with the error's text when st is not KVP_OK. */
#define ck_assert_kvp_ok(st, err)                                                           \
    do {                                                                                    \
        char ck_buf_[KVP_ERROR_TEXT_MAX];                                                   \
        enum kvp_status ck_st_ = (st);                                                      \
        ck_assert_msg(ck_st_ == KVP_OK, "status %d: %s", ck_st_,                            \
                      kvp_error_text(&(err), ck_buf_, sizeof ck_buf_));                     \
    } while (0)

#endif
