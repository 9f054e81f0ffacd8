/* tok_heap.c - binary min-heap of fixed-size items under a caller's order (tok_heap.h).
 *
 * Growth doubles from 256 items. A popped heap moves its last item down from the root
 * without a temporary: that item stays in its slot (index n after the pop) while the holes
 * it passes are filled, since sifting down only writes below n. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_heap.h"

static void *s_at(const struct ns_tok_heap *h, size_t i)
{
	return h->items + i * h->item_size;
}

void ns_tok_heap_init(struct ns_tok_heap *h, size_t item_size,
		      bool (*before)(const void *a, const void *b))
{
	*h = (struct ns_tok_heap){ .item_size = item_size, .before = before };
}

void ns_tok_heap_free(struct ns_tok_heap *h)
{
	free(h->items);
	h->items = NULL;
	h->n = h->cap = 0;
}

static int s_grow(struct ns_tok_heap *h)
{
	size_t cap = h->cap ? h->cap * 2 : 256;
	unsigned char *p;

	if (cap < h->cap || cap > SIZE_MAX / h->item_size)
		return -ENOMEM;
	p = realloc(h->items, cap * h->item_size);
	if (!p)
		return -ENOMEM;
	h->items = p;
	h->cap = cap;
	return 0;
}

int ns_tok_heap_push(struct ns_tok_heap *h, const void *item)
{
	size_t i;
	int rc;

	if (h->n == h->cap && (rc = s_grow(h)))
		return rc;
	i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!h->before(item, s_at(h, p)))
			break;
		memcpy(s_at(h, i), s_at(h, p), h->item_size);
		i = p;
	}
	memcpy(s_at(h, i), item, h->item_size);
	return 0;
}

void ns_tok_heap_pop(struct ns_tok_heap *h, void *out)
{
	const void *last;
	size_t i = 0, n;

	memcpy(out, s_at(h, 0), h->item_size);
	n = --h->n;
	last = s_at(h, n);
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const void *best = last;

		if (l < n && h->before(s_at(h, l), best)) {
			m = l;
			best = s_at(h, l);
		}
		if (r < n && h->before(s_at(h, r), best))
			m = r;
		if (m == i)
			break;
		memcpy(s_at(h, i), s_at(h, m), h->item_size);
		i = m;
	}
	if (i != n)
		memcpy(s_at(h, i), last, h->item_size);
}
