/* line_input.c - libedit for nsctl run --chat's turns on a terminal, getline elsewhere
 * (line_input.h). libedit (Debian libedit-dev) rather than GNU readline: BSD-licensed, and its
 * history API is what we need (decisions.md). */
#include "line_input.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

#include "hub.h"

#define S_HIST_LINES 1000
#define S_BLOCK "\"\"\""

static char *s_prompt(EditLine *el)
{
	struct line_input *li = NULL;

	el_get(el, EL_CLIENTDATA, &li);
	return (char *)(li ? li->prompt : "> ");
}

/* libedit's character reader: stdin polled every 100 ms so a Ctrl-C (li->stop set by the
 * handler) ends the read even when the signal came before read() blocked, which libedit's own
 * reader would wait through. Multibyte input by the locale. 1, 0 at EOF, -1 to stop. */
static int s_getc(EditLine *el, wchar_t *wc)
{
	struct line_input *li = NULL;
	mbstate_t st;
	char c;

	el_get(el, EL_CLIENTDATA, &li);
	memset(&st, 0, sizeof(st));
	for (;;) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		ssize_t n;
		size_t k;
		int r;

		if (li && li->stop && *li->stop)
			return -1;
		r = poll(&p, 1, 100);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r <= 0)
			continue;
		n = read(STDIN_FILENO, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : 0;
		k = mbrtowc(wc, &c, 1, &st);
		if (k == (size_t)-2)
			continue; /* inside a character */
		if (k == (size_t)-1) { /* not in the locale's encoding: the byte as it is */
			memset(&st, 0, sizeof(st));
			*wc = (wchar_t)(unsigned char)c;
		}
		return 1;
	}
}

/* $XDG_STATE_HOME/neurostream/chat_history or ~/.local/state/neurostream/chat_history, its
 * folders made. "" when neither variable names a home for it. */
static void s_hist_path(char *out, size_t n)
{
	const char *x = getenv("XDG_STATE_HOME"), *h = getenv("HOME");
	char dir[PATH_MAX];
	int len;

	out[0] = 0;
	if (x && x[0] == '/')
		len = snprintf(dir, sizeof(dir), "%s/neurostream", x);
	else if (h && h[0] == '/')
		len = snprintf(dir, sizeof(dir), "%s/.local/state/neurostream", h);
	else
		return;
	if (len < 0 || (size_t)len >= sizeof(dir) || hub_mkdirs(dir) < 0)
		return;
	len = snprintf(out, n, "%s/chat_history", dir);
	if (len < 0 || (size_t)len >= n)
		out[0] = 0;
}

int line_input_open(struct line_input *li, volatile sig_atomic_t *stop)
{
	HistEvent ev;
	EditLine *el;
	History *h;

	memset(li, 0, sizeof(*li));
	li->stop = stop;
	li->prompt = "> ";
	if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
		return 0;
	setlocale(LC_CTYPE, ""); /* libedit reads multibyte (UTF-8) input by the locale */
	h = history_init();
	el = h ? el_init("nsctl", stdin, stderr, stderr) : NULL;
	if (!el) {
		if (h)
			history_end(h);
		return -ENOMEM;
	}
	history(h, &ev, H_SETSIZE, S_HIST_LINES);
	history(h, &ev, H_SETUNIQUE, 1);
	el_set(el, EL_EDITOR, "emacs");
	el_set(el, EL_HIST, history, h);
	el_set(el, EL_CLIENTDATA, li);
	el_set(el, EL_PROMPT, s_prompt);
	el_set(el, EL_GETCFN, s_getc);
	el_source(el, NULL); /* ~/.editrc, as other libedit programs */
	s_hist_path(li->hist_path, sizeof(li->hist_path));
	if (li->hist_path[0])
		history(h, &ev, H_LOAD, li->hist_path); /* none yet is fine */
	li->el = el;
	li->hist = h;
	li->tty = true;
	return 0;
}

/* One physical line without its newline into *out (malloc'd): 1, 0 at EOF, -ENOMEM. */
static int s_line(struct line_input *li, char **out)
{
	const char *l;
	size_t n;
	ssize_t r;

	if (!li->tty) {
		r = getline(&li->line, &li->cap, stdin);
		if (r < 0 || (li->stop && *li->stop))
			return 0;
		l = li->line;
		n = (size_t)r;
	} else {
		int count = 0;

		l = el_gets(li->el, &count);
		if (!l || count <= 0 || (li->stop && *li->stop))
			return 0;
		n = (size_t)count;
	}
	while (n && (l[n - 1] == '\n' || l[n - 1] == '\r'))
		n--;
	if (li->tty && n) {
		HistEvent ev;
		char *h = strndup(l, n);

		if (!h)
			return -ENOMEM;
		history(li->hist, &ev, H_ENTER, h);
		free(h);
	}
	*out = strndup(l, n);
	return *out ? 1 : -ENOMEM;
}

static bool s_ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* Append s (and a newline before it unless the text is empty) to *text. */
static int s_join(char **text, const char *s, size_t n, bool newline)
{
	size_t have = *text ? strlen(*text) : 0;
	char *t = realloc(*text, have + n + 2);

	if (!t)
		return -ENOMEM;
	if (newline)
		t[have++] = '\n';
	memcpy(t + have, s, n);
	t[have + n] = 0;
	*text = t;
	return 0;
}

int line_input_read(struct line_input *li, char **text)
{
	bool block = false, first = true;
	char *l = NULL;
	int rc;

	*text = NULL;
	li->prompt = "> ";
	for (;;) {
		const char *s;
		size_t n;
		bool more = false;

		rc = s_line(li, &l);
		if (rc <= 0)
			break;
		s = l;
		n = strlen(l);
		if (li->tty && first && !strncmp(s, S_BLOCK, 3)) {
			block = true;
			s += 3;
			n -= 3;
			if (!n) { /* the opening line holds only the quotes */
				free(l);
				first = false;
				li->prompt = "... ";
				continue;
			}
		}
		if (li->tty && block && n >= 3 && s_ends(s, S_BLOCK)) {
			n -= 3;
			block = false;
		} else if (li->tty && block) {
			more = true;
		} else if (li->tty && n && s[n - 1] == '\\') {
			n--;
			more = true;
		}
		rc = s_join(text, s, n, !first && *text);
		free(l);
		l = NULL;
		if (rc < 0)
			break;
		rc = 1;
		if (!more)
			break;
		first = false;
		li->prompt = "... ";
	}
	free(l);
	li->prompt = "> ";
	if (rc <= 0) {
		free(*text);
		*text = NULL;
		return rc;
	}
	if (!*text && !(*text = strdup(""))) /* an empty block */
		return -ENOMEM;
	return 1;
}

void line_input_close(struct line_input *li)
{
	if (li->hist) {
		HistEvent ev;

		if (li->hist_path[0] && history(li->hist, &ev, H_SAVE, li->hist_path) < 0)
			fprintf(stderr, "nsctl run: chat history not saved to %s\n", li->hist_path);
		history_end(li->hist);
	}
	if (li->el)
		el_end(li->el);
	free(li->line);
	memset(li, 0, sizeof(*li));
}
