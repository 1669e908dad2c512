/* ydoc.h -- typed, place-aware access to a libyaml document (internal).
 *
 * Both text parsers (kvplan YAML models and Hugging Face config.json, which
 * is YAML flow syntax), plans and the GPU catalog load the whole document
 * with libyaml, then read it through these helpers, so every error carries
 * the node's file:line:col.
 *
 *     struct ydoc d;
 *     if (kvp_ydoc_load(&d, text, len, "x.yaml", &err) != KVP_OK) return ...;
 *     yaml_node_t *root = kvp_ydoc_root(&d);
 *     uint32_t hidden;
 *     st = kvp_ydoc_get_u32(&d, root, "hidden", true, &hidden, &err);
 *     kvp_ydoc_release(&d);
 *
 * kvp_ydoc_load builds the document from libyaml's events and stops at the first
 * event that breaks a limit below (docs/robustness.md), so no input costs
 * more than its bytes: duplicate keys, non-scalar keys, nesting deeper than
 * YDOC_MAX_DEPTH, more than YDOC_MAX_NODES nodes (aliases expanded), a
 * scalar longer than YDOC_MAX_SCALAR bytes, more than YDOC_MAX_ANCHORS
 * anchors or YDOC_MAX_ALIASES aliases, an alias inside its own anchor, more
 * than YDOC_MAX_DIRECTIVES directives. Only
 * the first document of a stream is read.
 * The struct owns the document until kvp_ydoc_release (safe on a failed load).
 */
#ifndef KVPLAN_YDOC_H
#define KVPLAN_YDOC_H

#include <stdbool.h>
#include <stdint.h>
#include <yaml.h>

#include "kvplan/error.h"

#define YDOC_MAX_DEPTH 32          /* collections around a node */
#define YDOC_MAX_NODES (1u << 18)  /* 262144; a config.json with 20,000 labels has 40,000 */
#define YDOC_MAX_SCALAR (1u << 16) /* bytes of one scalar; the longest field read is a path */
#define YDOC_MAX_ANCHORS 1024      /* each alias looks its anchor up among these */
#define YDOC_MAX_ALIASES 1024
#define YDOC_MAX_DIRECTIVES 64     /* %YAML and %TAG lines before the document */

struct ydoc {
    yaml_document_t doc;
    bool loaded;
    const char *file;
};

enum kvp_status kvp_ydoc_load(struct ydoc *d, const char *text, uint64_t len, const char *file,
                          struct kvp_error *err);
void kvp_ydoc_release(struct ydoc *d);
yaml_node_t *kvp_ydoc_root(struct ydoc *d);
yaml_node_t *kvp_ydoc_node(struct ydoc *d, int id);

/* An error at node n's place. The message may be err->msg itself (to move
 * an error raised without a place onto node n). */
enum kvp_status kvp_ydoc_fail(struct ydoc *d, const yaml_node_t *n, struct kvp_error *err,
                          enum kvp_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

bool kvp_ydoc_is_null(const yaml_node_t *n);
const char *kvp_ydoc_scalar(const yaml_node_t *n); /* NUL-terminated value, or NULL if not a scalar */

/* The value node of `key` in mapping map, or NULL if absent. */
yaml_node_t *kvp_ydoc_get(struct ydoc *d, yaml_node_t *map, const char *key);

/* The top of a kvplan file: root a mapping holding `key` (its schema
 * version, an integer put in *version), looked at before anything else, so
 * that a file that is not this kind of file (what: "model", "plan") is
 * refused with its place only, never a word of its content (a plan naming
 * /etc/shadow must not print its first line). */
enum kvp_status kvp_ydoc_want_schema(struct ydoc *d, yaml_node_t *root, const char *key, const char *what,
                                     uint32_t *version, struct kvp_error *err);

/* Fail on any key of map not in the NULL-terminated list allowed. */
enum kvp_status kvp_ydoc_check_keys(struct ydoc *d, yaml_node_t *map, const char *const *allowed,
                                struct kvp_error *err);

/* Require node n to be a mapping / sequence; `what` names it in the error. */
enum kvp_status kvp_ydoc_want_map(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err);
enum kvp_status kvp_ydoc_want_seq(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err);

/* Typed reads of a node. Numbers must be unquoted integers; `what` names the
 * field in errors ("'hidden' must be an integer (got \"32\")"). */
enum kvp_status kvp_ydoc_u64(struct ydoc *d, yaml_node_t *n, const char *what, uint64_t *out,
                         struct kvp_error *err);
enum kvp_status kvp_ydoc_u32(struct ydoc *d, yaml_node_t *n, const char *what, uint32_t *out,
                         struct kvp_error *err);
enum kvp_status kvp_ydoc_bool(struct ydoc *d, yaml_node_t *n, const char *what, bool *out,
                          struct kvp_error *err);
enum kvp_status kvp_ydoc_str(struct ydoc *d, yaml_node_t *n, const char *what, char *buf, uint32_t size,
                         struct kvp_error *err);

/* The same, looked up by key in map. A missing key is an error when required,
 * else leaves *out unchanged. A null value counts as missing. */
enum kvp_status kvp_ydoc_get_u64(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                             uint64_t *out, struct kvp_error *err);
enum kvp_status kvp_ydoc_get_u32(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                             uint32_t *out, struct kvp_error *err);
enum kvp_status kvp_ydoc_get_bool(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                              bool *out, struct kvp_error *err);
enum kvp_status kvp_ydoc_get_str(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                             char *buf, uint32_t size, struct kvp_error *err);

#endif
