/* ns_opt.h - one command-line parser for nsctl's commands and the daemons: a table of options
 * over getopt_long.
 *
 * Every option has a canonical long name and optional aliases: other long names ("--ctx"),
 * one-letter short names ("-c", bundled as "-c512" or "-vq"), and llama.cpp's single-dash
 * multi-letter names ("-ngl", "-ctk"), which getopt cannot read and are rewritten to the
 * canonical long name before it runs (a whole argument only: "-ngl" but not "-ngl5").
 * "--opt=value" and "--opt value" are both accepted; a value may start with '-' ("-n -1").
 * Non-options are handed over in order, wherever they stand; after "--" everything is one.
 *
 *	static const struct ns_opt t[] = {
 *		{ "n-predict", "-n --predict", NS_OPT_VALUE, O_N },
 *		{ "json", NULL, NS_OPT_SWITCH, O_JSON },
 *	};
 *	rc = ns_opt_parse("nsctl run", t, NS_ARRAY_LEN(t), argc, argv, on_opt, &opts);
 *
 * getopt_long keeps its place in libc's globals (optind, optarg); ns_opt_parse resets them
 * and runs to the end, so nothing carries over from one call to the next. Not thread-safe. */
#ifndef NS_OPT_H
#define NS_OPT_H

#include <stdbool.h>
#include <stddef.h>

enum ns_opt_kind { NS_OPT_SWITCH, NS_OPT_VALUE };

struct ns_opt {
	const char *name;      /* canonical long name, without "--" */
	const char *aliases;   /* space-separated other spellings with their dashes, or NULL */
	enum ns_opt_kind kind;
	int id;                /* handed to the callback; > 0 */
};

/* Called once per option (o, its value or NULL for a switch, and the spelling the user
 * typed, for messages) and once per non-option (o NULL, v the argument). Returns 0 to go on
 * or a negative errno to stop (after its own line on stderr). For a non-option it may return
 * NS_OPT_REST: every argument after it is a non-option too, handed over as typed ("nsctl
 * tokenize MODEL TEXT...": the text's words may look like options). */
#define NS_OPT_REST 1
typedef int (*ns_opt_fn)(void *user, const struct ns_opt *o, const char *spelled,
			 const char *v);

/* Parse argv[1..argc). An unknown option or one missing its value: one line
 * "WHO: unknown option X" / "WHO: X: missing value" on stderr and -EINVAL. Returns 0, the
 * callback's first negative value, -EINVAL, or -ENOMEM. */
int ns_opt_parse(const char *who, const struct ns_opt *t, size_t n, int argc, char **argv,
		 ns_opt_fn fn, void *user);

#endif
