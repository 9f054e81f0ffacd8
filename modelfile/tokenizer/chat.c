/* chat.c - the chat formats of the families in chat.h, written out in C. Each renderer
 * follows its Jinja template statement by statement; comments quote the template logic. */
#include "chat.h"
#include "chat_lcpp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ns_util.h"

struct s_buf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void s_put(struct s_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void s_puts(struct s_buf *b, const char *s)
{
	s_put(b, s, strlen(s));
}

/* Python's str.isspace() for the code point starting at s (what Jinja's trim strips);
 * returns its byte length, 0 when it is no space. */
static size_t s_space_len(const char *s, size_t n)
{
	const uint8_t *u = (const uint8_t *)s;

	if (!n)
		return 0;
	if ((u[0] >= 0x09 && u[0] <= 0x0d) || (u[0] >= 0x1c && u[0] <= 0x20))
		return 1;
	if (n >= 2 && u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0))
		return 2;
	if (n >= 3 && u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) /* U+1680 */
		return 3;
	if (n >= 3 && u[0] == 0xe2 && u[1] == 0x80 &&
	    (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf)) /* U+2000-200A .. */
		return 3;
	if (n >= 3 && u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) /* U+205F */
		return 3;
	if (n >= 3 && u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) /* U+3000 */
		return 3;
	return 0;
}

/* Python str.strip(): s[*b:*e) without leading/trailing whitespace. */
static void s_trim(const char *s, size_t *b, size_t *e)
{
	size_t l;

	while (*b < *e && (l = s_space_len(s + *b, *e - *b)))
		*b += l;
	while (*e > *b) {
		size_t k = *e - 1;

		while (k > *b && ((uint8_t)s[k] & 0xc0) == 0x80 && *e - k < 4)
			k--;
		l = s_space_len(s + k, *e - k);
		if (!l || k + l != *e)
			break;
		*e = k;
	}
}

static void s_put_trimmed(struct s_buf *b, const char *s)
{
	size_t lo = 0, hi = strlen(s);

	s_trim(s, &lo, &hi);
	s_put(b, s + lo, hi - lo);
}

static bool s_is(const struct ns_chat_msg *m, const char *role)
{
	return m->role && !strcmp(m->role, role);
}

static const char *s_str(const char *s)
{
	return s ? s : "";
}

/* ---- Qwen3 ---- */

