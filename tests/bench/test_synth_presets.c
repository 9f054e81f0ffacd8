/* test_synth_presets: every `nsctl mkmodel` preset against the oracle's tiny llama.cpp model of
 * the same architecture (../shared/oracle/tiny): the same per-layer tensor name set, global
 * names (output.weight may be extra where the tiny model ties embeddings), ggml ne order by
 * the same shape formulas (checked on the oracle file first, then on ours), the same metadata
 * keys and value types apart from tokenizer extras, the quantization mix rules, llama.cpp's
 * layout conventions (32-byte alignment, whole blocks per row), the real models' published
 * dimensions, and --split into shards with llama-gguf-split's keys.
 *
 * The files are kept small: --layers 2 and, for every preset but one, the test-only caps on
 * vocabulary and experts (synth.h); qwen3-8b is also written once at its full 151936-token
 * vocabulary with one layer (about 1 GB, removed at once). Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ggml_type.h"
#include "gguf.h"
#include "model.h"
#include "ns_test.h"
#include "synth.h"
#include "../vision/vt_util.h"

static int s_fail;

#define CHECK(cond, ...) NS_EXPECT(s_fail, cond, __VA_ARGS__)

/* ---- dimensions of a file, read from its own metadata ---- */

struct dims {
	char arch[32];
	uint64_t E, F, FX, X, XU, H, HKV, HD, V, L;
	/* qwen35/qwen35moe: ssm.conv_kernel, state_size, group_count, time_step_rank, inner_size,
	 * the shared expert's width; attn_q projects q and its gate (2 H HD rows) */
	uint64_t SK, SS, SG, ST, SI, FS;
	bool tied, gated_q;
};

static uint64_t s_u(const struct ns_gguf *g, const char *arch, const char *key, uint64_t dflt)
{
	char k[128];
	uint64_t v;

	snprintf(k, sizeof(k), "%s.%s", arch, key);
	return ns_gguf_get_u64(g, k, &v) ? v : dflt;
}

static void s_dims(const struct ns_gguf *g, struct dims *d)
{
	const char *a = ns_gguf_get_str(g, "general.architecture");
	const struct ns_gguf_value *tok = ns_gguf_get_arr(g, "tokenizer.ggml.tokens");

	memset(d, 0, sizeof(*d));
	snprintf(d->arch, sizeof(d->arch), "%s", a ? a : "?");
	d->E = s_u(g, d->arch, "embedding_length", 0);
	d->F = s_u(g, d->arch, "feed_forward_length", 0);
	d->FX = s_u(g, d->arch, "expert_feed_forward_length", 0);
	d->X = s_u(g, d->arch, "expert_count", 0);
	d->XU = s_u(g, d->arch, "expert_used_count", 0);
	d->H = s_u(g, d->arch, "attention.head_count", 0);
	d->HKV = s_u(g, d->arch, "attention.head_count_kv", 0);
	d->HD = s_u(g, d->arch, "attention.key_length", d->H ? d->E / d->H : 0);
	d->L = s_u(g, d->arch, "block_count", 0);
	d->V = tok ? tok->v.arr.n : 0;
	d->tied = ns_gguf_find_tensor(g, "output.weight") < 0;
	d->SK = s_u(g, d->arch, "ssm.conv_kernel", 0);
	d->SS = s_u(g, d->arch, "ssm.state_size", 0);
	d->SG = s_u(g, d->arch, "ssm.group_count", 0);
	d->ST = s_u(g, d->arch, "ssm.time_step_rank", 0);
	d->SI = s_u(g, d->arch, "ssm.inner_size", 0);
	d->FS = s_u(g, d->arch, "expert_shared_feed_forward_length", 0);
	d->gated_q = !strncmp(d->arch, "qwen35", 6);
}

/* Expected ne of a tensor (name without the blk.N. prefix) in ggml order; 0 dims = unknown. */
static uint32_t s_expect(const char *n, const struct dims *d, uint64_t ne[4])
{
	const uint64_t QO = d->H * d->HD, KO = d->HKV * d->HD;
	static const struct { const char *name; const char *sym; } tab[] = {
		{ "token_embd.weight", "EV" }, { "output.weight", "EV" },
		{ "output_norm.weight", "E" }, { "rope_freqs.weight", "h" },
		{ "attn_norm.weight", "E" }, { "attn_q.weight", "EQ" }, { "attn_k.weight", "EK" },
		{ "attn_v.weight", "EK" }, { "attn_output.weight", "QE" },
		{ "attn_q_norm.weight", "D" }, { "attn_k_norm.weight", "D" },
		{ "ffn_norm.weight", "E" }, { "post_attention_norm.weight", "E" },
		{ "attn_q.bias", "Q" }, { "attn_k.bias", "K" }, { "attn_v.bias", "K" },
		{ "attn_output.bias", "E" }, { "attn_sinks.weight", "H" },
		{ "ffn_gate_inp.weight", "EX" }, { "ffn_gate_inp.bias", "X" },
		{ "ffn_gate_exps.weight", "EfX" }, { "ffn_up_exps.weight", "EfX" },
		{ "ffn_down_exps.weight", "fEX" }, { "ffn_gate_exps.bias", "fX" },
		{ "ffn_up_exps.bias", "fX" }, { "ffn_down_exps.bias", "EX" },
		{ "ffn_gate.weight", "EF" }, { "ffn_up.weight", "EF" }, { "ffn_down.weight", "FE" },
		/* Qwen3.5's Gated DeltaNet layers and shared expert */
		{ "attn_qkv.weight", "EC" }, { "attn_gate.weight", "EI" },
		{ "ssm_conv1d.weight", "kC" }, { "ssm_dt.bias", "T" }, { "ssm_a", "T" },
		{ "ssm_beta.weight", "ET" }, { "ssm_alpha.weight", "ET" }, { "ssm_norm.weight", "v" },
		{ "ssm_out.weight", "IE" }, { "ffn_gate_inp_shexp.weight", "E" },
		{ "ffn_gate_shexp.weight", "ES" }, { "ffn_up_shexp.weight", "ES" },
		{ "ffn_down_shexp.weight", "SE" },
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		uint32_t k = 0;

		if (strcmp(n, tab[i].name))
			continue;
		for (const char *s = tab[i].sym; *s; s++) {
			switch (*s) {
			case 'E': ne[k++] = d->E; break;
			case 'V': ne[k++] = d->V; break;
			case 'Q': ne[k++] = QO; break;
			case 'K': ne[k++] = KO; break;
			case 'D': ne[k++] = d->HD; break;
			case 'h': ne[k++] = d->HD / 2; break;
			case 'H': ne[k++] = d->H; break;
			case 'X': ne[k++] = d->X; break;
			case 'f': ne[k++] = d->FX; break;
			case 'F': ne[k++] = d->F; break;
			case 'C': ne[k++] = 2 * d->SG * d->SS + d->SI; break;
			case 'I': ne[k++] = d->SI; break;
			case 'k': ne[k++] = d->SK; break;
			case 'T': ne[k++] = d->ST; break;
			case 'v': ne[k++] = d->ST ? d->SI / d->ST : 0; break;
			case 'S': ne[k++] = d->FS; break;
			}
		}
		if (d->gated_q && !strcmp(n, "attn_q.weight"))
			ne[1] *= 2;
		return k;
	}
	return 0;
}

/* "blk.12.attn_q.weight" -> layer 12, rest "attn_q.weight"; globals -> -1, whole name. */
static long s_split_name(const char *name, const char **rest)
{
	char *end;
	long l;

	*rest = name;
	if (strncmp(name, "blk.", 4))
		return -1;
	l = strtol(name + 4, &end, 10);
	if (*end != '.')
		return -1;
	*rest = end + 1;
	return l;
}

/* Check every tensor's shape against the formulas; return how many tensors were checked. */
static int s_check_shapes(const struct ns_gguf *g, const char *what)
{
	struct dims d;
	int n = 0;

	s_dims(g, &d);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &g->tensors[i];
		const char *rest;
		uint64_t ne[4] = { 1, 1, 1, 1 };
		uint32_t nd;

		s_split_name(t->name.s, &rest);
		nd = s_expect(rest, &d, ne);
		CHECK(nd, "%s: %s has no shape rule", what, t->name.s);
		if (!nd)
			continue;
		CHECK(t->n_dims == nd && t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2],
		      "%s: %s is %u-D [%" PRIu64 ", %" PRIu64 ", %" PRIu64 "], expected %u-D [%" PRIu64
		      ", %" PRIu64 ", %" PRIu64 "]", what, t->name.s, t->n_dims, t->ne[0], t->ne[1],
		      t->ne[2], nd, ne[0], ne[1], ne[2]);
		n++;
	}
	return n;
}

/* ---- one preset against one oracle file ---- */

enum type_rule {
	TYPES_EXACT,   /* every tensor's type equals the oracle's (token_embd excepted if tied) */
	TYPES_KQUANT,  /* matrices K-quants or Q8_0, experts 3-D (llama.cpp's n_expert == 8 rule
			* in the tiny model does not apply to 128 experts) */
};

struct real {
	const char *preset;
	uint64_t E, F, FX, X, XU, H, HKV, HD, L, V;
};

/* config.json of each published model */
static const struct real s_real[] = {
	{ "llama-8b", 4096, 14336, 0, 0, 0, 32, 8, 128, 32, 128256 },
	{ "qwen3-8b", 4096, 12288, 0, 0, 0, 32, 8, 128, 36, 151936 },
	{ "qwen3-30b-a3b", 2048, 6144, 768, 128, 8, 32, 4, 128, 48, 151936 },
	{ "qwen3-235b-a22b", 4096, 12288, 1536, 128, 8, 64, 4, 128, 94, 151936 },
	{ "gpt-oss-120b", 2880, 2880, 2880, 128, 4, 64, 8, 64, 36, 201088 },
	/* Qwen3.5: the sources are cited at s_presets in modelfile/synth.c */
	{ "qwen3.5-4b", 2560, 9216, 0, 0, 0, 16, 4, 256, 32, 248320 },
	{ "qwen3.5-35b-a3b", 2048, 0, 512, 256, 8, 16, 2, 256, 40, 248320 },
	{ "qwen3.5-397b-a17b", 4096, 0, 1024, 512, 10, 32, 2, 256, 60, 248320 },
	/* Qwen3-VL's text_config: the sources are cited at s_presets in modelfile/synth.c */
	{ "qwen3-vl-8b", 4096, 12288, 0, 0, 0, 32, 8, 128, 36, 151936 },
	{ "qwen3-vl-30b-a3b", 2048, 6144, 768, 128, 8, 32, 4, 128, 48, 151936 },
};

