/* tok_hash.c - open-addressing maps for the tokenizer (see tok_hash.h). */
#include "tok_hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint32_t ns_tok_hash_bytes(const char *s, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 16777619u;
	}
	return h;
}

static size_t s_table_size(size_t n)
{
	size_t sz = 16;

	while (sz < 2 * n + 1) {
		if (sz > SIZE_MAX / 4)
			return 0;
		sz <<= 1;
	}
	return sz;
}

int ns_strmap_init(struct ns_strmap *m, size_t n, const char *blob)
{
	size_t sz = s_table_size(n);

	memset(m, 0, sizeof(*m));
	if (!sz)
		return -ENOMEM;
	m->slots = malloc(sz * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	for (size_t i = 0; i < sz; i++)
		m->slots[i].id = -1;
	m->mask = sz - 1;
	m->blob = blob;
	return 0;
}

void ns_strmap_free(struct ns_strmap *m)
{
	free(m->slots);
	m->slots = NULL;
}

int64_t ns_strmap_put(struct ns_strmap *m, uint32_t off, uint32_t len, int32_t id)
{
	const char *s = m->blob + off;
	uint32_t h = ns_tok_hash_bytes(s, len);

	for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
		struct ns_strmap_slot *sl = &m->slots[i];

		if (sl->id < 0) {
			sl->hash = h;
			sl->id = id;
			sl->off = off;
			sl->len = len;
			return 0;
		}
		if (sl->hash == h && sl->len == len && !memcmp(m->blob + sl->off, s, len))
			return (int64_t)sl->id + 1;
	}
}

int32_t ns_strmap_get(const struct ns_strmap *m, const char *s, size_t n)
{
	uint32_t h = ns_tok_hash_bytes(s, n);

	for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
		const struct ns_strmap_slot *sl = &m->slots[i];

		if (sl->id < 0)
			return -1;
		if (sl->hash == h && sl->len == n && !memcmp(m->blob + sl->off, s, n))
			return sl->id;
	}
}

static size_t s_pair_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return (size_t)k;
}

int ns_pairmap_init(struct ns_pairmap *m, size_t n)
{
	size_t sz = s_table_size(n);

	memset(m, 0, sizeof(*m));
	if (!sz)
		return -ENOMEM;
	m->slots = malloc(sz * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	for (size_t i = 0; i < sz; i++)
		m->slots[i].key = UINT64_MAX;
	m->mask = sz - 1;
	return 0;
}

void ns_pairmap_free(struct ns_pairmap *m)
{
	free(m->slots);
	m->slots = NULL;
}

void ns_pairmap_put(struct ns_pairmap *m, int32_t left, int32_t right, int32_t rank,
		    int32_t merged)
{
	uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;

	for (size_t i = s_pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
		struct ns_pairmap_slot *sl = &m->slots[i];

		if (sl->key == key)
			return;
		if (sl->key == UINT64_MAX) {
			sl->key = key;
			sl->rank = rank;
			sl->merged = merged;
			return;
		}
	}
}

const struct ns_pairmap_slot *ns_pairmap_get(const struct ns_pairmap *m, int32_t left,
					     int32_t right)
{
	uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;

	for (size_t i = s_pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
		const struct ns_pairmap_slot *sl = &m->slots[i];

		if (sl->key == key)
			return sl;
		if (sl->key == UINT64_MAX)
			return NULL;
	}
}
