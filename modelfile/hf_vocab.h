/* hf_vocab.h - a checkpoint's tokenizer (tokenizer.json, tokenizer_config.json, config.json's
 * special-token ids, chat_template.jinja / chat_template.json) as the tokenizer.* GGUF keys
 * llama.cpp's converter writes for a byte-level BPE vocabulary
 * (TextModel._set_vocab_gpt2 + get_vocab_base + gguf.SpecialVocab), so the tokenizer built
 * from them (tokenizer.h) gives the ids the converted GGUF gives.
 *
 * Differences, each because the converter asks Python for what a C reader cannot run:
 *  - tokenizer.ggml.pre: the converter hashes the tokenization of a test text; we name the
 *    pre-tokenizer from tokenizer.json's split pattern (the patterns llama.cpp records as
 *    "original regex from tokenizer.json"), refusing one we do not know;
 *  - added tokens with normalized=false are kept as written (the converter re-encodes them
 *    with the Python tokenizer, which gives the same text for every vocabulary we know). */
#ifndef NS_HF_VOCAB_H
#define NS_HF_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* Add the tokenizer keys of the checkpoint in dir to g. n_vocab: config.json's vocab_size
 * (0: the number of tokens). A directory without tokenizer.json adds nothing and succeeds (the
 * model then has no vocabulary, as a GGUF without tokenizer keys). Returns 0, -ENOMEM, or
 * -EINVAL with one line naming the file and the problem. */
int ns_hf_vocab_load(const char *dir, uint32_t n_vocab, struct ns_gguf *g, char *err,
		     size_t errlen);

#endif
