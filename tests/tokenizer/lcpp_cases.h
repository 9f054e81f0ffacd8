/* lcpp_cases.h - llama.cpp's test-tokenizer-0 pairs from the oracle: cases separated by
 * "\n__ggml_vocab_test__\n" in vocab/llamacpp-tests/NAME.inp, one line of ids per case in
 * NAME.out (tokenized without BOS; an empty case has an empty line). */
#ifndef NS_LCPP_CASES_H
#define NS_LCPP_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lcpp_cases {
	char *inp, *outp; /* the two files, NUL-terminated */
	char *ip, *op;    /* the next case in each */
};

/* Reads both files; false when one cannot be read (its path in path). */
bool lcpp_cases_open(struct lcpp_cases *c, const char *name, char *path, size_t pathlen);
/* The next case: its text (len bytes, not NUL-terminated) and up to cap wanted ids. False
 * after the last case. */
bool lcpp_cases_next(struct lcpp_cases *c, const char **text, size_t *len, int32_t *want,
		     size_t *nwant, size_t cap);
void lcpp_cases_close(struct lcpp_cases *c);

#endif
