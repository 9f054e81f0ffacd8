/* tok_decode.c - token pieces, whole-sequence detokenization and the streaming detokenizer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define SPECIAL_ATTRS (NS_TOK_ATTR_UNKNOWN | NS_TOK_ATTR_CONTROL)

static int s_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Piece of token id with special rendering into out (room for 2 * len + 8 bytes). */
static size_t s_render(const struct ns_tok *t, uint32_t id, char *out)
{
	const struct ns_tok_token *tk = &t->tokens[id];
	const char *txt = t->blob + tk->off;
	size_t k = 0;

	if (tk->attr & (SPECIAL_ATTRS | NS_TOK_ATTR_USER_DEFINED)) {
		memcpy(out, txt, tk->len);
		return tk->len;
	}
	if (tk->attr & NS_TOK_ATTR_NORMAL) {
		for (size_t i = 0; i < tk->len;) {
			uint32_t cp;
			size_t l = ns_utf8_decode(txt + i, tk->len - i, &cp);
			int b;

			if (t->escape_whitespace) {
				if (l == 3 && !memcmp(txt + i, "\xe2\x96\x81", 3)) {
					out[k++] = ' ';
				} else {
					memcpy(out + k, txt + i, l);
					k += l;
				}
			} else if ((b = ns_tok_cp_to_byte(cp)) >= 0) {
				out[k++] = (char)b;
			} else {
				memcpy(out + k, txt + i, l); /* not in the byte alphabet: as it is */
				k += l;
			}
			i += l;
		}
		return k;
	}
	if (tk->attr & NS_TOK_ATTR_BYTE) {
		if (tk->len == 6 && s_hexval(txt[3]) >= 0 && s_hexval(txt[4]) >= 0) {
			out[0] = (char)(s_hexval(txt[3]) * 16 + s_hexval(txt[4]));
			return 1;
		}
		memcpy(out, txt, tk->len);
		return tk->len;
	}
	return 0; /* unused/undefined tokens render as nothing */
}

int ns_tok_build_pieces(struct ns_tok *t)
{
	uint64_t total = 0;
	size_t off = 0;

	for (uint32_t i = 0; i < t->n_vocab; i++)
		total += (uint64_t)t->tokens[i].len * 2 + 8;
	if (total > UINT32_MAX)
		return -ENOMEM;
	t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof(*t->piece_off));
	t->pieces = malloc(total);
	if (!t->piece_off || !t->pieces)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_vocab; i++) {
		t->piece_off[i] = (uint32_t)off;
		off += s_render(t, i, t->pieces + off);
	}
	t->piece_off[t->n_vocab] = (uint32_t)off;
	return 0;
}

int ns_tok_piece(const struct ns_tok *t, int32_t id, bool special, const char **piece, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n_vocab)
		return -EINVAL;
	*piece = t->pieces + t->piece_off[id];
	*len = t->piece_off[id + 1] - t->piece_off[id];
	if (!special && (t->tokens[id].attr & SPECIAL_ATTRS))
		*len = 0;
	return 0;
}

/* llama.cpp's clean_up_tokenization_spaces: " ?" " !" " ." " ," lose the space,
 * " ' " loses both spaces, " 's" " 'm" " 're" " 've" lose the space. */
static size_t s_clean_spaces(char *text, size_t total)
{
	size_t t1 = total, t2, t3;

	total = total ? 1 : 0;
	for (size_t i = 1; i < t1; i++) {
		char x = text[i];

		if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
			total--;
		text[total++] = x;
	}
	t2 = total;
	total = total ? 1 : 0;
	for (size_t i = 1; i < t2; i++) {
		char x = text[i];

		if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
			total--;
			text[++i] = '\0';
		}
		text[total++] = x;
	}
	t3 = total;
	total = total ? 1 : 0;
	for (size_t i = 1; i < t3; i++) {
		char x = text[i];

		if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
			char x1 = text[i + 1];

			if (x1 == 's' || x1 == 'm')
				total--;
			else if (i + 2 < t3 && ((x1 == 'r' && text[i + 2] == 'e') ||
						(x1 == 'v' && text[i + 2] == 'e')))
				total--;
		}
		text[total++] = x;
	}
	return total;
}

int ns_tok_detokenize(const struct ns_tok *t, const int32_t *ids, size_t n, bool remove_special,
		      bool unparse_special, char **out, size_t *outlen)
{
	bool remove_space = t->add_space_prefix;
	size_t total = 0, k = 0;
	char *buf;

	if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
		remove_space = false;
		ids++;
		n--;
	}
	if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos)
		n--;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab)
			return -EINVAL;
		total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
	}
	buf = malloc(total + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *p;
		size_t l;

		ns_tok_piece(t, ids[i], unparse_special, &p, &l);
		if (remove_space && l && p[0] == ' ') {
			p++;
			l--;
		}
		remove_space = false;
		if (l)
			memcpy(buf + k, p, l);
		k += l;
	}
	if (t->clean_spaces)
		k = s_clean_spaces(buf, k);
	buf[k] = '\0';
	*out = buf;
	*outlen = k;
	return 0;
}

/* ---- streaming ---- */

struct ns_detok {
	const struct ns_tok *t;
	bool unparse_special;
	bool first;
	char *buf;
	size_t len, cap, handed; /* buf[0:handed) went out on the previous call */
};

struct ns_detok *ns_detok_new(const struct ns_tok *t, bool unparse_special, bool at_start)
{
	struct ns_detok *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->t = t;
	d->unparse_special = unparse_special;
	d->first = at_start;
	return d;
}

void ns_detok_destroy(struct ns_detok **dp)
{
	if (!dp || !*dp)
		return;
	free((*dp)->buf);
	free(*dp);
	*dp = NULL;
}

/* Bytes of buf[0:n) that end on a character boundary: an unfinished multi-byte sequence at
 * the end is held back. */
static size_t s_complete(const char *buf, size_t n)
{
	size_t back = 0;

	while (back < n && back < 4 && ((uint8_t)buf[n - 1 - back] & 0xc0) == 0x80)
		back++;
	if (back == n || back == 4)
		return n; /* no lead byte in reach: invalid bytes, pass them on */
	{
		uint8_t lead = (uint8_t)buf[n - 1 - back];
		size_t need = ns_utf8_len(lead);

		if (lead >= 0xc0 && need > back + 1)
			return n - 1 - back;
	}
	return n;
}

int ns_detok_feed(struct ns_detok *d, int32_t id, const char **text, size_t *len)
{
	const char *p;
	size_t l;

	if (ns_tok_piece(d->t, id, d->unparse_special, &p, &l))
		return -EINVAL;
	if (d->handed)
		memmove(d->buf, d->buf + d->handed, d->len - d->handed);
	d->len -= d->handed;
	d->handed = 0;
	if (d->first && d->t->add_space_prefix && l && p[0] == ' ') {
		p++;
		l--;
	}
	d->first = false;
	if (d->len + l > d->cap) {
		size_t cap = (d->len + l) * 2 + 16;
		char *b = realloc(d->buf, cap);

		if (!b)
			return -ENOMEM;
		d->buf = b;
		d->cap = cap;
	}
	if (l)
		memcpy(d->buf + d->len, p, l);
	d->len += l;
	d->handed = d->len ? s_complete(d->buf, d->len) : 0;
	*text = d->buf ? d->buf : "";
	*len = d->handed;
	return 0;
}

int ns_detok_flush(struct ns_detok *d, const char **text, size_t *len)
{
	*text = d->buf ? d->buf + d->handed : "";
	*len = d->len - d->handed;
	d->handed = d->len;
	return 0;
}
