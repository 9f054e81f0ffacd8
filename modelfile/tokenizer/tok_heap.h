/* tok_heap.h - the binary min-heap both merge loops pop candidates from (BPE: lowest rank
 * first, SentencePiece: highest score first; ties leftmost). Items are copied in and out by
 * value. Push and pop are inline and take the item size and order from the caller, so that
 * each tokenizer's copy compiles to fixed-size moves and a direct, inlined comparison (a
 * function pointer and memcpy of a runtime size made encoding ~30% slower). */
#ifndef NS_TOK_HEAP_H
#define NS_TOK_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Zero-initialised: empty, no memory. */
struct ns_tok_heap {
	unsigned char *items; /* n live items, room for cap */
	size_t n, cap;
};

/* Room for one more item of item_size bytes: 0 or -ENOMEM (the heap unchanged). */
int ns_tok_heap_grow(struct ns_tok_heap *h, size_t item_size);
void ns_tok_heap_free(struct ns_tok_heap *h);

/* before(a, b): a pops before b. */
typedef bool (*ns_tok_heap_before)(const void *a, const void *b);

/* Copies *item in; 0 or -ENOMEM. */
static inline int ns_tok_heap_push(struct ns_tok_heap *h, const void *item, size_t item_size,
				   ns_tok_heap_before before)
{
	size_t i;
	int rc;

	if (h->n == h->cap && (rc = ns_tok_heap_grow(h, item_size)))
		return rc;
	i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!before(item, h->items + p * item_size))
			break;
		memcpy(h->items + i * item_size, h->items + p * item_size, item_size);
		i = p;
	}
	memcpy(h->items + i * item_size, item, item_size);
	return 0;
}

/* Copies the first item to *out and removes it; h->n must be > 0. The last item moves down
 * from the root without a temporary: it stays in its slot (index n after the pop) while the
 * holes it passes are filled, since sifting down only writes below n. */
static inline void ns_tok_heap_pop(struct ns_tok_heap *h, void *out, size_t item_size,
				   ns_tok_heap_before before)
{
	const unsigned char *last;
	size_t i = 0, n;

	memcpy(out, h->items, item_size);
	n = --h->n;
	last = h->items + n * item_size;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const unsigned char *best = last;

		if (l < n && before(h->items + l * item_size, best)) {
			m = l;
			best = h->items + l * item_size;
		}
		if (r < n && before(h->items + r * item_size, best))
			m = r;
		if (m == i)
			break;
		memcpy(h->items + i * item_size, h->items + m * item_size, item_size);
		i = m;
	}
	if (i != n)
		memcpy(h->items + i * item_size, last, item_size);
}

#endif
