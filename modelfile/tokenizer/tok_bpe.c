/* tok_bpe.c - pre-tokenizer split (PCRE2) and BPE merges by rank for one text fragment.
 *
 * A fragment is split by each pattern of the pre-tokenizer in turn (matches and the gaps
 * between them both become pieces, as Hugging Face's Split(behavior=Isolated) does). Each
 * final piece (a "word") starts as one symbol per byte (byte-level BPE: the GPT-2 alphabet
 * token of that byte) or per UTF-8 character (gemma4), and adjacent symbols are merged
 * lowest rank first (ties: leftmost first) until no pair is a merge. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "tok_heap.h"
#include "tok_internal.h"

struct s_sym {
	int32_t id;   /* token id, -1 when the text is no token */
	int32_t prev; /* -1 = none */
	int32_t next;
	uint32_t start; /* bytes in the word */
	uint32_t len;   /* 0 = merged into its left neighbour */
};

struct s_cand {
	int32_t rank;
	int32_t left, right;
	int32_t merged;
	uint32_t llen, rlen;
};

/* Scratch reused across the words of one encode call. */
struct s_session {
	const struct ns_tok *t;
	struct ns_ivec *out;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack *jstack;
	struct s_sym *sym;
	size_t sym_cap;
	struct ns_tok_heap heap; /* of struct s_cand */
	char *buf; /* byte-encoded word, for whole-word lookups */
	size_t buf_cap;
};

static bool s_cand_less(const void *pa, const void *pb)
{
	const struct s_cand *a = pa, *b = pb;

	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int s_try_pair(struct s_session *s, int32_t left, int32_t right)
{
	const struct ns_pairmap_slot *m;
	struct s_cand c;

	if (left < 0 || right < 0 || s->sym[left].id < 0 || s->sym[right].id < 0)
		return 0;
	m = ns_pairmap_get(&s->t->merges, s->sym[left].id, s->sym[right].id);
	if (!m)
		return 0;
	c.rank = m->rank;
	c.left = left;
	c.right = right;
	c.merged = m->merged;
	c.llen = s->sym[left].len;
	c.rlen = s->sym[right].len;
	return ns_tok_heap_push(&s->heap, &c, sizeof(c), s_cand_less);
}

/* The text a word is looked up by: byte-encoded (GPT-2 alphabet) or as it is. */
static int s_word_text(struct s_session *s, const char *w, size_t n, const char **txt,
		       size_t *tlen)
{
	size_t k = 0;

	if (!s->t->byte_encode) {
		*txt = w;
		*tlen = n;
		return 0;
	}
	if (n > (SIZE_MAX - 8) / 2)
		return -ENOMEM;
	if (s->buf_cap < 2 * n) {
		char *b = realloc(s->buf, 2 * n);

		if (!b)
			return -ENOMEM;
		s->buf = b;
		s->buf_cap = 2 * n;
	}
	for (size_t i = 0; i < n; i++) {
		char tmp[4];
		size_t l = ns_utf8_encode(ns_tok_byte_to_cp((uint8_t)w[i]), tmp);

		memcpy(s->buf + k, tmp, l);
		k += l;
	}
	*txt = s->buf;
	*tlen = k;
	return 0;
}

static int s_emit_bytes(struct s_session *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int32_t id = s->t->byte_to_id[(uint8_t)p[i]];

		if (id >= 0 && ns_ivec_push(s->out, id))
			return -ENOMEM;
	}
	return 0;
}

static bool s_all_newlines(const char *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (w[i] != '\n')
			return false;
	return true;
}

