/* srv_think.c - see srv_think.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_think.h"

#define S_OPEN "<think>"
#define S_CLOSE "</think>"

static bool s_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Is p[0, n) a proper prefix of the marker m? */
static bool s_prefix_of(const char *p, size_t n, const char *m)
{
	return n < strlen(m) && !memcmp(p, m, n);
}

/* Drop h[0, k). */
static void s_drop(struct ns_text *h, size_t k)
{
	memmove(h->buf, h->buf + k, h->len - k);
	h->len -= k;
	h->buf[h->len] = 0;
}

/* Inside the block: hand on reasoning up to </think> (or up to what may start it or be
 * trailing whitespace). Returns 1 when </think> was consumed. */
static int s_in(struct srv_think *t, struct ns_text *reasoning)
{
	struct ns_text *h = &t->held;
	const char *end = memmem(h->buf, h->len, S_CLOSE, strlen(S_CLOSE));
	size_t stop = end ? (size_t)(end - h->buf) : h->len, keep = stop;

	if (!t->in_started) { /* the newline after <think> is layout */
		size_t k = 0;

		while (k < stop && s_ws(h->buf[k]))
			k++;
		s_drop(h, k);
		stop -= k;
		keep = stop;
		if (!stop && !end)
			return 0;
		t->in_started = true;
	}
	if (!end) /* keep a possible start of </think>, and whitespace before it */
		for (size_t k = 1; k <= h->len && k < strlen(S_CLOSE); k++)
			if (s_prefix_of(h->buf + h->len - k, k, S_CLOSE))
				keep = h->len - k;
	while (keep > 0 && s_ws(h->buf[keep - 1]))
		keep--;
	if (keep && ns_text_append(reasoning, h->buf, keep) < 0)
		return -ENOMEM;
	if (end) {
		s_drop(h, stop + strlen(S_CLOSE));
		t->state = SRV_THINK_GAP;
		return 1;
	}
	s_drop(h, keep);
	return 0;
}

int srv_think_feed(struct srv_think *t, const char *text, size_t len, struct ns_text *reasoning,
		   struct ns_text *answer)
{
	struct ns_text *h = &t->held;

	if (t->state == SRV_THINK_ANSWER)
		return ns_text_append(answer, text, len) < 0 ? -ENOMEM : 0;
	if (len && ns_text_append(h, text, len) < 0)
		return -ENOMEM;
	if (!h->len)
		return 0;
	if (t->state == SRV_THINK_LEAD) {
		size_t k = 0;

		while (k < h->len && s_ws(h->buf[k]))
			k++;
		if (h->len - k >= strlen(S_OPEN) && !memcmp(h->buf + k, S_OPEN, strlen(S_OPEN))) {
			s_drop(h, k + strlen(S_OPEN));
			t->state = SRV_THINK_IN;
		} else if (s_prefix_of(h->buf + k, h->len - k, S_OPEN)) {
			return 0; /* whitespace, maybe a marker to come */
		} else {
			t->state = SRV_THINK_ANSWER; /* no thinking: all of it is answer */
			if (ns_text_append(answer, h->buf, h->len) < 0)
				return -ENOMEM;
			h->len = 0;
			return 0;
		}
	}
	if (t->state == SRV_THINK_IN) {
		int rc = s_in(t, reasoning);

		if (rc <= 0)
			return rc;
	}
	/* SRV_THINK_GAP: the separator after </think> */
	while (h->len && s_ws(h->buf[0]))
		s_drop(h, 1);
	if (!h->len)
		return 0;
	t->state = SRV_THINK_ANSWER;
	if (ns_text_append(answer, h->buf, h->len) < 0)
		return -ENOMEM;
	h->len = 0;
	return 0;
}

int srv_think_finish(struct srv_think *t, struct ns_text *reasoning, struct ns_text *answer)
{
	struct ns_text *h = &t->held;
	size_t n = h->len;
	int rc = 0;

	if (!n)
		return 0;
	if (t->state == SRV_THINK_LEAD) {
		rc = ns_text_append(answer, h->buf, n);
	} else if (t->state == SRV_THINK_IN) { /* cut off inside: the held tail is reasoning */
		while (n > 0 && s_ws(h->buf[n - 1]))
			n--;
		rc = n ? ns_text_append(reasoning, h->buf, n) : 0;
	}
	h->len = 0;
	return rc < 0 ? -ENOMEM : 0;
}

void srv_think_free(struct srv_think *t)
{
	free(t->held.buf);
	memset(t, 0, sizeof(*t));
}
