/* lcpp_cases.c - iterate llama.cpp's tokenizer test pairs (lcpp_cases.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lcpp_cases.h"
#include "ns_test.h"

static const char s_sep[] = "\n__ggml_vocab_test__\n";

bool lcpp_cases_open(struct lcpp_cases *c, const char *name, char *path, size_t pathlen)
{
	char rel[512];
	size_t len = 0;

	*c = (struct lcpp_cases){ 0 };
	snprintf(rel, sizeof(rel), "vocab/llamacpp-tests/%s.inp", name);
	c->inp = ns_test_read_file(ns_test_oracle_path(path, pathlen, rel), &len);
	if (c->inp) {
		snprintf(rel, sizeof(rel), "vocab/llamacpp-tests/%s.out", name);
		c->outp = ns_test_read_file(ns_test_oracle_path(path, pathlen, rel), &len);
	}
	if (!c->inp || !c->outp) {
		lcpp_cases_close(c);
		return false;
	}
	c->ip = c->inp;
	c->op = c->outp;
	return true;
}

bool lcpp_cases_next(struct lcpp_cases *c, const char **text, size_t *len, int32_t *want,
		     size_t *nwant, size_t cap)
{
	char *end, *q = c->op;

	if (!c->ip || !*c->ip)
		return false;
	end = strstr(c->ip, s_sep);
	*text = c->ip;
	*len = end ? (size_t)(end - c->ip) : strlen(c->ip);
	if (!end && *len && c->ip[*len - 1] == '\n')
		(*len)--; /* last case: the file's final newline */
	*nwant = 0;
	while (q && *q && *q != '\n' && *nwant < cap) {
		char *e;
		long v = strtol(q, &e, 10);

		if (e == q)
			break;
		want[(*nwant)++] = (int32_t)v;
		q = e;
	}
	c->op = c->op ? strchr(c->op, '\n') : NULL;
	if (c->op)
		c->op++;
	c->ip = end ? end + sizeof(s_sep) - 1 : NULL;
	return true;
}

void lcpp_cases_close(struct lcpp_cases *c)
{
	free(c->inp);
	free(c->outp);
	*c = (struct lcpp_cases){ 0 };
}
