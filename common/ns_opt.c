/* ns_opt.c - see ns_opt.h. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_opt.h"

#define S_LONG_BASE 256 /* getopt's value for table entry i: S_LONG_BASE + i (above chars) */
#define S_MAX_SPELL 48  /* longest alias */

/* What getopt_long reads: long options, the short-option string, the multi-letter
 * single-dash aliases to rewrite, and the argv copy they are rewritten in. */
struct s_parser {
	struct option *lo;
	size_t n_lo;
	char shorts[2 + 2 * 128 + 1]; /* "-:" then "x" or "x:" per short alias */
	int short_ix[128];            /* table index of each short alias, -1 none */
	char (*names)[S_MAX_SPELL + 1]; /* long aliases' names, without "--" */
	char **argv, **orig;          /* what getopt reads; the caller's */
	char (*rewritten)[S_MAX_SPELL + 2]; /* "--name" for each rewritten argument */
};

/* Each space-separated word of aliases, into w (at most S_MAX_SPELL chars); advances *p. */
static bool s_word(const char **p, char *w)
{
	const char *s = *p, *e;

	while (s && *s == ' ')
		s++;
	if (!s || !*s)
		return false;
	for (e = s; *e && *e != ' '; e++)
		;
	snprintf(w, S_MAX_SPELL + 1, "%.*s", (int)(e - s), s);
	*p = e;
	return true;
}

static int s_build(struct s_parser *p, const struct ns_opt *t, size_t n)
{
	size_t cap = n, k = 2;
	char w[S_MAX_SPELL + 1];

	for (size_t i = 0; i < n; i++)
		for (const char *a = t[i].aliases; s_word(&a, w);)
			cap++;
	p->lo = calloc(cap + 1, sizeof(*p->lo)); /* + the zero entry */
	p->names = calloc(cap, sizeof(*p->names));
	if (!p->lo || !p->names)
		return -ENOMEM;
	memset(p->short_ix, -1, sizeof(p->short_ix));
	memcpy(p->shorts, "-:", 2); /* non-options in order; ':' for a missing value */
	for (size_t i = 0; i < n; i++) {
		int has = t[i].kind == NS_OPT_VALUE ? required_argument : no_argument;

		p->lo[p->n_lo++] = (struct option){ t[i].name, has, NULL, S_LONG_BASE + (int)i };
		for (const char *a = t[i].aliases; s_word(&a, w);) {
			if (w[0] == '-' && w[1] == '-') {
				char *nm = p->names[p->n_lo];

				snprintf(nm, S_MAX_SPELL + 1, "%s", w + 2);
				p->lo[p->n_lo++] = (struct option){ nm, has, NULL,
								    S_LONG_BASE + (int)i };
			} else if (w[0] == '-' && w[1] && !w[2] && (unsigned char)w[1] < 128) {
				if (k + 3 > sizeof(p->shorts)) /* a letter given twice */
					return -EINVAL;
				p->short_ix[(unsigned char)w[1]] = (int)i;
				p->shorts[k++] = w[1];
				if (has == required_argument)
					p->shorts[k++] = ':';
			} /* multi-letter single-dash aliases: s_rewrite */
		}
	}
	p->shorts[k] = 0;
	return 0;
}

/* Table entry whose alias is exactly arg ("-ngl"), or -1. */
static int s_multi_alias(const struct ns_opt *t, size_t n, const char *arg)
{
	char w[S_MAX_SPELL + 1];

	if (arg[0] != '-' || arg[1] == '-' || !arg[1] || !arg[2])
		return -1;
	for (size_t i = 0; i < n; i++)
		for (const char *a = t[i].aliases; s_word(&a, w);)
			if (w[0] == '-' && w[1] != '-' && w[2] && !strcmp(w, arg))
				return (int)i;
	return -1;
}

/* Whether argument a, an option, takes the next argument as its value as getopt reads it:
 * "--name" of a valued option without "=", or a short bundle whose letters are switches up
 * to a last one that wants a value ("-vn" then "5"). */
static bool s_wants_next(const struct s_parser *p, const struct ns_opt *t, size_t n,
			 const char *a)
{
	if (a[0] != '-' || !a[1])
		return false;
	if (a[1] == '-') {
		if (strchr(a, '='))
			return false;
		for (size_t i = 0; i < p->n_lo; i++)
			if (!strcmp(a + 2, p->lo[i].name))
				return p->lo[i].has_arg == required_argument;
		return false;
	}
	for (const char *c = a + 1; *c; c++) {
		int ix = (unsigned char)*c < 128 ? p->short_ix[(unsigned char)*c] : -1;

		if (ix < 0 || (size_t)ix >= n)
			return false;
		if (t[ix].kind == NS_OPT_VALUE)
			return !c[1];
	}
	return false;
}

