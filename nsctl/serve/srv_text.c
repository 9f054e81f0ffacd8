/* srv_text.c - see srv_text.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_text.h"
#include "tokenizer.h"

int srv_text_init(struct srv_text *t, const struct ns_tok *tok, enum srv_split split,
		  const char *const *stop, size_t n_stop)
{
	memset(t, 0, sizeof(*t));
	t->tok = tok;
	t->split = split;
	t->think_open = t->think_close = -1;
	if (split == SRV_SPLIT_THINK_OPEN) {
		t->split = split = SRV_SPLIT_THINK;
		t->think.state = SRV_THINK_IN;
	}
	if (split == SRV_SPLIT_THINK) {
		t->think_open = ns_tok_find(tok, "<think>", 7);
		t->think_close = ns_tok_find(tok, "</think>", 8);
	}
	if (!(t->dt = ns_detok_new(tok, false, false)) ||
	    (split == SRV_SPLIT_HARMONY && !(t->h = ns_harmony_new(true))) ||
	    srv_stop_init(&t->stop, stop, n_stop) < 0) {
		srv_text_free(t);
		return -ENOMEM;
	}
	return 0;
}

void srv_text_free(struct srv_text *t)
{
	ns_detok_destroy(&t->dt);
	ns_harmony_destroy(&t->h);
	srv_think_free(&t->think);
	srv_stop_free(&t->stop);
	memset(t, 0, sizeof(*t));
}

/* Answer text: through the stop strings. Returns 1 on a stop. */
static int s_answer(struct srv_text *t, const char *s, size_t n)
{
	return srv_stop_feed(&t->stop, s, n, t->answer);
}

static int s_on_channel(enum ns_harmony_channel ch, const char *text, size_t len, void *user)
{
	struct srv_text *t = user;
	unsigned msg = ns_harmony_n_messages(t->h);

	if (ch == NS_HARMONY_FINAL || ch == NS_HARMONY_NONE)
		return s_answer(t, text, len);
	/* analysis, commentary: reasoning, one line between messages */
	if ((t->reasoning_any && msg != t->reasoning_msg &&
	     ns_text_append(t->reasoning, "\n", 1) < 0) ||
	    ns_text_append(t->reasoning, text, len) < 0)
		return -ENOMEM;
	t->reasoning_msg = msg;
	t->reasoning_any = true;
	return 0;
}

/* Detokenized text into the split. Returns 1 on a stop. */
static int s_text(struct srv_text *t, const char *s, size_t n)
{
	struct ns_text ans = { 0 };
	int rc;

	if (!n)
		return 0;
	switch (t->split) {
	case SRV_SPLIT_HARMONY:
		return ns_harmony_feed(t->h, s, n, s_on_channel, t);
	case SRV_SPLIT_THINK:
		rc = srv_think_feed(&t->think, s, n, t->reasoning, &ans);
		if (rc == 0 && ans.len)
			rc = s_answer(t, ans.buf, ans.len);
		free(ans.buf);
		return rc;
	default:
		return s_answer(t, s, n);
	}
}

int srv_text_token(struct srv_text *t, int32_t id, struct ns_text *reasoning,
		   struct ns_text *answer)
{
	const char *s;
	size_t n;
	int rc;

	t->reasoning = reasoning;
	t->answer = answer;
	if (t->stop.hit)
		return 1;
	if (id >= 0 && (id == t->think_open || id == t->think_close)) {
		/* a marker the detokenizer would not render: what it holds first, then it */
		rc = ns_detok_flush(t->dt, &s, &n);
		if (rc == 0)
			rc = s_text(t, s, n);
		if (rc == 0)
			rc = ns_tok_piece(t->tok, id, true, &s, &n);
		return rc == 0 ? s_text(t, s, n) : rc;
	}
	rc = ns_detok_feed(t->dt, id, &s, &n);
	return rc < 0 ? rc : s_text(t, s, n);
}

int srv_text_finish(struct srv_text *t, struct ns_text *reasoning, struct ns_text *answer)
{
	struct ns_text ans = { 0 };
	const char *s;
	size_t n;
	int rc;

	t->reasoning = reasoning;
	t->answer = answer;
	if (t->stop.hit)
		return 0;
	rc = ns_detok_flush(t->dt, &s, &n);
	if (rc == 0)
		rc = s_text(t, s, n);
	if (rc == 0 && t->split == SRV_SPLIT_HARMONY)
		rc = ns_harmony_finish(t->h, s_on_channel, t);
	if (rc == 0 && t->split == SRV_SPLIT_THINK) {
		rc = srv_think_finish(&t->think, reasoning, &ans);
		if (rc == 0 && ans.len)
			rc = s_answer(t, ans.buf, ans.len);
		free(ans.buf);
	}
	if (rc == 1) /* a stop string in the held tail */
		return 0;
	return rc < 0 ? rc : srv_stop_flush(&t->stop, answer);
}
