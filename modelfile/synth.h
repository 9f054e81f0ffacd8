/* synth.h - random-weight GGUF models in the exact shape of real ones.
 *
 * A preset names an architecture and its real dimensions (llama-8b, qwen3-8b, qwen3-30b-a3b,
 * gpt-oss-120b, qwen3-235b-a22b, qwen3.5-4b, qwen3.5-35b-a3b, qwen3.5-397b-a17b, gemma-4-31b,
 * gemma-4-e4b, gemma-4-26b-a4b, qwen3-vl-8b, qwen3-vl-30b-a3b) or a small one (demo,
 * gemma-4-moe-tiny, tiny-qwen35, tiny-qwen35moe). The Qwen3-VL presets also write their
 * vision tower beside the model, as mmproj-<file name> (synth_mmproj.c). A model cut to fewer
 * layers (layers) keeps the first ones (the text model's only: the tower stays whole but for
 * the tests' cap), and for gemma-4-e4b the whole model's share of KV-shared layers at its end as long as
 * a full period of unshared layers (five sliding, one global) stays before them. The generator writes valid quantized
 * blocks directly (random codes, sane scales), so a multi-GB file is written at disk speed with
 * no quantizer in the loop. The values are noise; the I/O and compute profile is the real one.
 * The same preset, options and seed give a byte-identical file. */
#ifndef NS_SYNTH_H
#define NS_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ns_synth_quant {
	NS_SYNTH_F32,
	NS_SYNTH_F16,
	NS_SYNTH_BF16,   /* every matrix BF16, as a Hugging Face checkpoint converted as is */
	NS_SYNTH_Q8_0,
	NS_SYNTH_Q4_0,
	NS_SYNTH_Q4_K_M, /* llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for output, half of attn_v/ffn_down */
	NS_SYNTH_MXFP4,  /* GPT-OSS style: MXFP4 experts, Q8_0 other matrices */
};

struct ns_synth_opts {
	const char *preset;
	enum ns_synth_quant quant;
	bool quant_set;     /* false: the preset's default mix */
	uint32_t layers;    /* 0: the preset's depth */
	bool mtp;           /* qwen3.5 presets: append the MTP block (block_count + 1,
			     * nextn_predict_layers 1) as llama.cpp's converter writes it */
	uint64_t seed;
	uint32_t split;     /* shards; 0 or 1 writes one file */
	bool no_replace;    /* refuse (-EEXIST, one line) when a file to write exists already,
			     * before writing any (nsctl mkmodel without --force) */
	/* Tests only, to keep files small: cap the vocabulary (0, or at least 512) and the expert
	 * count (0, or at least the preset's experts used per token). Every other dimension,
	 * every name, type rule and key stays the preset's. */
	uint32_t max_vocab;
	uint32_t max_experts;
	/* Tests only: the vision tower of a Qwen3-VL preset cut to this many blocks (0: all),
	 * its DeepStack layers at the same fractions of the cut. */
	uint32_t max_vision_layers;
	/* Tests only: the header whole, the tensor data left holes of zeros (a sparse file), for
	 * checks of names, types and keys of presets too large to write in a test. */
	bool no_data;
	/* Called as tensor bytes are made (n of total, every shard's), for a progress line;
	 * NULL: none. */
	void (*progress)(void *user, uint64_t n, uint64_t total);
	void *progress_user;
};

/* Preset names, NULL-terminated, for usage messages. */
extern const char *const ns_synth_presets[];

int ns_synth_parse_quant(const char *s, enum ns_synth_quant *q);

/* Write the model to path (with -0000K-of-0000N.gguf names when split > 1, where path must end
 * in .gguf). Returns 0 or -errno with one line in err. */
int ns_synth_write(const struct ns_synth_opts *o, const char *path, char *err, size_t errlen);

/* Where a preset with a vision tower (the Qwen3-VL ones) writes it for a model at path:
 * "<dir>/mmproj-<file>". Returns 1 with the path in out, 0 for a preset without a tower (or
 * an unknown one), -ENAMETOOLONG. */
int ns_synth_tower_path(const char *preset, const char *path, char *out, size_t outlen);

#endif
