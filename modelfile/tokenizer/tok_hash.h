/* tok_hash.h - the two open-addressing hash maps the tokenizer needs: token text -> id and
 * (left id, right id) -> BPE merge. Sized once at load (power of two, load <= 1/2). */
#ifndef NS_TOK_HASH_H
#define NS_TOK_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Keys are (offset, length) into a caller-owned blob that outlives the map. */
struct ns_strmap {
	struct ns_strmap_slot {
		uint32_t hash;
		int32_t id;   /* -1 = empty */
		uint32_t off; /* key text in blob */
		uint32_t len;
	} *slots;
	size_t mask;
	const char *blob;
};

uint32_t ns_tok_hash_bytes(const char *s, size_t n);
/* Room for n keys; returns 0 or -ENOMEM. */
int ns_strmap_init(struct ns_strmap *m, size_t n, const char *blob);
void ns_strmap_free(struct ns_strmap *m);
/* Insert; returns 0, or the existing id + 1 (> 0) when the text is already a key (kept). */
int64_t ns_strmap_put(struct ns_strmap *m, uint32_t off, uint32_t len, int32_t id);
int32_t ns_strmap_get(const struct ns_strmap *m, const char *s, size_t n);

struct ns_pairmap {
	struct ns_pairmap_slot {
		uint64_t key; /* (left << 32) | right; UINT64_MAX = empty */
		int32_t rank;
		int32_t merged;
	} *slots;
	size_t mask;
};

int ns_pairmap_init(struct ns_pairmap *m, size_t n);
void ns_pairmap_free(struct ns_pairmap *m);
/* Keeps the first (lowest-rank) entry of a key. */
void ns_pairmap_put(struct ns_pairmap *m, int32_t left, int32_t right, int32_t rank,
		    int32_t merged);
/* Returns the slot or NULL. */
const struct ns_pairmap_slot *ns_pairmap_get(const struct ns_pairmap *m, int32_t left,
					     int32_t right);

#endif
