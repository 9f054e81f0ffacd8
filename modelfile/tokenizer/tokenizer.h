/* tokenizer.h - text <-> token ids from a GGUF's tokenizer.* metadata.
 *
 * Supported vocabularies:
 *  - byte-level BPE (tokenizer.ggml.model = "gpt2") with the pre-tokenizers named by
 *    tokenizer.ggml.pre (gpt-2, llama3/llama-bpe, qwen2, qwen35, gpt-4o, default, ...), split by
 *    PCRE2 (UTF + UCP, JIT); Qwen vocabularies are NFC-normalized first, as their own
 *    tokenizer does;
 *  - SentencePiece-style BPE ("llama"): merges by score, byte fallback <0xXX>, "▁" prefix;
 *  - SPM-style BPE with merges ("gemma4").
 * Special tokens (CONTROL, USER_DEFINED) are split out of the text before pre-tokenization;
 * CONTROL ones only with parse_special.
 *
 * Ownership: ns_tok_new() copies everything it needs from the GGUF metadata; the GGUF can be
 * closed afterwards. A tokenizer is immutable after load: concurrent encode/decode calls on one
 * tokenizer are safe. */
#ifndef NS_TOKENIZER_H
#define NS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_gguf;
struct ns_tok;

enum ns_tok_kind {
	NS_TOK_BPE = 1, /* byte-level BPE ("gpt2") */
	NS_TOK_SPM = 2, /* SentencePiece BPE by score ("llama") */
	NS_TOK_SPM_BPE = 3, /* BPE merges on raw UTF-8 with "▁" spaces ("gemma4") */
};

/* Token attribute bits (a token can carry several). */
enum ns_tok_attr {
	NS_TOK_ATTR_UNDEFINED = 0,
	NS_TOK_ATTR_UNKNOWN = 1 << 0,
	NS_TOK_ATTR_UNUSED = 1 << 1,
	NS_TOK_ATTR_NORMAL = 1 << 2,
	NS_TOK_ATTR_CONTROL = 1 << 3,
	NS_TOK_ATTR_USER_DEFINED = 1 << 4,
	NS_TOK_ATTR_BYTE = 1 << 5,
	NS_TOK_ATTR_LSTRIP = 1 << 7,
	NS_TOK_ATTR_RSTRIP = 1 << 8,
};

/* Build a tokenizer from GGUF metadata (a vocab-only GGUF or a model's first shard).
 * Returns NULL and one line in err on failure (missing/invalid keys, unknown pre-tokenizer). */
struct ns_tok *ns_tok_new(const struct ns_gguf *meta, char *err, size_t errlen);
void ns_tok_destroy(struct ns_tok **t);

/* Tokenize len bytes of text (need not be NUL-terminated, may be invalid UTF-8).
 * add_special: add BOS/EOS as the vocabulary asks (tokenizer.ggml.add_bos_token, ...).
 * parse_special: text of CONTROL tokens ("<|im_start|>") becomes that token.
 * On success stores a malloc'd array the caller frees in *ids and its length in *n, returns 0;
 * returns -ENOMEM or -EINVAL (regex failure) otherwise. */
int ns_tok_encode(const struct ns_tok *t, const char *text, size_t len, bool add_special,
		  bool parse_special, int32_t **ids, size_t *n);

/* The bytes a token decodes to (special: render CONTROL/UNKNOWN tokens as their text instead
 * of nothing). The pointer stays valid as long as the tokenizer. Returns 0 or -EINVAL for an
 * id out of range. */
int ns_tok_piece(const struct ns_tok *t, int32_t id, bool special, const char **piece,
		 size_t *len);

/* Whole-sequence detokenization (as llama_detokenize): concatenated pieces, SPM leading space
 * removed, the vocabulary's clean-up of spaces before punctuation applied where it has one.
 * *out is malloc'd and NUL-terminated (may contain other NULs; trust *len). */
int ns_tok_detokenize(const struct ns_tok *t, const int32_t *ids, size_t n, bool remove_special,
		      bool unparse_special, char **out, size_t *len);

/* The token's raw vocabulary text (e.g. "Ġthe", "<|im_end|>"), or NULL when out of range. */
const char *ns_tok_text(const struct ns_tok *t, int32_t id, size_t *len);
/* Id of a token with exactly that text, or -1. */
int32_t ns_tok_find(const struct ns_tok *t, const char *text, size_t len);

size_t ns_tok_n_vocab(const struct ns_tok *t);
enum ns_tok_kind ns_tok_kind(const struct ns_tok *t);
const char *ns_tok_pre(const struct ns_tok *t); /* pre-tokenizer name in use */
uint32_t ns_tok_attr(const struct ns_tok *t, int32_t id);
int32_t ns_tok_bos(const struct ns_tok *t); /* -1 when the vocabulary has none */
int32_t ns_tok_eos(const struct ns_tok *t);
int32_t ns_tok_eot(const struct ns_tok *t);
bool ns_tok_add_bos(const struct ns_tok *t);
bool ns_tok_add_eos(const struct ns_tok *t);
/* End of generation: EOS, EOT and the family's other stop tokens (<|eot_id|>, <|im_end|>,
 * <|return|>, <|call|>, <end_of_turn>, ...). */
bool ns_tok_is_eog(const struct ns_tok *t, int32_t id);

/* Streaming detokenizer for generated tokens: holds back an incomplete UTF-8 sequence at the
 * end until the bytes that complete it arrive, so every chunk it hands out is whole
 * characters (invalid bytes are passed through as they come once they cannot start a valid
 * sequence). Not thread-safe; one per stream. */
struct ns_detok;

/* at_start: the first token fed starts the text, so SentencePiece's dummy-prefix space is
 * dropped from it as ns_tok_detokenize does; false when continuing after a prompt (generated
 * tokens), where that space is a real one. */
struct ns_detok *ns_detok_new(const struct ns_tok *t, bool unparse_special, bool at_start);
void ns_detok_destroy(struct ns_detok **d);
/* Add one token. *text and *len receive the bytes now complete (possibly 0); they stay valid until
 * the next call on d. Returns 0 or -EINVAL (id out of range) / -ENOMEM. */
int ns_detok_feed(struct ns_detok *d, int32_t id, const char **text, size_t *len);
/* Hand out whatever is held back (an incomplete sequence at the end of the stream). */
int ns_detok_flush(struct ns_detok *d, const char **text, size_t *len);

#endif
