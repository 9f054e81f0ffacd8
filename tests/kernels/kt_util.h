/* kt_util.h - helpers of the kernel tests (header-only): oracle tensors through ns_model,
 * a seeded generator, and a minimal reference quantizer for random test matrices. */
#ifndef KT_UTIL_H
#define KT_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "ns_test.h"

#define KT_FAIL(...) NS_FAIL(__VA_ARGS__)

/* Read the bytes of rows [r0, r1) of tensor t; returns malloc'd buffer (at least 1 byte). */
static inline uint8_t *kt_read_rows(const struct ns_model *m, const struct ns_model_tensor *t,
				    uint64_t r0, uint64_t r1)
{
	size_t n = (size_t)((r1 - r0) * t->row_bytes);
	uint8_t *buf = malloc(n ? n : 1);
	int fd = open(m->shards[t->shard]->path, O_RDONLY);

	if (!buf || fd < 0)
		KT_FAIL("cannot read %s", m->shards[t->shard]->path);
	if (n && pread(fd, buf, n, (off_t)(t->file_offset + r0 * t->row_bytes)) != (ssize_t)n)
		KT_FAIL("short read of %s", t->name);
	close(fd);
	return buf;
}

/* xorshift64* in [0, 1) and approximate normal. */
static inline double kt_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
}

static inline float kt_normal(uint64_t *s)
{
	double a = 0;

	for (int i = 0; i < 12; i++)
		a += kt_rand(s);
	return (float)(a - 6.0);
}

#endif