/* The Gated DeltaNet side of the Qwen3.5 presets (config.json's linear_* keys as GGUF's ssm.*:
 * conv kernel, key head dim, key heads, value heads, value heads x value head dim), the
 * shared expert, full_attention_interval, rotary dims (256 x 0.25), tied embeddings. */
static const struct {
	const char *preset;
	uint64_t SK, SS, SG, ST, SI, FS, interval, rope_dims;
	bool tied;
} s_real_hybrid[] = {
	{ "qwen3.5-4b", 4, 128, 16, 32, 4096, 0, 4, 64, true },
	{ "qwen3.5-35b-a3b", 4, 128, 16, 32, 4096, 512, 4, 64, false },
	{ "qwen3.5-397b-a17b", 4, 128, 16, 64, 8192, 1024, 4, 64, false },
};

static bool s_is_tok_key(const char *k)
{
	return !strncmp(k, "tokenizer.", 10);
}

/* may_lack: a key of the oracle the published model has not (NULL: none) */
static void s_check_meta(const struct ns_gguf *ours, const struct ns_gguf *ref, const char *what,
			 const char *may_lack)
{
	static const char *const tok_core[] = {
		"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
		"tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
		"tokenizer.ggml.eos_token_id",
	};

	for (uint64_t i = 0; i < ref->n_kv; i++) {
		const struct ns_gguf_kv *kv = &ref->kv[i], *o;
		if (s_is_tok_key(kv->key.s) || (may_lack && !strcmp(kv->key.s, may_lack)))
			continue;
		o = ns_gguf_find(ours, kv->key.s);
		CHECK(o, "%s: key %s missing", what, kv->key.s);
		if (o)
			CHECK(o->value.type == kv->value.type, "%s: key %s is %s, llama.cpp's is %s",
			      what, kv->key.s, ns_gguf_vtype_name(o->value.type),
			      ns_gguf_vtype_name(kv->value.type));
	}
	for (uint64_t i = 0; i < ours->n_kv; i++) {
		const char *k = ours->kv[i].key.s;
		CHECK(s_is_tok_key(k) || ns_gguf_find(ref, k), "%s: extra key %s", what, k);
	}
	for (size_t i = 0; i < sizeof(tok_core) / sizeof(tok_core[0]); i++)
		CHECK(ns_gguf_find(ours, tok_core[i]), "%s: tokenizer key %s missing", what,
		      tok_core[i]);
	{
		uint64_t a = 0, b = 1;
		CHECK(ns_gguf_get_u64(ours, "general.file_type", &a) &&
		      ns_gguf_get_u64(ref, "general.file_type", &b) && a == b,
		      "%s: general.file_type %" PRIu64 ", llama.cpp's %" PRIu64, what, a, b);
	}
}

static void s_check_names_types(const struct ns_gguf *ours, const struct ns_gguf *ref,
				enum type_rule rule, const char *what)
{
	struct dims dr, dd;

	s_dims(ref, &dr);
	s_dims(ours, &dd);
	/* every oracle tensor (layer 0 and 1 stand for every layer) exists in ours, same type rule */
	for (uint64_t l = 0; l < dd.L; l++) {
		for (uint64_t i = 0; i < ref->n_tensors; i++) {
			const struct ns_gguf_tensor *rt = &ref->tensors[i];
			const char *rest;
			long rl = s_split_name(rt->name.s, &rest);
			char name[160];
			int64_t k;

			if (rl < 0 && l > 0)
				continue; /* globals once */
			if (rl >= 0 && (uint64_t)rl != (l < 2 ? l : 1))
				continue;
			if (rl < 0)
				snprintf(name, sizeof(name), "%s", rest);
			else
				snprintf(name, sizeof(name), "blk.%" PRIu64 ".%s", l, rest);
			k = ns_gguf_find_tensor(ours, name);
			CHECK(k >= 0, "%s: tensor %s (llama.cpp has it) missing", what, name);
			if (k < 0)
				continue;
			if (rule == TYPES_EXACT && !(dr.tied && !strcmp(name, "token_embd.weight")) &&
			    l < 2)
				CHECK(ours->tensors[k].type == rt->type, "%s: %s is %s, llama.cpp's %s",
				      what, name, ns_type_get(ours->tensors[k].type)->name,
				      ns_type_get(rt->type)->name);
			if (rt->type == NS_TYPE_F32 && (rt->n_dims == 1 || strstr(name, "gate_inp") ||
							strstr(name, "_exps.bias")))
				CHECK(ours->tensors[k].type == NS_TYPE_F32, "%s: %s must stay F32", what,
				      name);
		}
	}
	/* nothing in ours that the oracle lacks, but output.weight where the tiny model is tied */
	for (uint64_t i = 0; i < ours->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &ours->tensors[i];
		const char *rest;
		long l = s_split_name(t->name.s, &rest);
		char name[160];

		if (l < 0)
			snprintf(name, sizeof(name), "%s", rest);
		else
			snprintf(name, sizeof(name), "blk.%d.%s", l == 0 ? 0 : 1, rest);
		CHECK(ns_gguf_find_tensor(ref, name) >= 0 ||
		      (dr.tied && !strcmp(name, "output.weight")),
		      "%s: tensor %s has no counterpart in llama.cpp's file", what, t->name.s);
		CHECK(l < (long)dd.L, "%s: %s beyond block_count %" PRIu64, what, t->name.s, dd.L);
		if (rule == TYPES_KQUANT && t->n_dims >= 2 && !strstr(name, "gate_inp"))
			CHECK(t->type == NS_TYPE_Q4_K || t->type == NS_TYPE_Q5_K ||
			      t->type == NS_TYPE_Q6_K || t->type == NS_TYPE_Q8_0,
			      "%s: %s has type %s", what, t->name.s, ns_type_get(t->type)->name);
	}
}

/* llama.cpp's loader: data and every tensor 32-byte aligned, rows whole blocks, header sane. */
static void s_check_layout(const struct ns_gguf *g, bool has_meta, const char *what)
{
	uint64_t align = 32;
	struct dims d;

	ns_gguf_get_u64(g, "general.alignment", &align);
	CHECK(g->version == 3, "%s: GGUF version %u", what, g->version);
	CHECK(g->alignment == align && align == 32, "%s: alignment %u", what, g->alignment);
	CHECK(g->data_offset % align == 0, "%s: data offset %" PRIu64, what, g->data_offset);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &g->tensors[i];
		const struct ns_type_info *ti = ns_type_get(t->type);
		CHECK(t->offset % align == 0, "%s: %s at %" PRIu64, what, t->name.s, t->offset);
		CHECK(ti && t->ne[0] % ti->block_elems == 0, "%s: %s row of %" PRIu64, what,
		      t->name.s, t->ne[0]);
		CHECK(t->file_offset + t->n_bytes <= g->file_size, "%s: %s past the end", what,
		      t->name.s);
	}
	if (!has_meta)
		return;
	s_dims(g, &d);
	CHECK(d.H && d.HKV && d.H % d.HKV == 0, "%s: heads %" PRIu64 "/%" PRIu64, what, d.H, d.HKV);
	CHECK(d.XU <= d.X, "%s: experts used %" PRIu64 " of %" PRIu64, what, d.XU, d.X);
	CHECK(d.V && ns_gguf_find_tensor(g, "token_embd.weight") >= 0 &&
	      g->tensors[ns_gguf_find_tensor(g, "token_embd.weight")].ne[1] == d.V,
	      "%s: token_embd rows differ from the %" PRIu64 " tokens", what, d.V);
}

static void s_check_real(const struct ns_gguf *g, const char *preset, uint32_t layers,
			 bool full_vocab, const char *what)
{
	struct dims d;

	s_dims(g, &d);
	for (size_t i = 0; i < sizeof(s_real) / sizeof(s_real[0]); i++) {
		const struct real *r = &s_real[i];
		if (strcmp(r->preset, preset))
			continue;
		CHECK(d.E == r->E && d.F == r->F && d.FX == r->FX && d.H == r->H && d.HKV == r->HKV &&
		      d.HD == r->HD && d.L == layers && d.XU == r->XU,
		      "%s: dims differ from the published model", what);
		CHECK(d.X == (r->X ? (r->XU > 8 ? 16 : 8) : 0) || d.X == r->X, "%s: %" PRIu64 " experts", what, d.X);
		if (full_vocab)
			CHECK(d.V == r->V, "%s: vocabulary %" PRIu64 ", the model has %" PRIu64, what,
			      d.V, r->V);
		for (size_t k = 0; k < sizeof(s_real_hybrid) / sizeof(s_real_hybrid[0]); k++) {
			if (strcmp(s_real_hybrid[k].preset, preset))
				continue;
			CHECK(d.SK == s_real_hybrid[k].SK && d.SS == s_real_hybrid[k].SS &&
			      d.SG == s_real_hybrid[k].SG && d.ST == s_real_hybrid[k].ST &&
			      d.SI == s_real_hybrid[k].SI && d.FS == s_real_hybrid[k].FS &&
			      s_u(g, d.arch, "full_attention_interval", 0) == s_real_hybrid[k].interval &&
			      s_u(g, d.arch, "rope.dimension_count", 0) == s_real_hybrid[k].rope_dims &&
			      d.tied == s_real_hybrid[k].tied,
			      "%s: Gated DeltaNet dims differ from the published model", what);
		}
		return;
	}
	CHECK(0, "%s: no published dimensions for %s", what, preset);
}