/* argv copied, each whole "-ngl" replaced with "--n-gpu-layers"; not a value ("-p -ngl"
 * keeps its prompt) nor anything after "--". */
static int s_rewrite(struct s_parser *p, const struct ns_opt *t, size_t n, int argc,
		     char **argv)
{
	bool is_value = false;
	int i;

	p->orig = argv;
	p->argv = calloc((size_t)argc + 1, sizeof(*p->argv));
	p->rewritten = calloc((size_t)argc + 1, sizeof(*p->rewritten));
	if (!p->argv || !p->rewritten)
		return -ENOMEM;
	for (i = 0; i < argc; i++) {
		int ix = i && !is_value ? s_multi_alias(t, n, argv[i]) : -1;

		p->argv[i] = argv[i];
		if (ix >= 0) {
			snprintf(p->rewritten[i], sizeof(p->rewritten[i]), "--%s", t[ix].name);
			p->argv[i] = p->rewritten[i];
		} else if (i && !is_value && !strcmp(argv[i], "--")) {
			break;
		}
		is_value = i && !is_value && s_wants_next(p, t, n, p->argv[i]);
	}
	for (; i < argc; i++)
		p->argv[i] = argv[i];
	return 0;
}

/* One line for getopt's '?' or ':' (opterr is 0: getopt prints nothing). */
static int s_refuse(const char *who, int c, const char *arg)
{
	char spelled[S_MAX_SPELL + 8];

	if (optopt > 0 && optopt < 128)
		snprintf(spelled, sizeof(spelled), "-%c", optopt);
	else
		snprintf(spelled, sizeof(spelled), "%.*s", (int)strcspn(arg, "="), arg);
	if (c == ':')
		fprintf(stderr, "%s: %s: missing value\n", who, spelled);
	else if (optopt >= S_LONG_BASE)
		fprintf(stderr, "%s: %s takes no value (got '%s')\n", who, spelled, arg);
	else
		fprintf(stderr, "%s: unknown option %s (--help lists them)\n", who, spelled);
	return -EINVAL;
}

static int s_run(struct s_parser *p, const char *who, const struct ns_opt *t, int argc,
		 ns_opt_fn fn, void *user)
{
	int c, li = -1, rc = 0;

	optind = 0; /* glibc: start over, forget any earlier scan */
	opterr = 0;
	while (rc == 0 && (c = getopt_long(argc, p->argv, p->shorts, p->lo, &li)) != -1) {
		/* the argument getopt just read, as the caller typed it ("-ngl", not the
		 * rewritten "--n-gpu-layers"); a separate value: the one before */
		int at = optind - 1 - (c >= S_LONG_BASE && optarg && optind >= 2 &&
				       optarg == p->argv[optind - 1]);
		const char *arg = at > 0 && at < argc ? p->orig[at] : "";
		char spelled[S_MAX_SPELL + 8];
		int ix;

		if (c == 1) { /* a non-option, in order */
			rc = fn(user, NULL, NULL, optarg);
			if (rc == NS_OPT_REST) { /* the rest as typed (not rewritten), "--" too */
				rc = 0;
				for (int i = optind; rc >= 0 && i < argc; i++)
					rc = fn(user, NULL, NULL, p->orig[i]);
				return rc < 0 ? rc : 0;
			}
			continue;
		}
		if (c == '?' || c == ':')
			return s_refuse(who, c, arg);
		if (c >= S_LONG_BASE) {
			ix = c - S_LONG_BASE;
			if (p->argv[at] == p->rewritten[at])
				snprintf(spelled, sizeof(spelled), "%s", arg);
			else
				snprintf(spelled, sizeof(spelled), "--%s", p->lo[li].name);
		} else {
			ix = p->short_ix[c & 127];
			snprintf(spelled, sizeof(spelled), "-%c", c);
		}
		rc = fn(user, &t[ix], spelled, t[ix].kind == NS_OPT_VALUE ? optarg : NULL);
		li = -1;
	}
	for (int i = optind; rc >= 0 && i < argc; i++) /* after "--" (NS_OPT_REST: as 0) */
		rc = fn(user, NULL, NULL, p->argv[i]);
	return rc < 0 ? rc : 0;
}

int ns_opt_parse(const char *who, const struct ns_opt *t, size_t n, int argc, char **argv,
		 ns_opt_fn fn, void *user)
{
	struct s_parser p = { 0 };
	int rc = s_build(&p, t, n);

	if (rc == 0)
		rc = s_rewrite(&p, t, n, argc, argv);
	if (rc == 0)
		rc = s_run(&p, who, t, argc, fn, user);
	free(p.lo);
	free(p.names);
	free(p.argv);
	free(p.rewritten);
	return rc;
}
