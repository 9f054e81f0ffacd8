/* tok_heap.h - the binary min-heap both merge loops pop candidates from (BPE: lowest rank
 * first, SentencePiece: highest score first; ties leftmost). Items are copied in and out by
 * value; the order is the caller's "before" function. */
#ifndef NS_TOK_HEAP_H
#define NS_TOK_HEAP_H

#include <stdbool.h>
#include <stddef.h>

struct ns_tok_heap {
	unsigned char *items; /* n live items of item_size bytes, room for cap */
	size_t n, cap, item_size;
	bool (*before)(const void *a, const void *b); /* a pops before b */
};

/* Empty, no memory yet; item_size > 0. */
void ns_tok_heap_init(struct ns_tok_heap *h, size_t item_size,
		      bool (*before)(const void *a, const void *b));
void ns_tok_heap_free(struct ns_tok_heap *h);
/* Copies *item in; 0 or -ENOMEM (the heap is unchanged then). */
int ns_tok_heap_push(struct ns_tok_heap *h, const void *item);
/* Copies the first item to *out and removes it; h->n must be > 0. */
void ns_tok_heap_pop(struct ns_tok_heap *h, void *out);

#endif