static bool s_starts(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static bool s_ends(const char *s, const char *p)
{
	size_t n = strlen(s), m = strlen(p);

	return n >= m && !strcmp(s + n - m, p);
}

static const char *s_last_strstr(const char *s, const char *p)
{
	const char *r = NULL, *q = s;

	while ((q = strstr(q, p))) {
		r = q;
		q++;
	}
	return r;
}

/* The Qwen templates' reasoning of an assistant message: m->reasoning (reasoning_content)
 * when given, else from a "</think>" in its content c:
 * content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n'), the content
 * becoming content.split('</think>')[-1].lstrip('\n'). *cb: where the content starts (it ends
 * with c); [*rb, *re): the reasoning ("" when none). */
static void s_think_split(const struct ns_chat_msg *m, const char *c, const char **cb,
			  const char **rb, const char **re)
{
	*cb = c;
	*rb = *re = "";
	if (m->reasoning) {
		*rb = m->reasoning;
		*re = *rb + strlen(*rb);
	} else if (strstr(c, "</think>")) {
		*cb = s_last_strstr(c, "</think>") + strlen("</think>");
		while (**cb == '\n')
			(*cb)++;
		*re = strstr(c, "</think>");
		while (*re > c && (*re)[-1] == '\n')
			(*re)--;
		*rb = c;
		for (const char *q = c; q + 7 <= *re; q++)
			if (!strncmp(q, "<think>", 7))
				*rb = q + 7;
		while (*rb < *re && **rb == '\n')
			(*rb)++;
	}
}

static int s_qwen3(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		   const struct ns_chat_opts *o, char *err, size_t errlen)
{
	size_t last_query = n ? n - 1 : 0;

	/* if messages[0].role == 'system': <|im_start|>system\n{content}<|im_end|>\n */
	if (n && s_is(&m[0], "system")) {
		s_puts(b, "<|im_start|>system\n");
		s_puts(b, s_str(m[0].content));
		s_puts(b, "<|im_end|>\n");
	}
	/* last_query_index: the last user message that is not a wrapped tool response */
	for (size_t k = n; k-- > 0;) {
		const char *c = s_str(m[k].content);

		if (s_is(&m[k], "user") &&
		    !(s_starts(c, "<tool_response>") && s_ends(c, "</tool_response>"))) {
			last_query = k;
			break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const char *c = s_str(m[i].content);

		if (s_is(&m[i], "user") || (s_is(&m[i], "system") && i > 0)) {
			s_puts(b, "<|im_start|>");
			s_puts(b, m[i].role);
			s_puts(b, "\n");
			s_puts(b, c);
			s_puts(b, "<|im_end|>\n");
		} else if (s_is(&m[i], "assistant")) {
			const char *cb, *ce = c + strlen(c), *rb, *re; /* content, reasoning */

			s_think_split(&m[i], c, &cb, &rb, &re);
			s_puts(b, "<|im_start|>assistant\n");
			if (i > last_query && (i == n - 1 || re > rb)) {
				/* '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' +
				 * content.lstrip('\n') */
				while (rb < re && *rb == '\n')
					rb++;
				while (re > rb && re[-1] == '\n')
					re--;
				while (cb < ce && *cb == '\n')
					cb++;
				s_puts(b, "<think>\n");
				s_put(b, rb, (size_t)(re - rb));
				s_puts(b, "\n</think>\n\n");
			}
			s_put(b, cb, (size_t)(ce - cb));
			s_puts(b, "<|im_end|>\n");
		} else if (s_is(&m[i], "tool")) {
			if (i == 0 || !s_is(&m[i - 1], "tool"))
				s_puts(b, "<|im_start|>user");
			s_puts(b, "\n<tool_response>\n");
			s_puts(b, c);
			s_puts(b, "\n</tool_response>");
			if (i == n - 1 || !s_is(&m[i + 1], "tool"))
				s_puts(b, "<|im_end|>\n");
		} else if (!s_is(&m[i], "system")) {
			ns_errf(err, errlen, "qwen3 chat: unknown role '%s'", s_str(m[i].role));
			return -EINVAL;
		}
	}
	if (gen) {
		s_puts(b, "<|im_start|>assistant\n");
		if (!o->enable_thinking)
			s_puts(b, "<think>\n\n</think>\n\n");
	}
	return 0;
}

/* ---- Qwen3.5 ---- */

/* s without leading/trailing whitespace (Jinja's trim), malloc'd; NULL when out of memory. */
static char *s_trimmed(const char *s)
{
	size_t lo = 0, hi = strlen(s);
	char *t;

	s_trim(s, &lo, &hi);
	if (!(t = malloc(hi - lo + 1)))
		return NULL;
	memcpy(t, s + lo, hi - lo);
	t[hi - lo] = '\0';
	return t;
}

/* One assistant turn: its reasoning (s_think_split) trimmed; after the last user query the
 * turn carries its think block, empty or not. */
static void s_qwen35_assistant(struct s_buf *b, const struct ns_chat_msg *m, const char *c,
			       bool after_query)
{
	const char *cb, *rb, *re;

	s_think_split(m, c, &cb, &rb, &re);
	s_puts(b, "<|im_start|>assistant\n");
	if (after_query) {
		size_t lo = 0, hi = (size_t)(re - rb);

		s_trim(rb, &lo, &hi);
		s_puts(b, "<think>\n");
		s_put(b, rb + lo, hi - lo);
		s_puts(b, "\n</think>\n\n");
	}
	s_puts(b, cb);
	s_puts(b, "<|im_end|>\n");
}

/* Qwen3.5's template (chat_template.jinja of the Qwen3.5 releases) without tools: every
 * message's content trimmed; the system message only first; an assistant turn after the
 * last user query always with its think block; tool results wrapped as Qwen3's; the
 * generation prompt "<|im_start|>assistant\n<think>\n" (the model thinks) or, with
 * enable_thinking false, the empty block. A conversation without a user query is refused as
 * the template refuses it. */
static int s_qwen35(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		    const struct ns_chat_opts *o, char *err, size_t errlen)
{
	size_t last_query = SIZE_MAX;
	int rc = 0;

	if (!n) {
		ns_errf(err, errlen, "qwen35 chat: no messages");
		return -EINVAL;
	}
	/* the last user message that is not a wrapped tool response (content trimmed) */
	for (size_t k = n; k-- > 0 && last_query == SIZE_MAX;) {
		char *c;

		if (!s_is(&m[k], "user"))
			continue;
		if (!(c = s_trimmed(s_str(m[k].content))))
			return -ENOMEM;
		if (!(s_starts(c, "<tool_response>") && s_ends(c, "</tool_response>")))
			last_query = k;
		free(c);
	}
	if (last_query == SIZE_MAX) {
		ns_errf(err, errlen, "qwen35 chat: no user query in the messages");
		return -EINVAL;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		char *c = s_trimmed(s_str(m[i].content));

		if (!c)
			return -ENOMEM;
		if (s_is(&m[i], "system")) {
			if (i > 0) {
				ns_errf(err, errlen, "qwen35 chat: a system message must come first");
				rc = -EINVAL;
			} else {
				s_puts(b, "<|im_start|>system\n");
				s_puts(b, c);
				s_puts(b, "<|im_end|>\n");
			}
		} else if (s_is(&m[i], "user")) {
			s_puts(b, "<|im_start|>user\n");
			s_puts(b, c);
			s_puts(b, "<|im_end|>\n");
		} else if (s_is(&m[i], "assistant")) {
			s_qwen35_assistant(b, &m[i], c, i > last_query);
		} else if (s_is(&m[i], "tool")) {
			/* loop.previtem: none for the first message */
			if (i > 0 && !s_is(&m[i - 1], "tool"))
				s_puts(b, "<|im_start|>user");
			s_puts(b, "\n<tool_response>\n");
			s_puts(b, c);
			s_puts(b, "\n</tool_response>");
			if (i == n - 1 || !s_is(&m[i + 1], "tool"))
				s_puts(b, "<|im_end|>\n");
		} else {
			ns_errf(err, errlen, "qwen35 chat: unknown role '%s'", m[i].role);
			rc = -EINVAL;
		}
		free(c);
	}
	if (!rc && gen)
		s_puts(b, o->enable_thinking ? "<|im_start|>assistant\n<think>\n" :
			  "<|im_start|>assistant\n<think>\n\n</think>\n\n");
	return rc;
}

/* ---- Llama 3 ---- */

static int s_llama3(struct s_buf *b, const struct ns_chat_msg *m, size_t n,
		    const struct ns_chat_opts *o)
{
	/* bos_token + '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content|trim +
	 * '<|eot_id|>' per message; the header of the assistant turn is always appended. */
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			s_puts(b, o->bos_text ? o->bos_text : "<|begin_of_text|>");
		s_puts(b, "<|start_header_id|>");
		s_puts(b, s_str(m[i].role));
		s_puts(b, "<|end_header_id|>\n\n");
		s_put_trimmed(b, s_str(m[i].content));
		s_puts(b, "<|eot_id|>");
	}
	s_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
	return 0;
}

/* ---- Llama 3.1 / 3.2 / 3.3 (no tools) ---- */

static int s_llama31(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		     const struct ns_chat_opts *o, const char *date)
{
	size_t first = 0;

	/* bos + system header with the knowledge and today dates + system_message|trim */
	s_puts(b, o->bos_text ? o->bos_text : "<|begin_of_text|>");
	s_puts(b, "<|start_header_id|>system<|end_header_id|>\n\n");
	s_puts(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
	s_puts(b, date);
	s_puts(b, "\n\n");
	if (n && s_is(&m[0], "system")) {
		s_put_trimmed(b, s_str(m[0].content));
		first = 1;
	}
	s_puts(b, "<|eot_id|>");
	for (size_t i = first; i < n; i++) {
		if (s_is(&m[i], "tool") || s_is(&m[i], "ipython")) {
			s_puts(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
			s_puts(b, s_str(m[i].content));
		} else {
			s_puts(b, "<|start_header_id|>");
			s_puts(b, m[i].role);
			s_puts(b, "<|end_header_id|>\n\n");
			s_put_trimmed(b, s_str(m[i].content));
		}
		s_puts(b, "<|eot_id|>");
	}
	if (gen)
		s_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
	return 0;
}

/* "YYYY-MM-DD" -> strftime "%d %b %Y" in the C locale ("05 Aug 2025"). */
static void s_llama_date(const char *iso, char out[16])
{
	static const char *const mon[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	int mi = (iso[5] - '0') * 10 + (iso[6] - '0');

	if (mi < 1 || mi > 12)
		mi = 1;
	snprintf(out, 16, "%.2s %s %.4s", iso + 8, mon[mi - 1], iso);
}

/* ---- Gemma 2/3 ---- */

static int s_gemma(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		   const struct ns_chat_opts *o, char *err, size_t errlen)
{
	const char *prefix = NULL;
	size_t first = 0;

	s_puts(b, o->bos_text ? o->bos_text : "<bos>");
	if (n && s_is(&m[0], "system")) { /* first_user_prefix = system content + '\n\n' */
		prefix = s_str(m[0].content);
		first = 1;
	}
	for (size_t i = first; i < n; i++) {
		bool user_turn = (i - first) % 2 == 0;

		/* (role == 'user') != (loop.index0 % 2 == 0) raises */
		if (s_is(&m[i], "user") != user_turn) {
			ns_errf(err, errlen, "gemma chat: conversation roles must alternate "
				"user/assistant/user/assistant/...");
			return -EINVAL;
		}
		s_puts(b, "<start_of_turn>");
		s_puts(b, s_is(&m[i], "assistant") ? "model" : m[i].role);
		s_puts(b, "\n");
		if (i == first && prefix) {
			s_puts(b, prefix);
			s_puts(b, "\n\n");
		}
		s_put_trimmed(b, s_str(m[i].content));
		s_puts(b, "<end_of_turn>\n");
	}
	if (gen)
		s_puts(b, "<start_of_turn>model\n");
	return 0;
}

/* ---- Gemma 4 ---- */

/* An earlier model turn without its thinking: every "<|channel>...<channel|>" part dropped,
 * then trimmed (the template's strip_thinking). */
static void s_gemma4_strip_thinking(struct s_buf *b, const char *c)
{
	struct s_buf kept = { 0 };
	const char *part = c, *end, *open;

	for (;;) {
		end = strstr(part, "<channel|>");
		open = strstr(part, "<|channel>");
		if (open && (!end || open < end)) /* keep what comes before the channel */
			s_put(&kept, part, (size_t)(open - part));
		else
			s_put(&kept, part, end ? (size_t)(end - part) : strlen(part));
		if (!end)
			break;
		part = end + strlen("<channel|>");
	}
	if (kept.oom)
		b->oom = true;
	else
		s_put_trimmed(b, s_str(kept.p));
	free(kept.p);
}

static void s_gemma4(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		     const struct ns_chat_opts *o)
{
	const bool sys = n && (s_is(&m[0], "system") || s_is(&m[0], "developer"));
	const char *prev = NULL; /* role of the previous message */

	s_puts(b, o->bos_text ? o->bos_text : "<bos>");
	if (o->think_opt_in || sys) {
		s_puts(b, "<|turn>system\n");
		if (o->think_opt_in)
			s_puts(b, "<|think|>\n");
		if (sys)
			s_put_trimmed(b, s_str(m[0].content));
		s_puts(b, "<turn|>\n");
	}
	for (size_t i = sys ? 1 : 0; i < n; i++) {
		const bool model = s_is(&m[i], "assistant");

		/* consecutive assistant messages continue one model turn */
		if (!(model && prev && !strcmp(prev, "assistant"))) {
			s_puts(b, "<|turn>");
			s_puts(b, model ? "model" : m[i].role);
			s_puts(b, "\n");
		}
		if (model)
			s_gemma4_strip_thinking(b, s_str(m[i].content));
		else
			s_put_trimmed(b, s_str(m[i].content));
		s_puts(b, "<turn|>\n");
		prev = m[i].role;
	}
	if (gen) {
		s_puts(b, "<|turn>model\n");
		if (!o->think_opt_in)
			s_puts(b, "<|channel>thought\n<channel|>");
	}
}

/* ---- gpt-oss (harmony) ---- */

static int s_gptoss(struct s_buf *b, const struct ns_chat_msg *m, size_t n, bool gen,
		    const struct ns_chat_opts *o, const char *date, char *err, size_t errlen)
{
	size_t first = 0;

	s_puts(b, "<|start|>system<|message|>");
	s_puts(b, "You are ChatGPT, a large language model trained by OpenAI.\n");
	s_puts(b, "Knowledge cutoff: 2024-06\n");
	s_puts(b, "Current date: ");
	s_puts(b, date);
	s_puts(b, "\n\nReasoning: ");
	s_puts(b, o->reasoning_effort ? o->reasoning_effort : "medium");
	s_puts(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included "
		  "for every message.<|end|>");
	/* a leading system or developer message becomes the developer message */
	if (n && (s_is(&m[0], "system") || s_is(&m[0], "developer"))) {
		first = 1;
		if (m[0].content && *m[0].content) {
			s_puts(b, "<|start|>developer<|message|># Instructions\n\n");
			s_puts(b, m[0].content);
			s_puts(b, "\n\n<|end|>");
		}
	}
	for (size_t i = first; i < n; i++) {
		const char *c = s_str(m[i].content);

		if (s_is(&m[i], "assistant")) {
			if (strstr(c, "<|channel|>analysis<|message|>") ||
			    strstr(c, "<|channel|>final<|message|>")) {
				ns_errf(err, errlen, "gpt-oss chat: an assistant message contains "
					"<|channel|> tags; pass thinking separately");
				return -EINVAL;
			}
			if (i == n - 1 && !gen) {
				/* training-only rendering: CoT, then <|return|> */
				if (m[i].reasoning) {
					s_puts(b, "<|start|>assistant<|channel|>analysis<|message|>");
					s_puts(b, m[i].reasoning);
					s_puts(b, "<|end|>");
				}
				s_puts(b, "<|start|>assistant<|channel|>final<|message|>");
				s_puts(b, c);
				s_puts(b, "<|return|>");
			} else { /* CoT of earlier turns is dropped */
				s_puts(b, "<|start|>assistant<|channel|>final<|message|>");
				s_puts(b, c);
				s_puts(b, "<|end|>");
			}
		} else if (s_is(&m[i], "user")) {
			s_puts(b, "<|start|>user<|message|>");
			s_puts(b, c);
			s_puts(b, "<|end|>");
		} else if (s_is(&m[i], "tool")) {
			ns_errf(err, errlen, "gpt-oss chat: a tool message needs a previous assistant "
				"tool call (tool calls are not supported)");
			return -EINVAL;
		}
		/* later system/developer messages are not rendered by the template */
	}
	if (gen)
		s_puts(b, "<|start|>assistant");
	return 0;
}

/* "YYYY-MM-DD" naming a real day of the (proleptic Gregorian) calendar: month 1-12, day
 * 1..the days of that month (February 29 in leap years only). */
static bool s_valid_date(const char *d)
{
	static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, mo, dd, last;

	if (strlen(d) != 10 || d[4] != '-' || d[7] != '-')
		return false;
	for (int i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (d[i] < '0' || d[i] > '9'))
			return false;
	y = (d[0] - '0') * 1000 + (d[1] - '0') * 100 + (d[2] - '0') * 10 + (d[3] - '0');
	mo = (d[5] - '0') * 10 + (d[6] - '0');
	dd = (d[8] - '0') * 10 + (d[9] - '0');
	if (mo < 1 || mo > 12)
		return false;
	last = days[mo - 1];
	if (mo == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
		last = 29;
	return dd >= 1 && dd <= last;
}

enum ns_chat_family ns_chat_family_detect(const char *tpl)
{
	if (!tpl)
		return NS_CHAT_UNKNOWN;
	if (ns_chat_family_from_name(tpl) != NS_CHAT_UNKNOWN)
		return ns_chat_family_from_name(tpl);
	if (strstr(tpl, "<|start|>") && strstr(tpl, "<|channel|>") && strstr(tpl, "<|message|>"))
		return NS_CHAT_GPTOSS;
	/* Qwen3.5 before Qwen3: its generation prompt opens the think block ('<think>\n' }}),
	 * and its messages go through a render_content macro */
	if (strstr(tpl, "<|im_start|>") && strstr(tpl, "<think>") &&
	    (strstr(tpl, "{{- '<think>\\n' }}") || strstr(tpl, "macro render_content")))
		return NS_CHAT_QWEN35;
	if (strstr(tpl, "<|im_start|>") && strstr(tpl, "<think>") && strstr(tpl, "</think>"))
		return NS_CHAT_QWEN3;
	if (strstr(tpl, "<|start_header_id|>") && strstr(tpl, "<|eot_id|>")) {
		if (!strstr(tpl, "Cutting Knowledge Date"))
			return NS_CHAT_LLAMA3;
		return strstr(tpl, "strftime_now") ? NS_CHAT_LLAMA32 : NS_CHAT_LLAMA31;
	}
	if (strstr(tpl, "<start_of_turn>") && strstr(tpl, "<end_of_turn>"))
		return NS_CHAT_GEMMA;
	if (strstr(tpl, "<|turn>") && strstr(tpl, "<turn|>"))
		return NS_CHAT_GEMMA4;
	return ns_chat_lcpp_detect(tpl);
}

static const char *const s_names[] = {
	[NS_CHAT_UNKNOWN] = "unknown", [NS_CHAT_QWEN3] = "qwen3", [NS_CHAT_LLAMA3] = "llama3",
	[NS_CHAT_GEMMA] = "gemma",     [NS_CHAT_GPTOSS] = "gptoss",  [NS_CHAT_LLAMA31] = "llama31",
	[NS_CHAT_LLAMA32] = "llama32", [NS_CHAT_GEMMA4] = "gemma4",
	[NS_CHAT_QWEN35] = "qwen35",
	[NS_CHAT_CHATML] = "chatml", [NS_CHAT_PHI4] = "phi4", [NS_CHAT_MISTRAL_V1] = "mistral-v1",
	[NS_CHAT_MISTRAL_V3] = "mistral-v3", [NS_CHAT_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
	[NS_CHAT_MISTRAL_V7] = "mistral-v7", [NS_CHAT_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
	[NS_CHAT_LLAMA2] = "llama2", [NS_CHAT_LLAMA2_SYS] = "llama2-sys",
	[NS_CHAT_LLAMA2_SYS_BOS] = "llama2-sys-bos", [NS_CHAT_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
	[NS_CHAT_PHI3] = "phi3", [NS_CHAT_ZEPHYR] = "zephyr", [NS_CHAT_VICUNA] = "vicuna",
	[NS_CHAT_VICUNA_ORCA] = "vicuna-orca", [NS_CHAT_DEEPSEEK] = "deepseek",
	[NS_CHAT_DEEPSEEK2] = "deepseek2", [NS_CHAT_DEEPSEEK3] = "deepseek3",
	[NS_CHAT_COMMAND_R] = "command-r",
};

const char *ns_chat_family_name(enum ns_chat_family f)
{
	return (unsigned)f < NS_ARRAY_LEN(s_names) ? s_names[f] : "unknown";
}

enum ns_chat_family ns_chat_family_from_name(const char *name)
{
	for (size_t i = 1; name && i < NS_ARRAY_LEN(s_names); i++)
		if (!strcmp(name, s_names[i]))
			return (enum ns_chat_family)i;
	return NS_CHAT_UNKNOWN;
}

int ns_chat_render(enum ns_chat_family f, const struct ns_chat_msg *msgs, size_t n,
		   bool gen, const struct ns_chat_opts *opts, char **out, char *err,
		   size_t errlen)
{
	static const struct ns_chat_opts defaults = { .enable_thinking = true };
	const struct ns_chat_opts *o = opts ? opts : &defaults;
	struct s_buf b = { 0 };
	char today[16];
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (!msgs[i].role) {
			ns_errf(err, errlen, "chat: message %zu has no role", i);
			return -EINVAL;
		}
	}
	if (o->date && !s_valid_date(o->date)) {
		ns_errf(err, errlen, "chat: date '%s' is not a valid YYYY-MM-DD date", o->date);
		return -EINVAL;
	}
	if (!o->date) {
		time_t now = time(NULL);
		struct tm tm;

		if (!gmtime_r(&now, &tm) || !strftime(today, sizeof(today), "%Y-%m-%d", &tm))
			snprintf(today, sizeof(today), "1970-01-01");
	}
	s_puts(&b, ""); /* an empty rendering is still a string */
	switch (f) {
	case NS_CHAT_QWEN3:
		rc = s_qwen3(&b, msgs, n, gen, o, err, errlen);
		break;
	case NS_CHAT_QWEN35:
		rc = s_qwen35(&b, msgs, n, gen, o, err, errlen);
		break;
	case NS_CHAT_LLAMA3:
		rc = s_llama3(&b, msgs, n, o);
		break;
	case NS_CHAT_GEMMA:
		rc = s_gemma(&b, msgs, n, gen, o, err, errlen);
		break;
	case NS_CHAT_GEMMA4:
		s_gemma4(&b, msgs, n, gen, o);
		rc = 0;
		break;
	case NS_CHAT_LLAMA31:
		rc = s_llama31(&b, msgs, n, gen, o, "26 Jul 2024");
		break;
	case NS_CHAT_LLAMA32: {
		char d[16];

		s_llama_date(o->date ? o->date : today, d);
		rc = s_llama31(&b, msgs, n, gen, o, d);
		break;
	}
	case NS_CHAT_GPTOSS:
		rc = s_gptoss(&b, msgs, n, gen, o, o->date ? o->date : today, err, errlen);
		break;
	default: { /* llama.cpp's built-in families, or none */
		char *t = NULL;

		rc = ns_chat_lcpp_render(f, msgs, n, gen, &t, err, errlen);
		if (rc == 0)
			s_puts(&b, t);
		free(t);
		break;
	}
	}
	if (!rc && b.oom) {
		ns_errf(err, errlen, "chat: out of memory");
		rc = -ENOMEM;
	}
	if (rc) {
		free(b.p);
		return rc;
	}
	*out = b.p;
	return 0;
}
