/* tok_spm.c - SentencePiece BPE ("llama" vocabularies) for one text fragment.
 *
 * Spaces become U+2581; the text starts as one symbol per UTF-8 character; repeatedly the
 * adjacent pair whose concatenation is the vocabulary token of highest score (ties: leftmost)
 * is merged. A final symbol that is no token is emitted as byte tokens <0xXX> (byte
 * fallback). Same algorithm as sentencepiece's BPE model and llama.cpp's SPM tokenizer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_heap.h"
#include "tok_internal.h"

struct s_sym {
	int32_t prev, next;
	uint32_t start, len; /* len 0 = merged away */
};

struct s_big {
	float score;
	int32_t left, right;
	uint32_t size;
};

struct s_spm {
	const struct ns_tok *t;
	const char *text;
	struct s_sym *sym;
	struct ns_tok_heap heap; /* of struct s_big */
};

static bool s_better(const void *pa, const void *pb)
{
	const struct s_big *a = pa, *b = pb;

	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int s_try(struct s_spm *s, int32_t left, int32_t right)
{
	struct s_big b;
	int32_t id;
	uint32_t size;

	if (left < 0 || right < 0)
		return 0;
	size = s->sym[left].len + s->sym[right].len;
	id = ns_strmap_get(&s->t->text_to_id, s->text + s->sym[left].start, size);
	if (id < 0)
		return 0;
	b.score = s->t->tokens[id].score;
	b.left = left;
	b.right = right;
	b.size = size;
	return ns_tok_heap_push(&s->heap, &b, sizeof(b), s_better);
}

int ns_tok_spm_fragment(const struct ns_tok *t, const char *text, size_t len, struct ns_ivec *out)
{
	struct s_spm s = { .t = t };
	char *esc;
	size_t k = 0, nsym = 0;
	int rc = -ENOMEM;

	if (!len)
		return 0;
	if (len > (SIZE_MAX - 1) / 3 || len > INT32_MAX / 3)
		return -ENOMEM;
	esc = malloc(len * 3 + 1);
	s.sym = malloc(len * 3 * sizeof(*s.sym));
	if (!esc || !s.sym)
		goto out;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ' && t->escape_whitespace) {
			memcpy(esc + k, "\xe2\x96\x81", 3);
			k += 3;
		} else {
			esc[k++] = text[i];
		}
	}
	s.text = esc;
	for (size_t i = 0; i < k;) {
		size_t l = ns_utf8_len((uint8_t)esc[i]);

		if (l > k - i)
			l = k - i;
		s.sym[nsym].prev = (int32_t)nsym - 1;
		s.sym[nsym].next = (int32_t)nsym + 1;
		s.sym[nsym].start = (uint32_t)i;
		s.sym[nsym].len = (uint32_t)l;
		nsym++;
		i += l;
	}
	s.sym[nsym - 1].next = -1;
	for (size_t i = 1; i < nsym; i++)
		if ((rc = s_try(&s, (int32_t)i - 1, (int32_t)i)))
			goto out;
	while (s.heap.n) {
		struct s_sym *l, *r;
		struct s_big b;

		ns_tok_heap_pop(&s.heap, &b, sizeof(b), s_better);
		l = &s.sym[b.left];
		r = &s.sym[b.right];

		if (!l->len || !r->len || l->len + r->len != b.size)
			continue;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			s.sym[r->next].prev = b.left;
		if ((rc = s_try(&s, l->prev, b.left)) || (rc = s_try(&s, b.left, l->next)))
			goto out;
	}
	rc = 0;
	for (int32_t i = 0; i >= 0 && !rc; i = s.sym[i].next) {
		const struct s_sym *y = &s.sym[i];
		int32_t id = ns_strmap_get(&t->text_to_id, esc + y->start, y->len);

		if (id >= 0) {
			rc = ns_ivec_push(out, id);
			continue;
		}
		for (uint32_t j = 0; j < y->len && !rc; j++) {
			id = t->byte_to_id[(uint8_t)esc[y->start + j]];
			if (id < 0)
				id = t->unk;
			if (id >= 0)
				rc = ns_ivec_push(out, id);
		}
	}
out:
	free(esc);
	free(s.sym);
	ns_tok_heap_free(&s.heap);
	return rc;
}