static char s_dir[256];

static int s_gen_opt(const char *preset, const char *quant, uint32_t layers, bool small,
		     uint32_t split, bool no_data, const char *file, char *path, size_t len)
{
	struct ns_synth_opts o = { .preset = preset, .layers = layers, .seed = 3, .split = split,
				   .no_data = no_data };
	char err[512];
	int ret;

	if (quant) {
		o.quant_set = true;
		if (ns_synth_parse_quant(quant, &o.quant))
			return -EINVAL;
	}
	if (small) {
		o.max_vocab = 4096;
		o.max_experts = strstr(preset, "397b") ? 16 : 8; /* at least its 10 used */
	}
	snprintf(path, len, "%s/%s", s_dir, file);
	ret = ns_synth_write(&o, path, err, sizeof(err));
	CHECK(ret == 0, "%s: %s", preset, err);
	return ret;
}

static int s_gen(const char *preset, const char *quant, uint32_t layers, bool small,
		 uint32_t split, const char *file, char *path, size_t len)
{
	return s_gen_opt(preset, quant, layers, small, split, false, file, path, len);
}

/* --mtp (the checkpoints' MTP block, for --draft mtp): block_count + 1, nextn_predict_layers 1,
 * block n_layer holding a full-attention layer, its FFN and the nextn tensors in llama.cpp's
 * names and shapes (src/models/qwen35.cpp, qwen35moe.cpp load_block_mtp); the whole depth as a
 * header with holes. */
static void s_case_mtp(const char *preset, uint32_t n_layer, uint64_t E, uint64_t q2,
		       uint64_t kv, bool moe)
{
	struct ns_synth_opts o = { .preset = preset, .seed = 3, .no_data = true, .mtp = true };
	static const char *const dense[] = { "ffn_gate", "ffn_up", "ffn_down" };
	static const char *const experts[] = { "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
					       "ffn_down_exps", "ffn_gate_inp_shexp",
					       "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp" };
	const struct { const char *name; uint64_t ne0, ne1; } want[] = {
		{ "nextn.eh_proj", 2 * E, E }, { "nextn.enorm", E, 1 }, { "nextn.hnorm", E, 1 },
		{ "nextn.shared_head_norm", E, 1 }, { "attn_norm", E, 1 },
		{ "post_attention_norm", E, 1 }, { "attn_q", E, q2 }, { "attn_k", E, kv },
		{ "attn_v", E, kv }, { "attn_output", q2 / 2, E },
	};
	char path[512], err[512], name[128], key[128];
	struct ns_gguf *g = NULL;
	uint64_t v = 0, n_blk = 0;
	int64_t ti;

	snprintf(path, sizeof(path), "%s/mtp.gguf", s_dir);
	CHECK(ns_synth_write(&o, path, err, sizeof(err)) == 0, "%s --mtp: %s", preset, err);
	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		CHECK(0, "%s --mtp: %s", preset, err);
		return;
	}
	snprintf(key, sizeof(key), "%s.block_count", moe ? "qwen35moe" : "qwen35");
	CHECK(ns_gguf_get_u64(g, key, &v) && v == n_layer + 1, "%s --mtp: block_count %" PRIu64,
	      preset, v);
	snprintf(key, sizeof(key), "%s.nextn_predict_layers", moe ? "qwen35moe" : "qwen35");
	CHECK(ns_gguf_get_u64(g, key, &v) && v == 1, "%s --mtp: no nextn_predict_layers 1",
	      preset);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(name, sizeof(name), "blk.%u.%s.weight", n_layer, want[i].name);
		ti = ns_gguf_find_tensor(g, name);
		CHECK(ti >= 0 && g->tensors[ti].ne[0] == want[i].ne0 &&
		      (want[i].ne1 == 1 ? g->tensors[ti].n_dims == 1 :
		       g->tensors[ti].ne[1] == want[i].ne1),
		      "%s --mtp: %s missing or of another shape", preset, name);
	}
	for (size_t i = 0; i < (moe ? 8u : 3u); i++) {
		snprintf(name, sizeof(name), "blk.%u.%s.weight", n_layer, moe ? experts[i] : dense[i]);
		CHECK(ns_gguf_find_tensor(g, name) >= 0, "%s --mtp: %s missing", preset, name);
	}
	snprintf(name, sizeof(name), "blk.%u.", n_layer);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		n_blk += !strncmp(g->tensors[i].name.s, name, strlen(name));
	CHECK(n_blk == (moe ? 18u : 13u) + 2, "%s --mtp: %" PRIu64 " tensors in the block", preset,
	      n_blk);
	ns_gguf_close(&g);
	unlink(path);
}

static void s_case(const char *preset, const char *quant, const char *oracle, enum type_rule rule)
{
	char path[512], opath[512], rel[256], err[512], what[128];
	struct ns_gguf *ours = NULL, *ref = NULL;
	int n;

	snprintf(what, sizeof(what), "%s/%s", preset, quant ? quant : "default");
	snprintf(rel, sizeof(rel), "tiny/%s", oracle);
	ns_test_oracle_path(opath, sizeof(opath), rel);
	if (ns_gguf_open(opath, &ref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		return;
	}
	n = s_check_shapes(ref, oracle); /* the formulas hold for llama.cpp's own file */
	CHECK(n == (int)ref->n_tensors, "%s: %d of %" PRIu64 " shapes checked", oracle, n,
	      ref->n_tensors);
	if (s_gen(preset, quant, 2, true, 0, "m.gguf", path, sizeof(path)) == 0) {
		if (ns_gguf_open(path, &ours, err, sizeof(err))) {
			CHECK(0, "%s: %s", what, err);
		} else {
			s_check_shapes(ours, what);
			s_check_meta(ours, ref, what, NULL);
			s_check_names_types(ours, ref, rule, what);
			s_check_layout(ours, true, what);
			s_check_real(ours, preset, 2, false, what);
			ns_gguf_close(&ours);
		}
		unlink(path);
	}
	ns_gguf_close(&ref);
	fprintf(stderr, "checked %s against %s\n", what, oracle);
}

/* --split 3: llama-gguf-split's keys on every shard, all tensors once, loadable as one model. */
static void s_split_case(void)
{
	char path[512], shard[600], err[512], opath[512];
	struct ns_gguf *ref = NULL;
	struct ns_model *m = NULL;
	uint64_t total = 0;

	ns_test_oracle_path(opath, sizeof(opath), "tiny/split/tiny-qwen3-F32-00002-of-00003.gguf");
	if (ns_gguf_open(opath, &ref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		return;
	}
	if (s_gen("qwen3-8b", NULL, 2, true, 3, "s.gguf", path, sizeof(path)))
		goto out;
	for (uint32_t s = 0; s < 3; s++) {
		struct ns_gguf *g = NULL;
		int64_t v;
		snprintf(shard, sizeof(shard), "%s/s-%05u-of-00003.gguf", s_dir, s + 1);
		if (ns_gguf_open(shard, &g, err, sizeof(err))) {
			CHECK(0, "split: %s", err);
			continue;
		}
		for (uint64_t i = 0; i < ref->n_kv; i++) { /* split.no, split.count, ... */
			const struct ns_gguf_kv *o = ns_gguf_find(g, ref->kv[i].key.s);
			CHECK(o && o->value.type == ref->kv[i].value.type, "split shard %u: key %s", s,
			      ref->kv[i].key.s);
		}
		CHECK(ns_gguf_get_i64(g, "split.no", &v) && v == s, "shard %u: split.no", s);
		CHECK(ns_gguf_get_i64(g, "split.count", &v) && v == 3, "shard %u: split.count", s);
		CHECK(s == 0 || g->n_kv == ref->n_kv, "shard %u: %" PRIu64 " keys, llama-gguf-split "
		      "writes %" PRIu64, s, g->n_kv, ref->n_kv);
		CHECK(g->n_tensors > 0, "shard %u is empty", s);
		s_check_layout(g, s == 0, "split");
		total += g->n_tensors;
		ns_gguf_close(&g);
	}
	snprintf(shard, sizeof(shard), "%s/s-00001-of-00003.gguf", s_dir);
	if (ns_model_open(shard, &m, err, sizeof(err))) {
		CHECK(0, "split model: %s", err);
	} else {
		int64_t n = 0;
		struct ns_gguf *g = m->shards[0];
		ns_gguf_get_i64(g, "split.tensors.count", &n);
		CHECK(m->n_shards == 3, "split: %u shards", m->n_shards);
		CHECK((uint64_t)n == m->n_tensors, "split: %" PRIu64 " tensors, split.tensors.count %"
		      PRId64, m->n_tensors, n);
		CHECK(ns_model_find(m, "blk.1.ffn_down.weight") && ns_model_find(m, "token_embd.weight"),
		      "split: tensors not found");
		ns_model_close(&m);
	}
	CHECK(total == 2 + 2 * 11 + 1, "split: %" PRIu64 " tensors in the shards", total);
	for (uint32_t s = 0; s < 3; s++) {
		snprintf(shard, sizeof(shard), "%s/s-%05u-of-00003.gguf", s_dir, s + 1);
		unlink(shard);
	}
out:
	ns_gguf_close(&ref);
}

/* Shards cut by bytes never leave one empty and keep the tensors' order, whatever the count:
 * the 25 tensors of a 2-layer qwen3-8b in 2, 7, 13, 24 and 25 shards; 26 is refused. */
static void s_split_counts_case(void)
{
	static const uint32_t counts[] = { 2, 7, 13, 24, 25 };
	char path[512], shard[600], err[512];
	struct ns_gguf *whole = NULL;
	struct ns_synth_opts o = { .preset = "qwen3-8b", .layers = 2, .seed = 3, .split = 26,
				   .max_vocab = 4096, .max_experts = 8 };

	if (s_gen("qwen3-8b", NULL, 2, true, 0, "w.gguf", path, sizeof(path)))
		return;
	if (ns_gguf_open(path, &whole, err, sizeof(err))) {
		CHECK(0, "split counts: %s", err);
		unlink(path);
		return;
	}
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		const uint32_t n = counts[c];
		uint64_t next = 0; /* index in the whole file of the next tensor expected */

		if (s_gen("qwen3-8b", NULL, 2, true, n, "c.gguf", path, sizeof(path)))
			continue;
		for (uint32_t s = 0; s < n; s++) {
			struct ns_gguf *g = NULL;

			snprintf(shard, sizeof(shard), "%s/c-%05u-of-%05u.gguf", s_dir, s + 1, n);
			if (ns_gguf_open(shard, &g, err, sizeof(err))) {
				CHECK(0, "split %u: %s", n, err);
				unlink(shard);
				continue;
			}
			CHECK(g->n_tensors > 0, "split %u: shard %u is empty", n, s + 1);
			for (uint64_t i = 0; i < g->n_tensors; i++, next++)
				CHECK(next < whole->n_tensors &&
				      !strcmp(g->tensors[i].name.s, whole->tensors[next].name.s),
				      "split %u: shard %u tensor %" PRIu64 " (%s) out of order", n, s + 1,
				      i, g->tensors[i].name.s);
			ns_gguf_close(&g);
			unlink(shard);
		}
		CHECK(next == whole->n_tensors, "split %u: %" PRIu64 " of %" PRIu64 " tensors", n,
		      next, whole->n_tensors);
	}
	snprintf(path, sizeof(path), "%s/r.gguf", s_dir);
	CHECK(ns_synth_write(&o, path, err, sizeof(err)) == -EINVAL && strstr(err, "only 25"),
	      "split 26 of 25 tensors: '%s'", err);
	ns_gguf_close(&whole);
	snprintf(path, sizeof(path), "%s/w.gguf", s_dir);
	unlink(path);
}

/* One real-size file: qwen3-8b, one layer, full vocabulary (the embeddings are most of it). */
static void s_full_vocab_case(void)
{
	char path[512], err[512];
	struct ns_gguf *g = NULL;

	if (s_gen("qwen3-8b", NULL, 1, false, 0, "full.gguf", path, sizeof(path)))
		return;
	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		CHECK(0, "full: %s", err);
	} else {
		s_check_shapes(g, "qwen3-8b full vocab");
		s_check_layout(g, true, "qwen3-8b full vocab");
		s_check_real(g, "qwen3-8b", 1, true, "qwen3-8b full vocab");
		ns_gguf_close(&g);
	}
	unlink(path);
}

