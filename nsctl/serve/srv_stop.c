/* srv_stop.c - see srv_stop.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_stop.h"

int srv_stop_init(struct srv_stop *st, const char *const *s, size_t n)
{
	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < n && i < SRV_STOP_MAX; i++) {
		if (!(st->s[i] = strdup(s[i]))) {
			srv_stop_free(st);
			return -ENOMEM;
		}
		st->len[i] = strlen(s[i]);
		st->n++;
	}
	return 0;
}

void srv_stop_free(struct srv_stop *st)
{
	for (size_t i = 0; i < st->n; i++)
		free(st->s[i]);
	free(st->held.buf);
	memset(st, 0, sizeof(*st));
}

/* Length of the longest tail of h[0, n) that is a proper prefix of one of the strings. */
static size_t s_tail(const struct srv_stop *st, const char *h, size_t n)
{
	size_t best = 0;

	for (size_t i = 0; i < st->n; i++)
		for (size_t k = st->len[i] - 1 < n ? st->len[i] - 1 : n; k > best; k--)
			if (!memcmp(h + n - k, st->s[i], k)) {
				best = k;
				break;
			}
	return best;
}

/* Hand on h[0, k) and keep h[k, len) held. */
static int s_emit(struct srv_stop *st, size_t k, struct ns_text *out)
{
	struct ns_text *h = &st->held;

	if (k && ns_text_append(out, h->buf, k) < 0)
		return -ENOMEM;
	if (!h->buf) /* nothing held yet (memmove's arguments must not be NULL) */
		return 0;
	memmove(h->buf, h->buf + k, h->len - k);
	h->len -= k;
	h->buf[h->len] = 0;
	return 0;
}

int srv_stop_feed(struct srv_stop *st, const char *text, size_t len, struct ns_text *out)
{
	struct ns_text *h = &st->held;
	size_t first = SIZE_MAX;

	if (st->hit || !len)
		return st->hit;
	if (!st->n)
		return ns_text_append(out, text, len) < 0 ? -ENOMEM : 0;
	if (ns_text_append(h, text, len) < 0)
		return -ENOMEM;
	/* the earliest occurrence of any stop string in the held text */
	for (size_t i = 0; i < st->n; i++) {
		const char *p = memmem(h->buf, h->len, st->s[i], st->len[i]);

		if (p && (size_t)(p - h->buf) < first)
			first = (size_t)(p - h->buf);
	}
	if (first != SIZE_MAX) {
		st->hit = true;
		if (s_emit(st, first, out) < 0)
			return -ENOMEM;
		h->len = 0;
		return 1;
	}
	return s_emit(st, h->len - s_tail(st, h->buf, h->len), out);
}

int srv_stop_flush(struct srv_stop *st, struct ns_text *out)
{
	if (st->hit)
		return 0;
	return s_emit(st, st->held.len, out);
}
