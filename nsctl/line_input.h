/* line_input.h - the user's turns for nsctl run --chat.
 *
 * On a terminal (stdin and stderr both ttys): line editing and history through libedit
 * (emacs keys; the history file is $XDG_STATE_HOME/neurostream/chat_history, else
 * ~/.local/state/neurostream/chat_history, kept to 1000 lines), the prompt and the echo on
 * stderr so stdout carries only the replies, and multi-line turns: a line ending in '\'
 * continues on the next line (the '\' becomes a newline), and a line starting with """ opens
 * a block that ends at a line ending with """ (the quotes are dropped). Elsewhere (a pipe, a
 * file): plain lines, one turn each, as before. */
#ifndef NSCTL_LINE_INPUT_H
#define NSCTL_LINE_INPUT_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

struct line_input {
	bool tty;                       /* editing on */
	void *el, *hist;                /* EditLine, History (histedit.h) */
	const char *prompt;             /* what the prompt callback shows now */
	char hist_path[PATH_MAX];       /* "" when the history is not kept on disk */
	char *line;                     /* getline's buffer (not a terminal) */
	size_t cap;
	volatile sig_atomic_t *stop;    /* set by a signal: the read in progress returns EOF */
};

/* Editing when stdin and stderr are terminals; stop (may be NULL) ends a read when set.
 * 0 or -errno (the history file that cannot be read is not an error). */
int line_input_open(struct line_input *li, volatile sig_atomic_t *stop);

/* One turn, possibly of several lines: 1 with *text (malloc'd, without the final newline),
 * 0 at end of input (Ctrl-D, EOF, or stop set), -ENOMEM. */
int line_input_read(struct line_input *li, char **text);

/* Writes the history file (terminal only), frees. Safe twice. */
void line_input_close(struct line_input *li);

#endif
