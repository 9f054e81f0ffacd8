/* tok_internal.h - the tokenizer's state, shared by the files of libnstok only. */
#ifndef NS_TOK_INTERNAL_H
#define NS_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok_hash.h"
#include "tokenizer.h"

#define NS_TOK_MAX_REGEX 4

struct ns_tok_token {
	uint32_t off;  /* text offset in ns_tok.blob */
	uint32_t len;  /* text bytes */
	uint32_t attr; /* enum ns_tok_attr bits */
	float score;   /* SPM merge score */
};

/* How one pre-tokenizer name behaves (see tok_pre.c). */
struct ns_tok_pre {
	const char *name;
	const char *regex[NS_TOK_MAX_REGEX]; /* applied in sequence; NULL-terminated */
	bool clean_spaces;  /* detokenize: " ," -> "," etc. */
	bool ignore_merges; /* a word that is a whole token is not merged */
	bool add_bos;       /* default when the GGUF does not say */
	bool nfc;           /* the family's tokenizer normalizes to NFC */
};

struct ns_tok {
	enum ns_tok_kind kind;
	const struct ns_tok_pre *pre;
	char pre_name[64];

	uint32_t n_vocab;
	struct ns_tok_token *tokens; /* [n_vocab] */
	char *blob;                  /* token texts, each NUL-terminated */
	struct ns_strmap text_to_id; /* token text -> id */

	/* BPE merges: (left id, right id) -> rank and merged id. */
	struct ns_pairmap merges;
	bool ignore_merges;
	bool byte_encode;        /* GPT-2 bytes<->unicode mapping (false for gemma4) */
	bool escape_whitespace;  /* ' ' -> "▁" before tokenizing (SPM, gemma4) */
	bool add_space_prefix;   /* SPM: " " before the first text fragment */
	bool clean_spaces;
	bool nfc;
	int32_t byte_to_id[256]; /* byte-level token of each byte, or <0xXX> token; -1 none */

	int32_t bos, eos, eot, eom, unk, pad;
	bool add_bos, add_eos;
	int32_t *eog;            /* sorted ids */
	size_t n_eog;

	int32_t *special;        /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
	size_t n_special;

	/* Compiled pre-tokenizer regexes (pcre2_code *), NULL-terminated. */
	void *re[NS_TOK_MAX_REGEX + 1];

	/* Decoded pieces (special = true rendering), for ns_tok_piece. */
	uint32_t *piece_off;     /* [n_vocab + 1] offsets into pieces */
	char *pieces;
};

/* tok_pre.c */
const struct ns_tok_pre *ns_tok_pre_find(const char *name);

/* tok_unicode.c */
/* GPT-2 byte -> code point mapping and its inverse (-1 for code points not in the map). */
uint32_t ns_tok_byte_to_cp(uint8_t b);
int ns_tok_cp_to_byte(uint32_t cp);
/* Length of the UTF-8 sequence starting with lead byte c (1 for invalid lead bytes). */
size_t ns_utf8_len(uint8_t c);
/* Decode one code point at s (n bytes available); returns bytes used (1 for an invalid byte,
 * *cp then = 0xFFFD). */
size_t ns_utf8_decode(const char *s, size_t n, uint32_t *cp);
size_t ns_utf8_encode(uint32_t cp, char out[4]);
/* NFC of text into a malloc'd buffer. Returns 0, or -EILSEQ (invalid UTF-8: caller keeps the
 * text as it is) / -ENOMEM. */
int ns_tok_nfc(const char *text, size_t len, char **out, size_t *outlen);

/* Growable int32 vector used while encoding. */
struct ns_ivec {
	int32_t *v;
	size_t n, cap;
};
int ns_ivec_push(struct ns_ivec *iv, int32_t x);

/* tok_bpe.c / tok_spm.c: tokenize one fragment of plain text, appending to out. */
int ns_tok_bpe_fragment(const struct ns_tok *t, const char *text, size_t len, struct ns_ivec *out);
int ns_tok_spm_fragment(const struct ns_tok *t, const char *text, size_t len, struct ns_ivec *out);
int ns_tok_regex_compile(struct ns_tok *t, char *err, size_t errlen);
void ns_tok_regex_free(struct ns_tok *t);

/* tok_decode.c */
int ns_tok_build_pieces(struct ns_tok *t);

#endif
