/* harmony.c - see harmony.h. */
#include "harmony.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"

enum s_state {
	S_TEXT,      /* outside any message: text is NS_HARMONY_NONE */
	S_HEADER,    /* after <|start|>: role and recipient, dropped */
	S_CHANNEL,   /* after <|channel|>: the channel name (and recipient), dropped */
	S_CONSTRAIN, /* after <|constrain|>: the content type, dropped */
	S_BODY,      /* after <|message|>: text on the message's channel */
};

enum s_marker { M_START, M_CHANNEL, M_CONSTRAIN, M_MESSAGE, M_END };

static const struct {
	const char *text;
	enum s_marker m;
} s_markers[] = {
	{ "<|start|>", M_START },     { "<|channel|>", M_CHANNEL },
	{ "<|constrain|>", M_CONSTRAIN }, { "<|message|>", M_MESSAGE },
	{ "<|end|>", M_END },         { "<|return|>", M_END },
	{ "<|call|>", M_END },
};

#define S_HOLD_MAX 16 /* > the longest marker (13 bytes) */

struct ns_harmony {
	enum s_state st;
	enum ns_harmony_channel ch;   /* of the open body */
	enum ns_harmony_channel last; /* of the latest <|message|> */
	unsigned n_msg;
	char hold[S_HOLD_MAX];        /* a proper prefix of a marker, starting with '<' */
	size_t n_hold;
	char hdr[NS_HARMONY_HEADER_MAX]; /* header text since the header began (no markers) */
	size_t n_hdr;
	size_t name_off, name_end;    /* channel name: hdr[name_off, name_end); SIZE_MAX: none */
};

struct ns_harmony *ns_harmony_new(bool in_header)
{
	struct ns_harmony *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->st = in_header ? S_HEADER : S_TEXT;
	h->name_off = h->name_end = SIZE_MAX;
	return h;
}

void ns_harmony_destroy(struct ns_harmony **h)
{
	if (!h || !*h)
		return;
	free(*h);
	*h = NULL;
}

static const char *const s_names[] = {
	[NS_HARMONY_NONE] = "none",	      [NS_HARMONY_ANALYSIS] = "analysis",
	[NS_HARMONY_COMMENTARY] = "commentary", [NS_HARMONY_FINAL] = "final",
	[NS_HARMONY_OTHER] = "other",
};

const char *ns_harmony_channel_name(enum ns_harmony_channel ch)
{
	return (unsigned)ch < NS_ARRAY_LEN(s_names) ? s_names[ch] : "other";
}

static bool s_in_header(const struct ns_harmony *h)
{
	return h->st == S_HEADER || h->st == S_CHANNEL || h->st == S_CONSTRAIN;
}

static void s_header_reset(struct ns_harmony *h)
{
	h->n_hdr = 0;
	h->name_off = h->name_end = SIZE_MAX;
}

/* Text in the current state: reported, or kept as header text. */
static int s_text(struct ns_harmony *h, const char *p, size_t n, ns_harmony_fn cb, void *user)
{
	int rc;

	if (!n)
		return 0;
	if (h->st == S_BODY)
		return cb(h->ch, p, n, user);
	if (h->st == S_TEXT)
		return cb(NS_HARMONY_NONE, p, n, user);
	if (n <= sizeof(h->hdr) - h->n_hdr) {
		memcpy(h->hdr + h->n_hdr, p, n);
		h->n_hdr += n;
		return 0;
	}
	/* no header is this long: the model is not writing harmony; show what it wrote */
	h->st = S_TEXT;
	rc = h->n_hdr ? cb(NS_HARMONY_NONE, h->hdr, h->n_hdr, user) : 0;
	s_header_reset(h);
	return rc ? rc : cb(NS_HARMONY_NONE, p, n, user);
}

/* The first word of hdr[name_off, name_end) as a channel. */
static enum ns_harmony_channel s_channel(const struct ns_harmony *h)
{
	static const enum ns_harmony_channel known[] = { NS_HARMONY_ANALYSIS,
							 NS_HARMONY_COMMENTARY, NS_HARMONY_FINAL };
	size_t a = h->name_off, b = h->name_end == SIZE_MAX ? h->n_hdr : h->name_end, e;