static int s_word(struct s_session *s, const char *w, size_t n)
{
	const struct ns_tok *t = s->t;
	size_t nsym = 0;
	int rc;

	if (!n)
		return 0;
	/* gemma4: a run of newlines that is a token is that token (its merges would split it) */
	if (t->kind == NS_TOK_SPM_BPE && s_all_newlines(w, n)) {
		int32_t id = ns_strmap_get(&t->text_to_id, w, n);

		if (id >= 0)
			return ns_ivec_push(s->out, id);
	}
	if (t->ignore_merges) {
		const char *txt;
		size_t tlen;
		int32_t id;

		rc = s_word_text(s, w, n, &txt, &tlen);
		if (rc)
			return rc;
		id = ns_strmap_get(&t->text_to_id, txt, tlen);
		if (id >= 0)
			return ns_ivec_push(s->out, id);
	}
	if (n > INT32_MAX)
		return -ENOMEM;
	if (s->sym_cap < n) {
		struct s_sym *p = realloc(s->sym, n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->sym = p;
		s->sym_cap = n;
	}
	for (size_t i = 0; i < n;) {
		size_t l = t->byte_encode ? 1 : ns_utf8_len((uint8_t)w[i]);
		struct s_sym *y = &s->sym[nsym];

		if (l > n - i)
			l = n - i;
		y->id = t->byte_encode ? t->byte_to_id[(uint8_t)w[i]]
				       : ns_strmap_get(&t->text_to_id, w + i, l);
		y->prev = (int32_t)nsym - 1;
		y->next = (int32_t)nsym + 1;
		y->start = (uint32_t)i;
		y->len = (uint32_t)l;
		nsym++;
		i += l;
	}
	s->sym[nsym - 1].next = -1;

	s->heap.n = 0;
	for (size_t i = 1; i < nsym; i++)
		if ((rc = s_try_pair(s, (int32_t)i - 1, (int32_t)i)))
			return rc;
	while (s->heap.n) {
		struct s_sym *l, *r;
		struct s_cand c;

		ns_tok_heap_pop(&s->heap, &c, sizeof(c), s_cand_less);
		l = &s->sym[c.left];
		r = &s->sym[c.right];

		if (!l->len || !r->len || l->len != c.llen || r->len != c.rlen ||
		    l->next != c.right)
			continue;
		l->len += r->len;
		l->id = c.merged;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			s->sym[r->next].prev = c.left;
		if ((rc = s_try_pair(s, l->prev, c.left)) || (rc = s_try_pair(s, c.left, l->next)))
			return rc;
	}
	for (int32_t i = 0; i >= 0; i = s->sym[i].next) {
		const struct s_sym *y = &s->sym[i];

		if (y->id >= 0)
			rc = ns_ivec_push(s->out, y->id);
		else
			rc = s_emit_bytes(s, w + y->start, y->len);
		if (rc)
			return rc;
	}
	return 0;
}

/* Split text[0:n) by pattern `level`; pieces go to the next pattern or become words. */
static int s_split(struct s_session *s, int level, const char *text, size_t n)
{
	const pcre2_code *re = s->t->re[level];
	size_t last = 0, off = 0;
	int rc;

	if (!re)
		return s_word(s, text, n);
	while (off < n) {
		PCRE2_SIZE *ov;
		size_t ms, me;

		rc = pcre2_match(re, (PCRE2_SPTR)text, n, off, 0, s->md, s->mctx);
		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0)
			return -EINVAL;
		ov = pcre2_get_ovector_pointer(s->md);
		ms = ov[0];
		me = ov[1];
		if (me <= ms) { /* empty match: not a piece; search on from the next character */
			off = ms + ns_utf8_len((uint8_t)text[ms]);
			continue;
		}
		if (ms > last && (rc = s_split(s, level + 1, text + last, ms - last)))
			return rc;
		if ((rc = s_split(s, level + 1, text + ms, me - ms)))
			return rc;
		last = off = me;
	}
	if (last < n)
		return s_split(s, level + 1, text + last, n - last);
	return 0;
}

int ns_tok_bpe_fragment(const struct ns_tok *t, const char *text, size_t len, struct ns_ivec *out)
{
	struct s_session s = { .t = t, .out = out };
	char *esc = NULL;
	int rc = -ENOMEM;

	if (t->escape_whitespace) { /* ' ' -> U+2581 */
		size_t k = 0;

		if (len > SIZE_MAX / 3)
			return -ENOMEM;
		esc = malloc(len * 3 + 1);
		if (!esc)
			return -ENOMEM;
		for (size_t i = 0; i < len; i++) {
			if (text[i] == ' ') {
				memcpy(esc + k, "\xe2\x96\x81", 3);
				k += 3;
			} else {
				esc[k++] = text[i];
			}
		}
		text = esc;
		len = k;
	}
	s.md = pcre2_match_data_create(4, NULL);
	s.mctx = pcre2_match_context_create(NULL);
	s.jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
	if (!s.md || !s.mctx || !s.jstack)
		goto out;
	pcre2_jit_stack_assign(s.mctx, NULL, s.jstack);
	rc = s_split(&s, 0, text, len);
out:
	pcre2_jit_stack_free(s.jstack);
	pcre2_match_context_free(s.mctx);
	pcre2_match_data_free(s.md);
	free(s.sym);
	ns_tok_heap_free(&s.heap);
	free(s.buf);
	free(esc);
	return rc;
}

int ns_tok_regex_compile(struct ns_tok *t, char *err, size_t errlen)
{
	for (int i = 0; i < NS_TOK_MAX_REGEX && t->pre->regex[i]; i++) {
		int ec;
		PCRE2_SIZE eo;
		pcre2_code *re = pcre2_compile((PCRE2_SPTR)t->pre->regex[i], PCRE2_ZERO_TERMINATED,
					       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
					       &ec, &eo, NULL);

		if (!re) {
			PCRE2_UCHAR msg[160];

			pcre2_get_error_message(ec, msg, sizeof(msg));
			ns_errf(err, errlen, "pre-tokenizer '%s': pattern %d offset %zu: %s",
				t->pre->name, i, (size_t)eo, (const char *)msg);
			return -EINVAL;
		}
		/* JIT is an optimisation: an interpreter match gives the same pieces. */
		(void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
		t->re[i] = re;
	}
	return 0;
}

void ns_tok_regex_free(struct ns_tok *t)
{
	for (int i = 0; i <= NS_TOK_MAX_REGEX; i++) {
		pcre2_code_free(t->re[i]);
		t->re[i] = NULL;
	}
}
