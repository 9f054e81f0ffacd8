/* tok_heap.c - the merge heap's memory (tok_heap.h): doubles from 256 items. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tok_heap.h"

int ns_tok_heap_grow(struct ns_tok_heap *h, size_t item_size)
{
	size_t cap = h->cap ? h->cap * 2 : 256;
	unsigned char *p;

	if (cap < h->cap || !item_size || cap > SIZE_MAX / item_size)
		return -ENOMEM;
	p = realloc(h->items, cap * item_size);
	if (!p)
		return -ENOMEM;
	h->items = p;
	h->cap = cap;
	return 0;
}

void ns_tok_heap_free(struct ns_tok_heap *h)
{
	free(h->items);
	*h = (struct ns_tok_heap){ 0 };
}