	if (a == SIZE_MAX || a > b || b > h->n_hdr)
		return NS_HARMONY_NONE;
	while (a < b && (h->hdr[a] == ' ' || h->hdr[a] == '\t' || h->hdr[a] == '\n'))
		a++;
	for (e = a; e < b && h->hdr[e] != ' ' && h->hdr[e] != '\t' && h->hdr[e] != '\n'; e++)
		;
	for (size_t i = 0; i < NS_ARRAY_LEN(known); i++) {
		const char *name = s_names[known[i]];

		if (strlen(name) == e - a && !memcmp(name, h->hdr + a, e - a))
			return known[i];
	}
	return NS_HARMONY_OTHER;
}

static void s_marker(struct ns_harmony *h, enum s_marker m)
{
	switch (m) {
	case M_START:
		h->st = S_HEADER;
		s_header_reset(h);
		break;
	case M_CHANNEL:
		if (!s_in_header(h)) /* <|start|> left out: a header all the same */
			s_header_reset(h);
		h->st = S_CHANNEL;
		h->name_off = h->n_hdr;
		h->name_end = SIZE_MAX;
		break;
	case M_CONSTRAIN:
		if (h->st == S_CHANNEL)
			h->name_end = h->n_hdr;
		if (s_in_header(h))
			h->st = S_CONSTRAIN;
		break; /* stray in a body or outside: dropped */
	case M_MESSAGE:
		if (h->st == S_BODY)
			break; /* stray: dropped */
		h->ch = s_in_header(h) ? s_channel(h) : NS_HARMONY_NONE;
		h->last = h->ch;
		h->n_msg++;
		h->st = S_BODY;
		s_header_reset(h);
		break;
	case M_END:
		h->st = S_TEXT;
		s_header_reset(h);
		break;
	}
}

/* Is hold a marker (1, *m set), a proper prefix of one (0), or neither (-1)? */
static int s_match(const char *hold, size_t n, enum s_marker *m)
{
	int r = -1;

	for (size_t i = 0; i < NS_ARRAY_LEN(s_markers); i++) {
		size_t l = strlen(s_markers[i].text);

		if (n > l || memcmp(s_markers[i].text, hold, n))
			continue;
		if (n == l) {
			*m = s_markers[i].m;
			return 1;
		}
		r = 0;
	}
	return r;
}

int ns_harmony_feed(struct ns_harmony *h, const char *p, size_t n, ns_harmony_fn cb, void *user)
{
	size_t run = 0; /* start of the text not yet reported */
	int rc;

	for (size_t i = 0; i < n; i++) {
		char tmp[S_HOLD_MAX];
		enum s_marker m;
		size_t t;
		int k;

		if (!h->n_hold) {
			if (p[i] != '<')
				continue;
			if ((rc = s_text(h, p + run, i - run, cb, user)))
				return rc;
			h->hold[h->n_hold++] = '<';
			run = i + 1;
			continue;
		}
		h->hold[h->n_hold++] = p[i];
		run = i + 1;
		k = s_match(h->hold, h->n_hold, &m);
		if (k > 0) {
			h->n_hold = 0;
			s_marker(h, m);
		} else if (k < 0) {
			/* not a marker: its '<' is text; what follows may start one */
			t = h->n_hold - 1;
			memcpy(tmp, h->hold + 1, t);
			h->n_hold = 0;
			if ((rc = s_text(h, "<", 1, cb, user)) ||
			    (rc = ns_harmony_feed(h, tmp, t, cb, user)))
				return rc;
		}
	}
	return h->n_hold ? 0 : s_text(h, p + run, n - run, cb, user);
}

int ns_harmony_finish(struct ns_harmony *h, ns_harmony_fn cb, void *user)
{
	char tmp[S_HOLD_MAX];
	size_t t = h->n_hold;

	memcpy(tmp, h->hold, t);
	h->n_hold = 0;
	return s_text(h, tmp, t, cb, user);
}

enum ns_harmony_channel ns_harmony_last_channel(const struct ns_harmony *h)
{
	return h->last;
}

bool ns_harmony_in_body(const struct ns_harmony *h)
{
	return h->st == S_BODY;
}

unsigned ns_harmony_n_messages(const struct ns_harmony *h)
{
	return h->n_msg;
}