/* Qwen3.5 against llama.cpp's tiny models at the same depth (4 layers, the last full
 * attention): every tensor of every layer by name both ways, the shapes, the keys, and
 * llama-quantize's Q4_K_M type of each tensor. In the tiny MoE (8 experts) llama.cpp applies
 * its 8-expert rules (Q8_0 attn_qkv/attn_v/attn_k, Q5_K attn_output), which the 256- and
 * 512-expert models do not get, so those four are only checked to be quantized there; and
 * its 128-wide expert rows take the fallbacks of a row not a multiple of 256 (Q4_K -> Q5_0,
 * Q6_K -> Q8_0), mapped back here. */
static uint32_t s_q35_intended(const char *name, uint32_t t)
{
	if (t == NS_TYPE_Q5_0)
		return NS_TYPE_Q4_K;
	if (t == NS_TYPE_Q8_0 && strstr(name, "_exps."))
		return NS_TYPE_Q6_K;
	return t;
}

static void s_case_qwen35(const char *preset, const char *oracle, bool moe)
{
	char path[512], opath[512], rel[256], err[512], what[128];
	struct ns_gguf *ours = NULL, *ref = NULL;
	struct dims dr;
	int n;

	snprintf(what, sizeof(what), "%s/default", preset);
	snprintf(rel, sizeof(rel), "tiny/%s", oracle);
	ns_test_oracle_path(opath, sizeof(opath), rel);
	if (ns_gguf_open(opath, &ref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		return;
	}
	n = s_check_shapes(ref, oracle);
	CHECK(n == (int)ref->n_tensors, "%s: %d of %" PRIu64 " shapes checked", oracle, n,
	      ref->n_tensors);
	s_dims(ref, &dr);
	if (s_gen(preset, NULL, (uint32_t)dr.L, true, 0, "q.gguf", path, sizeof(path)) == 0) {
		if (ns_gguf_open(path, &ours, err, sizeof(err))) {
			CHECK(0, "%s: %s", what, err);
		} else {
			s_check_shapes(ours, what);
			/* the published MoE configs have no intermediate_size: no feed_forward_length */
			s_check_meta(ours, ref, what, moe ? "qwen35moe.feed_forward_length" : NULL);
			s_check_layout(ours, true, what);
			s_check_real(ours, preset, (uint32_t)dr.L, false, what);
			CHECK(ours->n_tensors == ref->n_tensors, "%s: %" PRIu64 " tensors, llama.cpp's "
			      "%" PRIu64, what, ours->n_tensors, ref->n_tensors);
			for (uint64_t i = 0; i < ref->n_tensors; i++) {
				const struct ns_gguf_tensor *rt = &ref->tensors[i];
				const char *nm = rt->name.s;
				int64_t k = ns_gguf_find_tensor(ours, nm);
				bool by_8 = moe && (strstr(nm, "attn_qkv.") || strstr(nm, "attn_v.") ||
						    strstr(nm, "attn_k.") || strstr(nm, "attn_output."));
				uint32_t want = s_q35_intended(nm, rt->type), got;

				CHECK(k >= 0, "%s: tensor %s (llama.cpp has it) missing", what, nm);
				if (k < 0)
					continue;
				got = ours->tensors[k].type;
				if (by_8)
					CHECK(got == NS_TYPE_Q4_K || got == NS_TYPE_Q6_K, "%s: %s is %s",
					      what, nm, ns_type_get(got)->name);
				else
					CHECK(got == want, "%s: %s is %s, llama-quantize's Q4_K_M %s", what,
					      nm, ns_type_get(got)->name, ns_type_get(want)->name);
			}
			for (uint64_t i = 0; i < ours->n_tensors; i++)
				CHECK(ns_gguf_find_tensor(ref, ours->tensors[i].name.s) >= 0,
				      "%s: tensor %s has no counterpart in llama.cpp's file", what,
				      ours->tensors[i].name.s);
			ns_gguf_close(&ours);
		}
		unlink(path);
	}
	ns_gguf_close(&ref);
	fprintf(stderr, "checked %s against %s\n", what, oracle);
}

/* ---- Gemma 4 ---- */

static uint64_t s_min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* llama-quant.cpp's use_more_bits */
static bool s_more_bits(uint64_t i, uint64_t n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The published Gemma 4 dimensions (the sources are cited at s_presets in modelfile/synth.c):
 * hidden, ffn, heads, sliding KV heads, global KV heads (0: the same), sliding and global head
 * size, layers, per-layer input size, KV-shared layers of the whole model, sliding window,
 * whether a global layer's V is its K. */
static const struct {
	const char *preset;
	uint64_t E, F, H, HKV, HKV_full, HD_swa, HD, L, ple, shared, window;
	bool k_eq_v;
} s_real_gemma4[] = {
	{ "gemma-4-31b", 5376, 21504, 32, 16, 4, 256, 512, 60, 0, 0, 1024, true },
	{ "gemma-4-e4b", 2560, 10240, 8, 2, 0, 256, 512, 42, 256, 18, 512, false },
	{ "gemma-4-26b-a4b", 2816, 2112, 16, 8, 2, 256, 512, 30, 0, 0, 1024, true },
};

/* 26B-A4B's MoE block on every layer beside the dense FFN, as llama.cpp's gemma4 loads it
 * (src/models/gemma4.cpp: ffn_gate_inp and its scale, pre_ffw_norm_2, post_ffw_norm_1/2,
 * ffn_gate_up_exps, ffn_down_exps; llama-model.cpp: ffn_down_exps.scale), and its published
 * counts: 128 experts, 8 per token, 704 wide. */
static const char *const s_gemma4_moe_names[] = {
	"ffn_down_exps.scale", "ffn_down_exps.weight", "ffn_gate_inp.scale",
	"ffn_gate_inp.weight", "ffn_gate_up_exps.weight", "post_ffw_norm_1.weight",
	"post_ffw_norm_2.weight", "pre_ffw_norm_2.weight",
};

static uint64_t s_layer_u64(const struct ns_gguf *g, const char *key, uint64_t l)
{
	char k[128];
	const struct ns_gguf_value *a;
	uint64_t v = 0;

	snprintf(k, sizeof(k), "gemma4.%s", key);
	a = ns_gguf_get_arr(g, k);
	if (a)
		return l < a->v.arr.n ? (uint64_t)ns_gguf_arr_i64(a, l) : 0;
	ns_gguf_get_u64(g, k, &v);
	return v;
}

static bool s_gemma4_slides(const struct ns_gguf *g, uint64_t l)
{
	return s_layer_u64(g, "attention.sliding_window_pattern", l) != 0;
}

static bool s_gemma4_shared(const struct ns_gguf *g, uint64_t l)
{
	uint64_t L = s_layer_u64(g, "block_count", 0);

	return l + s_layer_u64(g, "attention.shared_kv_layers", 0) >= L;
}

/* llama-quant.cpp's fallback for rows a K-quant cannot hold (26B-A4B's 704 and 2112) */
static uint32_t s_kquant_fallback(uint64_t row, uint32_t t)
{
	if (row % 256 == 0)
		return t;
	if (row % 32)
		return NS_TYPE_F16;
	return t == NS_TYPE_Q4_K ? NS_TYPE_Q5_0 : NS_TYPE_Q8_0;
}

/* llama-quantize's Q4_K_M type of a gemma4 tensor (llama-quant.cpp, written out here, and
 * checked on llama.cpp's own tiny-gemma4-Q4_K_M first): 1-D F32; tied token_embd and
 * per_layer_token_embd the output's Q6_K; per_layer_model_proj never quantized (0: any float);
 * attn_v Q6_K where use_more_bits(its index among the attn_v tensors, their count); ffn_down
 * by layer; everything else Q4_K. */
static uint32_t s_gemma4_q4km(const struct ns_gguf *g, uint64_t i)
{
	const struct ns_gguf_tensor *t = &g->tensors[i];
	const char *rest;
	long l = s_split_name(t->name.s, &rest);
	uint64_t L = s_layer_u64(g, "block_count", 0), n_v = 0, i_v = 0;

	if (t->n_dims == 1)
		return NS_TYPE_F32;
	if (!strcmp(rest, "token_embd.weight") || !strcmp(rest, "per_layer_token_embd.weight"))
		return NS_TYPE_Q6_K;
	if (!strcmp(rest, "per_layer_model_proj.weight"))
		return 0;
	if (!strcmp(rest, "attn_v.weight")) {
		for (uint64_t k = 0; k < g->n_tensors; k++) {
			const char *r;
			long kl = s_split_name(g->tensors[k].name.s, &r);

			if (strcmp(r, "attn_v.weight"))
				continue;
			n_v++;
			i_v += kl < l;
		}
		return s_more_bits(i_v, n_v) ? NS_TYPE_Q6_K : NS_TYPE_Q4_K;
	}
	if (!strcmp(rest, "ffn_gate_inp.weight")) /* the router: never quantized */
		return NS_TYPE_F32;
	if (!strcmp(rest, "ffn_down.weight") || !strcmp(rest, "ffn_down_exps.weight"))
		/* by layer: with n_expert > 1 llama-quant.cpp reads it from the name */
		return s_kquant_fallback(t->ne[0], s_more_bits((uint64_t)l, L) ? NS_TYPE_Q6_K
										: NS_TYPE_Q4_K);
	return s_kquant_fallback(t->ne[0], NS_TYPE_Q4_K);
}

static void s_check_gemma4_types(const struct ns_gguf *g, const char *what)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		uint32_t want = s_gemma4_q4km(g, i), got = g->tensors[i].type;

		if (want)
			CHECK(got == want, "%s: %s is %s, llama-quantize's Q4_K_M %s", what,
			      g->tensors[i].name.s, ns_type_get(got)->name, ns_type_get(want)->name);
		else
			CHECK(got == NS_TYPE_F16 || got == NS_TYPE_BF16 || got == NS_TYPE_F32,
			      "%s: %s is %s, unquantized expected", what, g->tensors[i].name.s,
			      ns_type_get(got)->name);
	}
}

