/* api.h -- KVP_API marks a declaration of libkvplan's public interface.
 *
 * The library is compiled with -fvisibility=hidden and its archive is one
 * object whose hidden symbols are made local (Makefile, $(LIB)): a name is
 * exported only when a header of include/kvplan declares it with KVP_API,
 * and `make check-symbols` compares the archive's exports with those
 * declarations, both ways. */
#ifndef KVPLAN_API_H
#define KVPLAN_API_H

#if defined(__GNUC__) || defined(__clang__)
#define KVP_API __attribute__((visibility("default")))
#else
#define KVP_API
#endif

#endif
