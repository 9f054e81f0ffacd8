/* tok_encode.c - text -> ids: split out special tokens, normalize, tokenize each fragment,
 * add BOS/EOS. */

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* A fragment is either raw text [off, off + len) of the input or one special token. */
struct s_frag {
	int32_t token; /* -1 for text */
	size_t off, len;
};

struct s_frags {
	struct s_frag *v;
	size_t n, cap;
};

static int s_frag_push(struct s_frags *f, int32_t token, size_t off, size_t len)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct s_frag *v;

		if (cap > SIZE_MAX / sizeof(*v))
			return -ENOMEM;
		v = realloc(f->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = (struct s_frag){ token, off, len };
	return 0;
}

/* Split every text fragment of *cur at each occurrence of special token id into *next. */
static int s_split_special(const struct ns_tok *t, int32_t id, const char *text,
			   const struct s_frags *cur, struct s_frags *next)
{
	const struct ns_tok_token *tk = &t->tokens[id];
	const char *needle = t->blob + tk->off;

	next->n = 0;
	for (size_t i = 0; i < cur->n; i++) {
		struct s_frag f = cur->v[i];

		if (f.token >= 0 || f.len < tk->len) {
			if (s_frag_push(next, f.token, f.off, f.len))
				return -ENOMEM;
			continue;
		}
		while (f.len) {
			const char *m = memmem(text + f.off, f.len, needle, tk->len);
			size_t mo, llen, roff, rlen;

			if (!m) {
				if (s_frag_push(next, -1, f.off, f.len))
					return -ENOMEM;
				break;
			}
			mo = (size_t)(m - text);
			llen = mo - f.off;
			if (tk->attr & NS_TOK_ATTR_LSTRIP)
				while (llen && isspace((unsigned char)text[f.off + llen - 1]))
					llen--;
			if (llen && s_frag_push(next, -1, f.off, llen))
				return -ENOMEM;
			if (s_frag_push(next, id, 0, 0))
				return -ENOMEM;
			roff = mo + tk->len;
			rlen = f.off + f.len - roff;
			if (tk->attr & NS_TOK_ATTR_RSTRIP)
				while (rlen && isspace((unsigned char)text[roff])) {
					roff++;
					rlen--;
				}
			f.off = roff;
			f.len = rlen;
		}
	}
	return 0;
}

static int s_text_fragment(const struct ns_tok *t, const char *text, size_t len, bool prefix,
			   struct ns_ivec *out)
{
	char *norm = NULL, *tmp = NULL;
	size_t nlen;
	int rc;

	if (t->kind == NS_TOK_SPM) {
		if (prefix) { /* SentencePiece's dummy prefix */
			tmp = malloc(len + 1);
			if (!tmp)
				return -ENOMEM;
			tmp[0] = ' ';
			memcpy(tmp + 1, text, len);
			rc = ns_tok_spm_fragment(t, tmp, len + 1, out);
			free(tmp);
			return rc;
		}
		return ns_tok_spm_fragment(t, text, len, out);
	}
	if (t->nfc && len) {
		rc = ns_tok_nfc(text, len, &norm, &nlen);
		if (rc == -ENOMEM)
			return rc;
		if (rc == 0) {
			text = norm;
			len = nlen;
		}
		/* invalid UTF-8 cannot be normalized: it is tokenized as it is */
	}
	rc = ns_tok_bpe_fragment(t, text, len, out);
	free(norm);
	return rc;
}

int ns_tok_encode(const struct ns_tok *t, const char *text, size_t len, bool add_special,
		  bool parse_special, int32_t **ids, size_t *n)
{
	struct s_frags a = { 0 }, b = { 0 }, tmp;
	struct ns_ivec out = { 0 };
	bool prev_special = true;
	int rc = -ENOMEM;

	if (len && s_frag_push(&a, -1, 0, len))
		goto out;
	for (size_t i = 0; i < t->n_special && a.n; i++) {
		int32_t id = t->special[i];

		if (!parse_special && (t->tokens[id].attr & (NS_TOK_ATTR_CONTROL |
							      NS_TOK_ATTR_UNKNOWN)))
			continue;
		if ((rc = s_split_special(t, id, text, &a, &b)))
			goto out;
		tmp = a;
		a = b;
		b = tmp;
	}
	rc = 0;
	if (add_special && t->add_bos && t->bos >= 0)
		rc = ns_ivec_push(&out, t->bos);
	for (size_t i = 0; i < a.n && !rc; i++) {
		if (a.v[i].token >= 0) {
			rc = ns_ivec_push(&out, a.v[i].token);
			prev_special = true;
		} else {
			rc = s_text_fragment(t, text + a.v[i].off, a.v[i].len,
					     t->add_space_prefix && prev_special, &out);
			prev_special = false;
		}
	}
	if (!rc && add_special && t->add_eos && t->eos >= 0)
		rc = ns_ivec_push(&out, t->eos);
out:
	free(a.v);
	free(b.v);
	if (rc) {
		free(out.v);
		return rc;
	}
	if (!out.v) { /* empty result: still hand back a freeable pointer */
		out.v = malloc(sizeof(int32_t));
		if (!out.v)
			return -ENOMEM;
	}
	*ids = out.v;
	*n = out.n;
	return 0;
}