/* The tensor names of layer l without "blk.l.", sorted into buf as one string. */
static void s_layer_names(const struct ns_gguf *g, long l, char *buf, size_t n)
{
	const char *names[64];
	size_t k = 0, used = 0;

	for (uint64_t i = 0; i < g->n_tensors && k < 64; i++) {
		const char *rest;

		if (s_split_name(g->tensors[i].name.s, &rest) == l)
			names[k++] = rest;
	}
	for (size_t a = 1; a < k; a++) /* insertion sort: a few dozen names */
		for (size_t b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
			const char *x = names[b];
			names[b] = names[b - 1];
			names[b - 1] = x;
		}
	buf[0] = 0;
	for (size_t i = 0; i < k && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s ", names[i]);
}

/* A gemma4 preset cut to `layers` (its header only: the data is a hole) against llama.cpp's
 * gemma4 file `oracle`: every layer has the tensor names of the oracle's layer of the same
 * kind (sliding or global, KV-shared or not), the global names and keys are the oracle's,
 * llama-quantize's Q4_K_M rules (checked on the oracle first when it is Q4_K_M), the
 * published dimensions in the shapes and keys. */
static void s_case_gemma4(const char *preset, const char *oracle, uint32_t layers)
{
	char path[512], opath[512], err[512], what[128], a[4096], b[4096];
	struct ns_gguf *ours = NULL, *ref = NULL;
	uint64_t ft = 0;
	size_t r;
	bool moe;

	for (r = 0; strcmp(s_real_gemma4[r].preset, preset); r++)
		;
	moe = strstr(preset, "-a4b") != NULL;
	snprintf(what, sizeof(what), "%s/default", preset);
	ns_test_oracle_path(opath, sizeof(opath), oracle);
	if (ns_gguf_open(opath, &ref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		return;
	}
	if (ns_gguf_get_u64(ref, "general.file_type", &ft) && ft == 15)
		s_check_gemma4_types(ref, oracle);
	/* MoE: all 128 experts (the header only; the data is a hole) */
	if (s_gen_opt(preset, NULL, layers, !moe, 0, true, "g.gguf", path, sizeof(path))) {
		ns_gguf_close(&ref);
		return;
	}
	if (ns_gguf_open(path, &ours, err, sizeof(err))) {
		CHECK(0, "%s: %s", what, err);
		goto out;
	}
	/* keys: the oracle's (but its size label, and the feed_forward_length array of a
	 * double-wide MLP the published model has not), of the same type, nothing else */
	for (uint64_t i = 0; i < ref->n_kv; i++) {
		const struct ns_gguf_kv *kv = &ref->kv[i], *o;

		if (s_is_tok_key(kv->key.s) || !strcmp(kv->key.s, "general.size_label"))
			continue;
		o = ns_gguf_find(ours, kv->key.s);
		CHECK(o, "%s: key %s missing", what, kv->key.s);
		if (o && strcmp(kv->key.s, "gemma4.feed_forward_length"))
			CHECK(o->value.type == kv->value.type, "%s: key %s is %s, llama.cpp's is %s",
			      what, kv->key.s, ns_gguf_vtype_name(o->value.type),
			      ns_gguf_vtype_name(kv->value.type));
	}
	for (uint64_t i = 0; i < ours->n_kv; i++)
		CHECK(s_is_tok_key(ours->kv[i].key.s) || ns_gguf_find(ref, ours->kv[i].key.s) ||
		      (moe && (!strcmp(ours->kv[i].key.s, "gemma4.expert_count") ||
			       !strcmp(ours->kv[i].key.s, "gemma4.expert_used_count") ||
			       !strcmp(ours->kv[i].key.s, "gemma4.expert_feed_forward_length"))),
		      "%s: extra key %s", what, ours->kv[i].key.s);
	if (moe) {
		char nm[64];
		int64_t k;

		CHECK(s_layer_u64(ours, "expert_count", 0) == 128 &&
		      s_layer_u64(ours, "expert_used_count", 0) == 8 &&
		      s_layer_u64(ours, "expert_feed_forward_length", 0) == 704,
		      "%s: expert counts differ from the published model", what);
		snprintf(nm, sizeof(nm), "blk.%u.ffn_gate_up_exps.weight", layers - 1);
		k = ns_gguf_find_tensor(ours, nm);
		CHECK(k >= 0 && ours->tensors[k].ne[0] == 2816 && ours->tensors[k].ne[1] == 1408 &&
		      ours->tensors[k].ne[2] == 128, "%s: %s shape", what, nm);
		snprintf(nm, sizeof(nm), "blk.%u.ffn_down_exps.weight", layers - 1);
		k = ns_gguf_find_tensor(ours, nm);
		CHECK(k >= 0 && ours->tensors[k].ne[0] == 704 && ours->tensors[k].ne[1] == 2816 &&
		      ours->tensors[k].ne[2] == 128, "%s: %s shape", what, nm);
	}
	/* names: per layer kind, and the globals */
	s_layer_names(ours, -1, a, sizeof(a));
	s_layer_names(ref, -1, b, sizeof(b));
	CHECK(!strcmp(a, b), "%s: global tensors '%s', llama.cpp's '%s'", what, a, b);
	for (uint64_t l = 0; l < layers; l++) {
		uint64_t RL = s_layer_u64(ref, "block_count", 0), m;

		for (m = 0; m < RL; m++)
			if (s_gemma4_slides(ref, m) == s_gemma4_slides(ours, l) &&
			    s_gemma4_shared(ref, m) == s_gemma4_shared(ours, l))
				break;
		CHECK(m < RL, "%s: layer %" PRIu64 "'s kind is not in %s", what, l, oracle);
		if (m == RL)
			continue;
		s_layer_names(ours, (long)l, a, sizeof(a));
		if (moe)
			for (size_t i = 0; i < sizeof(s_gemma4_moe_names) / sizeof(s_gemma4_moe_names[0]); i++) {
				char w[64], *at;

				snprintf(w, sizeof(w), "%s ", s_gemma4_moe_names[i]);
				at = strstr(a, w);
				CHECK(at, "%s: layer %" PRIu64 " lacks %s", what, l, w);
				if (at)
					memmove(at, at + strlen(w), strlen(at + strlen(w)) + 1);
			}
		s_layer_names(ref, (long)m, b, sizeof(b));
		CHECK(!strcmp(a, b), "%s: layer %" PRIu64 " has '%s', llama.cpp's layer %" PRIu64
		      " of its kind '%s'", what, l, a, m, b);
	}
	s_check_gemma4_types(ours, what);
	/* the published dimensions, in the keys and the shapes */
	{
		const uint64_t E = s_real_gemma4[r].E, H = s_real_gemma4[r].H;
		uint64_t n_shared = 0;

		CHECK(s_layer_u64(ours, "embedding_length", 0) == E &&
		      s_layer_u64(ours, "feed_forward_length", 0) == s_real_gemma4[r].F &&
		      s_layer_u64(ours, "attention.head_count", 0) == H &&
		      s_layer_u64(ours, "attention.key_length", 0) == s_real_gemma4[r].HD &&
		      s_layer_u64(ours, "attention.key_length_swa", 0) == s_real_gemma4[r].HD_swa &&
		      s_layer_u64(ours, "embedding_length_per_layer_input", 0) == s_real_gemma4[r].ple &&
		      s_layer_u64(ours, "attention.sliding_window", 0) == s_real_gemma4[r].window,
		      "%s: dims differ from the published model", what);
		for (uint64_t l = 0; l < layers; l++) {
			const bool swa = s_gemma4_slides(ours, l);
			const uint64_t hd = swa ? s_real_gemma4[r].HD_swa : s_real_gemma4[r].HD;
			const uint64_t kv = !swa && s_real_gemma4[r].HKV_full ? s_real_gemma4[r].HKV_full
									   : s_real_gemma4[r].HKV;
			char nm[64];
			int64_t k;

			CHECK(swa == (l % 6 != 5), "%s: layer %" PRIu64 " sliding %d", what, l, swa);
			CHECK(s_layer_u64(ours, "attention.head_count_kv", l) == kv,
			      "%s: layer %" PRIu64 " KV heads", what, l);
			n_shared += s_gemma4_shared(ours, l);
			snprintf(nm, sizeof(nm), "blk.%" PRIu64 ".attn_q.weight", l);
			k = ns_gguf_find_tensor(ours, nm);
			CHECK(k >= 0 && ours->tensors[k].ne[0] == E && ours->tensors[k].ne[1] == H * hd,
			      "%s: %s shape", what, nm);
			snprintf(nm, sizeof(nm), "blk.%" PRIu64 ".attn_k.weight", l);
			k = ns_gguf_find_tensor(ours, nm);
			CHECK(s_gemma4_shared(ours, l) ? k < 0
						       : k >= 0 && ours->tensors[k].ne[1] == kv * hd,
			      "%s: %s", what, nm);
			snprintf(nm, sizeof(nm), "blk.%" PRIu64 ".attn_v.weight", l);
			CHECK((ns_gguf_find_tensor(ours, nm) >= 0) ==
			      (!s_gemma4_shared(ours, l) && (swa || !s_real_gemma4[r].k_eq_v)),
			      "%s: %s present or not", what, nm);
		}
		/* a cut keeps the whole model's share of KV-shared layers (rounded down), but one
		 * period of six unshared layers before them (what a shared layer reads) */
		CHECK(n_shared == s_min_u64(layers * s_real_gemma4[r].shared / s_real_gemma4[r].L,
					    layers > 6 ? layers - 6 : 0),
		      "%s: %" PRIu64 " KV-shared layers of %u", what, n_shared, layers);
	}
	ns_gguf_close(&ours);
out:
	unlink(path);
	ns_gguf_close(&ref);
	fprintf(stderr, "checked %s (%u layers) against %s\n", what, layers, oracle);
}

/* --quant bf16 (a checkpoint converted as is, as the gemma-4-e4b BF16 file): every
 * matrix BF16, every 1-D tensor F32, llama.cpp's file type 32 (LLAMA_FTYPE_MOSTLY_BF16). */
static void s_case_bf16(const char *preset, uint32_t layers)
{
	char path[512], err[512];
	struct ns_gguf *g = NULL;
	uint64_t ft = 0;

	if (s_gen_opt(preset, "bf16", layers, true, 0, true, "b.gguf", path, sizeof(path)))
		return;
	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		CHECK(0, "%s/bf16: %s", preset, err);
	} else {
		CHECK(ns_gguf_get_u64(g, "general.file_type", &ft) && ft == 32,
		      "%s/bf16: file type %" PRIu64, preset, ft);
		for (uint64_t i = 0; i < g->n_tensors; i++)
			CHECK(g->tensors[i].type == (g->tensors[i].n_dims == 1 ? NS_TYPE_F32
									       : NS_TYPE_BF16),
			      "%s/bf16: %s is %s", preset, g->tensors[i].name.s,
			      ns_type_get(g->tensors[i].type)->name);
		ns_gguf_close(&g);
	}
	unlink(path);
	fprintf(stderr, "checked %s/bf16 (%u layers)\n", preset, layers);
}

/* A command's exit status, its stdout+stderr in out (NUL-terminated, truncated). */
static int s_sh(const char *cmd, char *out, size_t n)
{
	FILE *f = popen(cmd, "r");
	size_t got = 0;
	int st;

	out[0] = 0;
	if (!f)
		return -1;
	while (got + 1 < n) {
		size_t r = fread(out + got, 1, n - 1 - got, f);
		if (!r)
			break;
		got += r;
	}
	out[got] = 0;
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A layer-truncated preset (4 layers: three Gated DeltaNet, one full attention; the small
 * vocabulary and 8 experts of the test caps) through the engine: nsctl info says runnable,
 * run -n 4 decodes, logits writes finite logits of every position. */
static void s_engine_case(const char *nsctl, const char *preset, uint32_t layers,
			  const char *info_says)
{
	char path[512], lpath[600], cmd[2048], out[8192];
	FILE *f;
	int rc;

	if (s_gen(preset, NULL, layers, true, 0, "e.gguf", path, sizeof(path)))
		return;
	snprintf(cmd, sizeof(cmd), "'%s' info '%s' 2>&1", nsctl, path);
	rc = s_sh(cmd, out, sizeof(out));
	CHECK(rc == 0 && strstr(out, "runnable:       yes") && strstr(out, info_says),
	      "%s: nsctl info (exit %d): %.600s", preset, rc, out);
	snprintf(cmd, sizeof(cmd), "'%s' run '%s' -p 'hello there' -n 4 -s 7 --threads 1 "
		 "--mem-budget 64MB 2>&1", nsctl, path);
	rc = s_sh(cmd, out, sizeof(out));
	CHECK(rc == 0 && strstr(out, "decode 3 tok"), "%s: nsctl run -n 4 (exit %d): %.800s",
	      preset, rc, out);
	snprintf(lpath, sizeof(lpath), "%s.logits", path);
	snprintf(cmd, sizeof(cmd), "'%s' logits '%s' --tokens 300,301,302,303,304 -o '%s' "
		 "--mem-budget 64MB 2>&1", nsctl, path, lpath);
	rc = s_sh(cmd, out, sizeof(out));
	CHECK(rc == 0, "%s: nsctl logits (exit %d): %.800s", preset, rc, out);
	f = fopen(lpath, "rb");
	CHECK(f, "%s: no logits file", preset);
	if (f) {
		float v;
		uint64_t count = 0, bad = 0, nonzero = 0;

		while (fread(&v, 4, 1, f) == 1) {
			count++;
			bad += !isfinite(v);
			nonzero += v != 0.0f;
		}
		fclose(f);
		CHECK(count == 5ull * 4096 && !bad && nonzero > count / 2,
		      "%s: %" PRIu64 " logits (5 x 4096 expected), %" PRIu64 " not finite, %" PRIu64
		      " nonzero", preset, count, bad, nonzero);
	}
	unlink(lpath);
	unlink(path);
	fprintf(stderr, "ran %s (%u layers) through the engine\n", preset, layers);
}


/* ---- Qwen3-VL: the text model and the tower written beside it ---- */

/* The tower of both Qwen3-VL presets (vision_config, sources at s_presets in synth.c): depth,
 * hidden, intermediate, heads, patch, merge, position grid, deepstack_visual_indexes. */
static const struct {
	uint64_t depth, W, F, heads, P, merge, n_pos, ds[3];
} s_real_tower = { 27, 1152, 4304, 16, 16, 2, 2304, { 8, 16, 24 } };

/* A tower tensor's name with its block (v.blk.N., v.deepstack.N.) replaced by '#': *blk gets
 * N (-1 for a global). */
static void s_mm_norm(const char *name, char *out, size_t n, long *blk)
{
	static const char *const pre[] = { "v.blk.", "v.deepstack." };

	*blk = -1;
	for (size_t i = 0; i < 2; i++) {
		size_t k = strlen(pre[i]);
		char *end;

		if (strncmp(name, pre[i], k))
			continue;
		*blk = strtol(name + k, &end, 10);
		snprintf(out, n, "%s#%s", pre[i], end);
		return;
	}
	snprintf(out, n, "%s", name);
}

/* The shape a tower tensor must have, from the file's own keys (the same formulas on
 * llama.cpp's file and ours): W width, F ffn, M = W merge^2, O projection_dim. */
static bool s_mm_shape_ok(const struct ns_gguf *g, const struct ns_gguf_tensor *t)
{
	uint64_t W = 0, F = 0, O = 0, P = 0, mg = 0, M;
	const char *n = t->name.s;
	char norm[160];
	long blk;
	uint64_t want[4] = { 1, 1, 1, 1 };

	ns_gguf_get_u64(g, "clip.vision.embedding_length", &W);
	ns_gguf_get_u64(g, "clip.vision.feed_forward_length", &F);
	ns_gguf_get_u64(g, "clip.vision.projection_dim", &O);
	ns_gguf_get_u64(g, "clip.vision.patch_size", &P);
	ns_gguf_get_u64(g, "clip.vision.spatial_merge_size", &mg);
	M = W * mg * mg;
	s_mm_norm(n, norm, sizeof(norm), &blk);
#define IS(s) (!strcmp(norm, s))
#define W2(a, b) (want[0] = (a), want[1] = (b))
	if (IS("v.blk.#.attn_qkv.weight")) W2(W, 3 * W);
	else if (IS("v.blk.#.attn_qkv.bias")) W2(3 * W, 1);
	else if (IS("v.blk.#.attn_out.weight")) W2(W, W);
	else if (IS("v.blk.#.ffn_up.weight")) W2(W, F);
	else if (IS("v.blk.#.ffn_up.bias")) W2(F, 1);
	else if (IS("v.blk.#.ffn_down.weight")) W2(F, W);
	else if (strstr(norm, "v.blk.#.") || IS("v.post_ln.weight") || IS("v.post_ln.bias") ||
		 IS("v.patch_embd.bias")) W2(W, 1);
	else if (IS("v.deepstack.#.fc1.weight") || IS("mm.0.weight")) W2(M, M);
	else if (IS("v.deepstack.#.fc2.weight") || IS("mm.2.weight")) W2(M, O);
	else if (IS("v.deepstack.#.fc2.bias") || IS("mm.2.bias")) W2(O, 1);
	else if (strstr(norm, "v.deepstack.#.") || IS("mm.0.bias")) W2(M, 1);
	else if (IS("v.patch_embd.weight") || IS("v.patch_embd.weight.1"))
		want[0] = P, want[1] = P, want[2] = 3, want[3] = W;
	else if (IS("v.position_embd.weight")) {
		uint64_t side = 0;
		ns_gguf_get_u64(g, "clip.vision.image_size", &side);
		W2(W, (side / P) * (side / P));
	} else
		return false;
#undef IS
#undef W2
	return t->ne[0] == want[0] && t->ne[1] == want[1] && t->ne[2] == want[2] &&
	       t->ne[3] == want[3];
}

/* The DeepStack blocks an mmproj names in clip.vision.is_deepstack_layers. */
static uint32_t s_mm_deepstack(const struct ns_gguf *g, uint64_t *idx, uint32_t max)
{
	const struct ns_gguf_value *a = ns_gguf_get_arr(g, "clip.vision.is_deepstack_layers");
	uint32_t n = 0;

	for (uint64_t i = 0; a && a->v.arr.item_type == NS_GGUF_BOOL && i < a->v.arr.n; i++)
		if (((const uint8_t *)a->v.arr.items)[i] && n < max)
			idx[n++] = i;
	return n;
}

/* ours (an mmproj) against llama.cpp's (hf/qwen3_vl's conversion): the same keys and value
 * types, the same tensor names block for block, shapes by the formulas, types: exact (both
 * F32) or the F16 conversion's rules. */
static void s_check_mmproj(const struct ns_gguf *ours, const struct ns_gguf *ref, bool exact,
			   uint64_t text_embd, const char *what)
{
	uint64_t v = 0, ds[8], rds[8];
	uint32_t nds, nrds;

	/* the same keys both ways (llama.cpp's size label aside), of the same value types */
	for (uint64_t i = 0; i < ref->n_kv; i++) {
		const struct ns_gguf_kv *kv = &ref->kv[i], *o = ns_gguf_find(ours, kv->key.s);

		if (!strcmp(kv->key.s, "general.size_label"))
			continue;
		CHECK(o && o->value.type == kv->value.type, "%s: key %s missing or not %s", what,
		      kv->key.s, ns_gguf_vtype_name(kv->value.type));
	}
	for (uint64_t i = 0; i < ours->n_kv; i++)
		CHECK(ns_gguf_find(ref, ours->kv[i].key.s), "%s: extra key %s", what,
		      ours->kv[i].key.s);
	{
		uint64_t a = 9, b = 9;
		ns_gguf_get_u64(ours, "general.file_type", &a);
		ns_gguf_get_u64(ref, "general.file_type", &b);
		CHECK(a == (exact ? b : 1), "%s: mmproj general.file_type %" PRIu64, what, a);
	}
	for (uint64_t i = 0; i < ref->n_tensors; i++) /* the formulas hold for llama.cpp's file */
		CHECK(s_mm_shape_ok(ref, &ref->tensors[i]), "oracle mmproj: %s has no formula",
		      ref->tensors[i].name.s);
	nds = s_mm_deepstack(ours, ds, 8);
	nrds = s_mm_deepstack(ref, rds, 8);
	for (uint64_t i = 0; i < ours->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &ours->tensors[i];
		char norm[160], rname[160];
		long blk;
		int64_t k;
		bool listed = false;

		CHECK(s_mm_shape_ok(ours, t), "%s: %s has shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64
		      ", %" PRIu64 "]", what, t->name.s, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
		s_mm_norm(t->name.s, norm, sizeof(norm), &blk);
		/* its counterpart in llama.cpp's file: block 0, or its first DeepStack block */
		snprintf(rname, sizeof(rname), "%s", norm);
		if (blk >= 0) {
			char *hash = strchr(rname, '#');
			char tail[160];

			snprintf(tail, sizeof(tail), "%s", hash + 1);
			snprintf(hash, sizeof(rname) - (size_t)(hash - rname), "%" PRIu64 "%s",
				 strstr(norm, "deepstack") ? rds[0] : 0, tail);
		}
		k = ns_gguf_find_tensor(ref, rname);
		CHECK(k >= 0, "%s: %s has no counterpart in llama.cpp's mmproj", what, t->name.s);
		if (k < 0)
			continue;
		if (exact)
			CHECK(t->type == ref->tensors[k].type, "%s: %s is %s, llama.cpp's %s", what,
			      t->name.s, ns_type_get(t->type)->name,
			      ns_type_get(ref->tensors[k].type)->name);
		else
			CHECK(t->type == (t->n_dims == 1 || strstr(norm, "position_embd") ?
					  NS_TYPE_F32 : NS_TYPE_F16),
			      "%s: %s is %s (F16 conversion: 1-D and the position grid F32, the rest "
			      "F16)", what, t->name.s, ns_type_get(t->type)->name);
		for (uint32_t d = 0; d < nds; d++)
			listed |= (uint64_t)blk == ds[d];
		if (strstr(norm, "deepstack"))
			CHECK(listed, "%s: %s is not a DeepStack block", what, t->name.s);
	}
	/* every tensor of llama.cpp's file, for every block and DeepStack block of ours */
	for (uint64_t i = 0; i < ref->n_tensors; i++) {
		char norm[160], name[160];
		long blk;
		uint64_t n;
		bool ds_t;

		s_mm_norm(ref->tensors[i].name.s, norm, sizeof(norm), &blk);
		if (blk > 0 || (blk >= 0 && strstr(norm, "deepstack") && (uint64_t)blk != rds[0]))
			continue;
		ds_t = strstr(norm, "deepstack") != NULL;
		ns_gguf_get_u64(ours, "clip.vision.block_count", &n);
		for (uint64_t b = 0; b < (blk < 0 ? 1 : ds_t ? nds : n); b++) {
			char *hash;

			snprintf(name, sizeof(name), "%s", norm);
			if ((hash = strchr(name, '#'))) {
				char tail[160];

				snprintf(tail, sizeof(tail), "%s", hash + 1);
				snprintf(hash, sizeof(name) - (size_t)(hash - name), "%" PRIu64 "%s",
					 ds_t ? ds[b] : b, tail);
			}
			CHECK(ns_gguf_find_tensor(ours, name) >= 0, "%s: %s missing", what, name);
		}
	}
	CHECK(nrds >= 1, "oracle mmproj: no DeepStack layer");
	CHECK(ns_gguf_get_u64(ours, "clip.vision.projection_dim", &v) && v == text_embd,
	      "%s: projection_dim %" PRIu64 ", the text model's n_embd %" PRIu64, what, v,
	      text_embd);
	{
		const char *pt = ns_gguf_get_str(ours, "clip.projector_type");
		CHECK(pt && !strcmp(pt, "qwen3vl_merger"), "%s: projector_type %s", what,
		      pt ? pt : "(none)");
	}
}

/* The published dimensions of the whole tower (ours uncut). */
static void s_check_real_tower(const struct ns_gguf *g, const char *what)
{
	uint64_t W = 0, F = 0, L = 0, H = 0, P = 0, mg = 0, side = 0, ds[8];
	uint32_t nds = s_mm_deepstack(g, ds, 8);
	int64_t pos = ns_gguf_find_tensor(g, "v.position_embd.weight");

	ns_gguf_get_u64(g, "clip.vision.embedding_length", &W);
	ns_gguf_get_u64(g, "clip.vision.feed_forward_length", &F);
	ns_gguf_get_u64(g, "clip.vision.block_count", &L);
	ns_gguf_get_u64(g, "clip.vision.attention.head_count", &H);
	ns_gguf_get_u64(g, "clip.vision.patch_size", &P);
	ns_gguf_get_u64(g, "clip.vision.spatial_merge_size", &mg);
	ns_gguf_get_u64(g, "clip.vision.image_size", &side);
	CHECK(W == s_real_tower.W && F == s_real_tower.F && L == s_real_tower.depth &&
	      H == s_real_tower.heads && P == s_real_tower.P && mg == s_real_tower.merge,
	      "%s: tower dims %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 " differ from the "
	      "published ones", what, W, F, L, H);
	CHECK(pos >= 0 && g->tensors[pos].ne[1] == s_real_tower.n_pos && side == 768,
	      "%s: position grid of %" PRIu64 " (image_size %" PRIu64 ")", what,
	      pos >= 0 ? g->tensors[pos].ne[1] : 0, side);
	CHECK(nds == 3 && ds[0] == s_real_tower.ds[0] && ds[1] == s_real_tower.ds[1] &&
	      ds[2] == s_real_tower.ds[2], "%s: DeepStack blocks differ from [8, 16, 24]", what);
}

/* A Qwen3-VL preset's two files from their headers (the data left holes): the text model
 * against llama.cpp's (hf/qwen3_vl's conversion, dense; tiny-qwen3vlmoe, MoE) - keys, names,
 * types, shapes, the published dimensions, M-RoPE sections and DeepStack count - and the
 * mmproj beside it against hf/qwen3_vl's mmproj, in F32 (types exact) and in the preset's
 * default (an F16 tower), the whole tower and a cut of 4 blocks. */
static void s_case_vl(const char *preset, bool moe)
{
	char path[512], mpath[600], opath[512], err[512], what[160];
	struct ns_gguf *ours = NULL, *ref = NULL, *mref = NULL, *mm = NULL;
	const char *quants[] = { "f32", NULL };

	ns_test_oracle_path(opath, sizeof(opath), moe ? "tiny/tiny-qwen3vlmoe-Q4_K_M.gguf" :
			    "hf/qwen3_vl/gguf/qwen3_vl-f32.gguf");
	if (ns_gguf_open(opath, &ref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		return;
	}
	ns_test_oracle_path(opath, sizeof(opath), "hf/qwen3_vl/gguf/mmproj-qwen3_vl-f32.gguf");
	if (ns_gguf_open(opath, &mref, err, sizeof(err))) {
		CHECK(0, "oracle: %s", err);
		ns_gguf_close(&ref);
		return;
	}
	for (size_t q = 0; q < 2; q++) {
		for (uint32_t cut = 0; cut <= 4; cut += 4) {
			struct ns_synth_opts o = { .preset = preset, .layers = 2, .seed = 3,
						   .no_data = true, .max_vocab = 4096,
						   .max_experts = 8, .max_vision_layers = cut };
			/* the text model against the oracle of its own mix: f32 (dense), the
			 * default (MoE) */
			bool text_vs_ref = cut == 0 && (moe ? !quants[q] : quants[q] != NULL);
			uint64_t E = 0, d[4] = { 0 };
			const struct ns_gguf_value *sec;
			char key[96];

			snprintf(what, sizeof(what), "%s/%s%s", preset, quants[q] ? quants[q] : "default",
				 cut ? " (tower cut to 4 blocks)" : "");
			if (quants[q]) {
				o.quant_set = true;
				ns_synth_parse_quant(quants[q], &o.quant);
			}
			snprintf(path, sizeof(path), "%s/vl.gguf", s_dir);
			snprintf(mpath, sizeof(mpath), "%s/mmproj-vl.gguf", s_dir);
			if (ns_synth_write(&o, path, err, sizeof(err))) {
				CHECK(0, "%s: %s", what, err);
				continue;
			}
			CHECK(ns_synth_tower_path(preset, path, opath, sizeof(opath)) == 1 &&
			      !strcmp(opath, mpath), "%s: the tower's path is %s", what, opath);
			if (ns_gguf_open(path, &ours, err, sizeof(err)) ||
			    ns_gguf_open(mpath, &mm, err, sizeof(err))) {
				CHECK(0, "%s: %s", what, err);
			} else {
				struct dims dd;

				s_dims(ours, &dd);
				s_check_shapes(ours, what);
				s_check_layout(ours, true, what);
				s_check_layout(mm, false, what);
				s_check_real(ours, preset, 2, false, what);
				if (text_vs_ref) {
					s_check_meta(ours, ref, what, moe ? "qwen3vlmoe.rope.dimension_count"
									 : "general.size_label");
					s_check_names_types(ours, ref, moe ? TYPES_KQUANT : TYPES_EXACT,
							    what);
				}
				snprintf(key, sizeof(key), "%s.rope.dimension_sections", dd.arch);
				sec = ns_gguf_get_arr(ours, key);
				for (int i = 0; sec && sec->v.arr.item_type == NS_GGUF_I32 && i < 4 &&
						(uint64_t)i < sec->v.arr.n; i++)
					d[i] = (uint64_t)((const int32_t *)sec->v.arr.items)[i];
				CHECK(d[0] == 24 && d[1] == 20 && d[2] == 20 && d[3] == 0,
				      "%s: rope.dimension_sections [%" PRIu64 ", %" PRIu64 ", %" PRIu64
				      ", %" PRIu64 "], the published [24, 20, 20]", what, d[0], d[1],
				      d[2], d[3]);
				CHECK(s_u(ours, dd.arch, "n_deepstack_layers", 0) == 3 &&
				      s_u(ours, dd.arch, "context_length", 0) == 262144,
				      "%s: n_deepstack_layers / context_length", what);
				E = dd.E;
				s_check_mmproj(mm, mref, quants[q] != NULL, E, what);
				if (!cut)
					s_check_real_tower(mm, what);
			}
			ns_gguf_close(&ours);
			ns_gguf_close(&mm);
			unlink(path);
			unlink(mpath);
		}
	}
	ns_gguf_close(&ref);
	ns_gguf_close(&mref);
	fprintf(stderr, "checked %s and its mmproj against llama.cpp's conversions\n", preset);
}

/* A cut of a Qwen3-VL preset (one text layer, a 3-block tower, the test caps on vocabulary and
 * experts) through the engine with an image: nsctl run finds the tower beside the model,
 * turns a 64x64 PNG into 4 tokens and decodes. */
static void s_vl_engine_case(const char *nsctl, const char *preset, const char *quant)
{
	struct ns_synth_opts o = { .preset = preset, .layers = 1, .seed = 5, .max_vocab = 4096,
				   .max_experts = 8, .max_vision_layers = 3 };
	char path[512], mpath[600], png[600], cmd[3072], out[16384], err[512], want[700];
	uint8_t rgb[64 * 64 * 3];
	int rc;

	if (quant) {
		o.quant_set = true;
		ns_synth_parse_quant(quant, &o.quant);
	}
	snprintf(path, sizeof(path), "%s/vle.gguf", s_dir);
	snprintf(mpath, sizeof(mpath), "%s/mmproj-vle.gguf", s_dir);
	snprintf(png, sizeof(png), "%s/vle.png", s_dir);
	for (size_t i = 0; i < sizeof(rgb); i++)
		rgb[i] = (uint8_t)(i * 7 + i / 192);
	vt_write_png(png, rgb, 64, 64, NULL, 0);
	if (ns_synth_write(&o, path, err, sizeof(err))) {
		CHECK(0, "%s: %s", preset, err);
		unlink(png);
		return;
	}
	snprintf(cmd, sizeof(cmd), "'%s' run '%s' --image '%s' --min-pixels 4096 -p 'what is it' "
		 "-n 2 -s 7 --threads 1 --mem-budget 64MB --stall-timeout 120 --json 2>&1", nsctl,
		 path, png);
	rc = s_sh(cmd, out, sizeof(out));
	snprintf(want, sizeof(want), "vision tower %s (found beside the model", mpath);
	CHECK(rc == 0 && strstr(out, want) && strstr(out, "\"images\":{\"image_tokens\":4,"),
	      "%s: nsctl run --image (exit %d): %.1500s", preset, rc, out);
	unlink(path);
	unlink(mpath);
	unlink(png);
	fprintf(stderr, "ran %s (1 layer, a 3-block tower, %s) with an image through the engine\n",
		preset, quant ? quant : "default mix");
}

int main(int argc, char **argv)
{
	const char *root = getenv("NS_BUILD_ROOT");

	ns_test_require_oracle();
	snprintf(s_dir, sizeof(s_dir), "%s/synth-presets-XXXXXX", root && *root ? root : "/tmp");
	if (!mkdtemp(s_dir)) {
		perror("mkdtemp");
		return 1;
	}
	s_case("llama-8b", NULL, "tiny-llama-Q4_K_M.gguf", TYPES_EXACT);
	s_case("llama-8b", "q8_0", "tiny-llama-Q8_0.gguf", TYPES_EXACT);
	s_case("qwen3-8b", NULL, "tiny-qwen3-Q4_K_M.gguf", TYPES_EXACT);
	s_case("qwen3-8b", "q8_0", "tiny-qwen3-Q8_0.gguf", TYPES_EXACT);
	s_case("qwen3-30b-a3b", NULL, "tiny-qwen3moe-Q4_K_M.gguf", TYPES_KQUANT);
	s_case("qwen3-235b-a22b", NULL, "tiny-qwen3moe-Q4_K_M.gguf", TYPES_KQUANT);
	s_case("gpt-oss-120b", NULL, "tiny-gpt-oss-MXFP4_MOE.gguf", TYPES_EXACT);
	s_case_qwen35("qwen3.5-4b", "tiny-qwen35-Q4_K_M.gguf", false);
	s_case_qwen35("qwen3.5-35b-a3b", "tiny-qwen35moe-Q4_K_M.gguf", true);
	s_case_qwen35("qwen3.5-397b-a17b", "tiny-qwen35moe-Q4_K_M.gguf", true);
	s_case_mtp("qwen3.5-4b", 32, 2560, 2 * 16 * 256, 4 * 256, false);
	s_case_mtp("qwen3.5-397b-a17b", 60, 4096, 2 * 32 * 256, 2 * 256, true);
	s_case_gemma4("gemma-4-31b", "tiny/tiny-gemma4-Q4_K_M.gguf", 6);
	s_case_gemma4("gemma-4-31b", "tiny/tiny-gemma4-Q4_K_M.gguf", 60);
	s_case_gemma4("gemma-4-e4b", "hf/gemma4_e/gguf/gemma4_e-f32.gguf", 6);
	s_case_gemma4("gemma-4-e4b", "hf/gemma4_e/gguf/gemma4_e-f32.gguf", 12);
	s_case_gemma4("gemma-4-e4b", "hf/gemma4_e/gguf/gemma4_e-f32.gguf", 42);
	s_case_gemma4("gemma-4-26b-a4b", "tiny/tiny-gemma4-Q4_K_M.gguf", 6);
	s_case_gemma4("gemma-4-26b-a4b", "tiny/tiny-gemma4-Q4_K_M.gguf", 30);
	s_case_bf16("gemma-4-e4b", 12);
	s_case_bf16("llama-8b", 2);
	s_case_vl("qwen3-vl-8b", false);
	s_case_vl("qwen3-vl-30b-a3b", true);
	if (argc > 1) {
		s_engine_case(argv[1], "qwen3.5-4b", 4, "recurrent:");
		s_engine_case(argv[1], "qwen3.5-35b-a3b", 4, "recurrent:");
		/* 12 layers: two periods, the last five on the first period's K/V */
		s_engine_case(argv[1], "gemma-4-e4b", 12, "sliding window: 512");
		/* one period (five sliding, one global), every layer MoE, 8 of the experts */
		s_engine_case(argv[1], "gemma-4-26b-a4b", 6, "experts:        8, 8 active");
		/* a Q8_0 tower (a q8_0 conversion) and the F16 one beside the default mix */
		s_vl_engine_case(argv[1], "qwen3-vl-8b", "q8_0");
		s_vl_engine_case(argv[1], "qwen3-vl-30b-a3b", NULL);
	} else {
		CHECK(0, "usage: test_synth_presets NSCTL (the engine runs are part of the test)");
	}
	s_split_case();
	s_split_counts_case();
	s_full_vocab_case();
	rmdir(s_dir);
	if (s_fail)
		fprintf(stderr, "%d checks failed\n", s_fail);
	return s_fail ? 1 : 0;
}
