/* tok_spm.c - SentencePiece BPE ("llama" vocabularies) for one text fragment.
 *
 * Spaces become U+2581; the text starts as one symbol per UTF-8 character; repeatedly the
 * adjacent pair whose concatenation is the vocabulary token of highest score (ties: leftmost)
 * is merged. A final symbol that is no token is emitted as byte tokens <0xXX> (byte
 * fallback). Same algorithm as sentencepiece's BPE model and llama.cpp's SPM tokenizer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	struct s_big *heap;
	size_t n, cap;
};

static bool s_better(const struct s_big *a, const struct s_big *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int s_push(struct s_spm *s, const struct s_big *b)
{
	size_t i;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct s_big *h;

		if (cap > SIZE_MAX / sizeof(*h))
			return -ENOMEM;
		h = realloc(s->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->cap = cap;
	}
	i = s->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!s_better(b, &s->heap[p]))
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = *b;
	return 0;
}

static struct s_big s_pop(struct s_spm *s)
{
	struct s_big top = s->heap[0], last = s->heap[--s->n];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct s_big *best = &last;

		if (l < s->n && s_better(&s->heap[l], best)) {
			m = l;
			best = &s->heap[l];
		}
		if (r < s->n && s_better(&s->heap[r], best))
			m = r;
		if (m == i)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->n)
		s->heap[i] = last;
	return top;
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
	return s_push(s, &b);
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
	while (s.n) {
		struct s_big b = s_pop(&s);
		struct s_sym *l = &s.sym[b.left], *r = &s.sym[b.right];

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
	free(s.heap);
	return rc;
}
