/* json_out.h - a minimal streaming JSON writer for nsctl's --json outputs. Not jansson (which
 * nsctl serve and run's summary use): jansson's integers stop at 2^63 - 1, and GGUF metadata
 * holds uint64 values that nsctl info must print exactly (docs/decisions.md). Bytes that are
 * not UTF-8 are written as U+FFFD, so the output is always JSON.
 * Usage: jo_begin_obj(&j); jo_key(&j, "n"); jo_u64(&j, 3); jo_end_obj(&j);
 * Commas and nesting are tracked by the struct; the caller owns the FILE. */
#ifndef NSCTL_JSON_OUT_H
#define NSCTL_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JO_MAX_DEPTH 32

struct json_out {
	FILE *f;
	int depth;
	bool first[JO_MAX_DEPTH];
	bool after_key;
};

void jo_init(struct json_out *j, FILE *f);
void jo_begin_obj(struct json_out *j);
void jo_end_obj(struct json_out *j);
void jo_begin_arr(struct json_out *j);
void jo_end_arr(struct json_out *j);
void jo_key(struct json_out *j, const char *key);
void jo_str(struct json_out *j, const char *s);
void jo_strn(struct json_out *j, const char *s, size_t n);
void jo_u64(struct json_out *j, uint64_t v);
void jo_i64(struct json_out *j, int64_t v);
void jo_f64(struct json_out *j, double v);
void jo_bool(struct json_out *j, bool v);
void jo_null(struct json_out *j);

#endif
