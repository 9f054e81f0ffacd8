/* test_arch - the architecture table (modelfile/arch.h) on its own and against files.
 *
 *  1. The table is consistent: valid slots, roles, needs and shapes; no slot twice in an
 *     entry; global reads only before or after the layers; flags that agree with the reads
 *     (qk-norm, MoE and router, sinks, recurrent layers, per-layer tables, shared experts);
 *     a builder exactly where a backend is named.
 *  2. Every model GGUF of the oracle binds to its entry with every tensor read (none left
 *     UNUSED), ns_arch_role agrees with the steps, the check says runnable for the computed
 *     architectures and "described but not computed yet" for the others, and the layer
 *     kinds are the ones the oracle's READMEs state (gpt-oss, gemma3, gemma4, qwen35).
 *  3. Files that contradict the table, made from oracle files with one edit: a missing
 *     tensor, a wrong shape, a tensor at a layer whose kind does not read it, a block count
 *     larger than the file, an unknown tensor (unused, not refused), an unknown
 *     architecture (described by shapes).
 * Exits 0 pass, 1 fail, 77 skip (no oracle outside CI). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "gguf_write.h"
#include "ns_test.h"
#include "ns_util.h"

static int s_fails;

#define EXPECT(cond, ...) NS_EXPECT(s_fails, cond, __VA_ARGS__)

/* ---------------------------------------------------------------- 1. the table --------- */

static bool s_has(const struct ns_arch *a, unsigned slot, unsigned role, bool required)
{
	for (uint32_t k = 0; k < a->n_reads; k++)
		if (a->reads[k].slot == slot && a->reads[k].role == role &&
		    (!required || a->reads[k].need == NS_NEED_REQUIRED))
			return true;
	return false;
}

static bool s_has_role(const struct ns_arch *a, unsigned role)
{
	for (uint32_t k = 0; k < a->n_reads; k++)
		if (a->reads[k].role == role)
			return true;
	return false;
}

static void s_check_entry(const struct ns_arch *a)
{
	bool seen[NS_SLOT_COUNT] = { false }, layers_seen = false, layers_done = false;
	const uint32_t f = a->flags;

	EXPECT(a->name && a->name[0] && a->rules && a->reads && a->n_reads, "%s: empty entry",
	       a->name);
	EXPECT((a->builder == NS_BUILD_NONE) == (a->backends == 0), "%s: builder %u, backends "
	       "0x%x", a->name, a->builder, a->backends);
	for (uint32_t k = 0; k < a->n_reads; k++) {
		const struct ns_arch_read *r = &a->reads[k];
		const struct ns_slot_info *si = ns_slot_info(r->slot);
		uint32_t nd = 0;

		EXPECT(si != NULL, "%s: read %u: slot %u", a->name, k, r->slot);
		if (!si)
			continue;
		EXPECT(!seen[r->slot], "%s: %s read twice", a->name, si->name);
		seen[r->slot] = true;
		EXPECT(r->role == NS_ROLE_HELD || r->role == NS_ROLE_MATRIX ||
		       r->role == NS_ROLE_EXPERT || r->role == NS_ROLE_ROWS,
		       "%s: %s: role %u", a->name, si->name, r->role);
		EXPECT(r->need <= NS_NEED_OR_EMBD, "%s: %s: need %u", a->name, si->name, r->need);
		EXPECT(r->need != NS_NEED_OR_EMBD || r->slot == NS_T_OUTPUT, "%s: %s stands in "
		       "for the embedding", a->name, si->name);
		while (nd < NS_GGUF_MAX_DIMS && r->dims[nd] != NS_DIM_END)
			nd++;
		for (uint32_t i = 0; i < NS_GGUF_MAX_DIMS; i++)
			EXPECT(i < nd ? r->dims[i] > NS_DIM_END && r->dims[i] < NS_DIM_COUNT :
			       r->dims[i] == NS_DIM_END, "%s: %s: dims", a->name, si->name);
		EXPECT(nd >= 1 && (r->role != NS_ROLE_MATRIX || nd == 2) &&
		       (r->role != NS_ROLE_ROWS || nd == 2) &&
		       (r->role != NS_ROLE_EXPERT || (nd == 3 && r->dims[2] == NS_DIM_EXPERT)),
		       "%s: %s: %u dims for its role", a->name, si->name, nd);
		/* global reads come before the first per-layer read or after the last */
		if (si->per_layer) {
			EXPECT(!layers_done, "%s: %s after a global read that follows the layers",
			       a->name, si->name);
			layers_seen = true;
		} else if (layers_seen) {
			layers_done = true;
		}
	}
	EXPECT(a->reads[0].slot == NS_T_TOKEN_EMBD && a->reads[0].role == NS_ROLE_ROWS,
	       "%s: the token embedding is not read first", a->name);
	EXPECT(a->reads[a->n_reads - 1].slot == NS_T_OUTPUT, "%s: the head is not read last",
	       a->name);
	EXPECT(!!(f & NS_ARCH_QK_NORM) == s_has(a, NS_T_ATTN_Q_NORM, NS_ROLE_HELD, true),
	       "%s: qk-norm flag and reads disagree", a->name);
	EXPECT(!!(f & NS_ARCH_MOE) == s_has_role(a, NS_ROLE_EXPERT) &&
	       !!(f & NS_ARCH_MOE) == (a->router != NS_ROUTER_NONE),
	       "%s: MoE flag, expert reads and router disagree", a->name);
	EXPECT(!!(f & NS_ARCH_SINKS) == s_has(a, NS_T_ATTN_SINKS, NS_ROLE_HELD, true),
	       "%s: sinks flag and reads disagree", a->name);
	EXPECT(!!(f & NS_ARCH_RECURRENT) == s_has(a, NS_T_SSM_OUT, NS_ROLE_MATRIX, true),
	       "%s: recurrent flag and reads disagree", a->name);
	EXPECT(!!(f & NS_ARCH_PER_LAYER_EMBD) ==
	       s_has(a, NS_T_PER_LAYER_TOKEN_EMBD, NS_ROLE_ROWS, true) ||
	       !strcmp(a->name, "gemma3"), /* gemma3 shares gemma4's reads, without the inputs */
	       "%s: per-layer embedding flag and reads disagree", a->name);
	EXPECT(!!(f & NS_ARCH_SHARED_EXPERT) ==
	       s_has(a, NS_T_FFN_GATE_SHEXP, NS_ROLE_MATRIX, true),
	       "%s: shared-expert flag and reads disagree", a->name);
	EXPECT(!(f & NS_ARCH_SWA) || a->swa_period || a->rules == ns_arch_find("gemma4")->rules,
	       "%s: sliding windows without a rule for them", a->name);
}

static void s_table(void)
{
	char list[256];
	size_t n = 0;

	for (const struct ns_arch *a; (a = ns_arch_at(n)); n++) {
		s_check_entry(a);
		EXPECT(ns_arch_find(a->name) == a, "%s: found elsewhere", a->name);
	}
	EXPECT(n >= 10, "%zu architectures", n);
	EXPECT(ns_arch_find("nope") == NULL && ns_arch_find(NULL) == NULL, "find");
	ns_arch_computed_list(NS_BACKEND_CPU, list, sizeof(list));
	EXPECT(!strcmp(list, "llama, qwen3, qwen3moe, gpt-oss, qwen35, qwen35moe, gemma3, gemma4, "
			     "qwen3vl, qwen3vlmoe"),
	       "computed: %s", list);
	ns_arch_computed_list(NS_BACKEND_CUDA, list, sizeof(list));
	EXPECT(!strcmp(list, "llama, qwen3, qwen3moe, gpt-oss, qwen35, qwen35moe, gemma3, gemma4, "
			     "qwen3vl, qwen3vlmoe"),
	       "computed by cuda: %s", list);
	for (unsigned s = 0; s < NS_SLOT_COUNT; s++)
		for (unsigned t = s + 1; t < NS_SLOT_COUNT; t++)
			EXPECT(strcmp(ns_slot_info(s)->name, ns_slot_info(t)->name) ||
			       ns_slot_info(s)->per_layer != ns_slot_info(t)->per_layer,
			       "slots %u and %u have one name", s, t);
	EXPECT(ns_slot_info(NS_SLOT_COUNT) == NULL, "slot past the end");
}

/* ---------------------------------------------------------------- 2. oracle files ------ */

static const char *const s_files[] = {
	"models/stories260K.gguf", "models/stories260K-Q8_0.gguf",
	"models/synth-llama-k256-Q4_K_M.gguf", "tiny/tiny-llama-F32.gguf",
	"tiny/tiny-llama-Q4_K_M.gguf", "tiny/tiny-qwen3-F32.gguf", "tiny/tiny-qwen3-BF16.gguf",
	"tiny/tiny-qwen3moe-F32.gguf", "tiny/tiny-qwen3moe-Q4_K_M.gguf",
	"tiny/tiny-gpt-oss-F32.gguf", "tiny/tiny-gpt-oss-MXFP4_MOE.gguf",
	"tiny/split/tiny-qwen3-F32-00001-of-00003.gguf",
	"tiny/tiny-gemma3-F32.gguf", "tiny/tiny-gemma3-Q4_K_M.gguf", "tiny/tiny-gemma4-F32.gguf",
	"tiny/tiny-gemma4-Q4_K_M.gguf", "tiny/tiny-qwen35-F32.gguf",
	"tiny/tiny-qwen35-Q4_K_M.gguf", "tiny/tiny-qwen35moe-F32.gguf",
	"tiny/tiny-qwen35moe-Q8_0.gguf", "tiny/tiny-qwen3vlmoe-F32.gguf",
	"hf/qwen3_5/gguf/qwen3_5-f32.gguf", "hf/gemma4_e/gguf/gemma4_e-f32.gguf",
	"hf/qwen3_vl/gguf/qwen3_vl-f32.gguf",
};

/* Layer kinds as the oracle's READMEs state them (tiny/README.md, hf/README.md). */
static void s_kinds(const char *rel, const struct ns_arch_model *am)
{
	const struct ns_arch_layer *y = am->layer;

	if (strstr(rel, "tiny-gpt-oss")) /* layer 0 sliding (window 8), 1 full */
		EXPECT(y[0].window == 8 && (y[0].kinds & NS_LAYER_SWA) && !y[1].window &&
		       (y[0].kinds & NS_LAYER_MOE), "%s: layer kinds", rel);
	if (strstr(rel, "tiny-gemma3")) /* layers 0-4 sliding, 5 full */
		for (uint32_t l = 0; l < am->n_layer; l++)
			EXPECT(!!(y[l].kinds & NS_LAYER_SWA) == (l < 5), "%s: layer %u", rel, l);
	if (strstr(rel, "tiny-gemma4")) /* 0, 1 sliding (head 64, 2 kv), 2 full (128, 1 kv) */
		EXPECT(y[0].dim[NS_DIM_DK] == 64 && y[0].dim[NS_DIM_HEAD_KV] == 2 &&
		       (y[1].kinds & NS_LAYER_SWA) && y[2].dim[NS_DIM_DK] == 128 &&
		       y[2].dim[NS_DIM_HEAD_KV] == 1 && !(y[2].kinds & NS_LAYER_SWA),
		       "%s: layer geometry", rel);
	if (strstr(rel, "gemma4_e")) /* per-layer inputs; the last 2 layers share K/V */
		EXPECT((am->kinds & NS_LAYER_PLE) && !(y[1].kinds & NS_LAYER_KV_SHARED) &&
		       (y[2].kinds & NS_LAYER_KV_SHARED) && (y[3].kinds & NS_LAYER_KV_SHARED),
		       "%s: layer kinds", rel);
	if (strstr(rel, "qwen35") || strstr(rel, "qwen3_5")) /* 0-2 DeltaNet, 3 attention */
		for (uint32_t l = 0; l < am->n_layer; l++)
			EXPECT(!!(y[l].kinds & NS_LAYER_RECURRENT) == (l % 4 != 3) &&
			       !!(y[l].kinds & NS_LAYER_ATTN) == (l % 4 == 3), "%s: layer %u",
			       rel, l);
}

static void s_file(const char *rel)
{
	struct ns_model *m = NULL;
	struct ns_arch_model *am = NULL;
	char path[2048], err[NS_ERR_LEN];
	unsigned *roles;
	int rc;

	if (ns_model_open(ns_test_oracle_path(path, sizeof(path), rel), &m, err, sizeof(err))) {
		EXPECT(0, "%s: %s", rel, err);
		return;
	}
	rc = ns_arch_bind(m, &am, err, sizeof(err));
	EXPECT(rc == 0, "%s: %s", rel, err);
	roles = calloc(m->n_tensors, sizeof(*roles));
	if (rc == 0 && roles) {
		/* the steps' roles, a tensor read as rows and as a matrix both */
		for (uint64_t i = 0; i < am->n_steps; i++)
			roles[am->steps[i].tensor] |= 1u << am->steps[i].role;
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			const unsigned want = roles[i] == (1u << NS_ROLE_ROWS | 1u << NS_ROLE_MATRIX) ?
					      NS_ROLE_ROWS_MATRIX : roles[i] ?
					      (unsigned)__builtin_ctz(roles[i]) : NS_ROLE_UNUSED;
			const enum ns_role got = ns_arch_role(&am->hp, &m->tensors[i]);

			EXPECT(roles[i] != 0, "%s: %s is read by no step", rel, m->tensors[i].name);
			EXPECT(got == want, "%s: %s: role %s, the steps say %s", rel,
			       m->tensors[i].name, ns_role_name(got), ns_role_name(want));
		}
		s_kinds(rel, am);
		rc = ns_arch_check(m, NS_BACKEND_CPU, err, sizeof(err));
		if (am->arch->builder != NS_BUILD_NONE) {
			EXPECT(rc == 0, "%s: check: %s", rel, err);
			/* a cpu-only architecture: the cuda pass refuses it with one line */
			rc = ns_arch_check(m, NS_BACKEND_CUDA, err, sizeof(err));
			EXPECT((am->arch->backends & NS_BACKEND_CUDA) ? rc == 0 :
			       rc == -EINVAL && strstr(err, "cpu backend only") &&
			       !strchr(err, '\n'), "%s: cuda check: %d %s", rel, rc, err);
		} else {
			char want[96];

			snprintf(want, sizeof(want), "'%s' is described but not computed yet",
				 am->arch->name);
			EXPECT(rc == -EINVAL && strstr(err, want), "%s: check: %d %s", rel, rc, err);
			EXPECT(ns_arch_check_described(m, err, sizeof(err)) == 0, "%s: %s", rel,
			       err);
		}
	}
	free(roles);
	ns_arch_model_free(&am);
	ns_model_close(&m);
}

/* ---------------------------------------------------------------- 3. edited files ------ */

static int s_zeros(void *ctx, uint64_t off, void *dst, size_t n)
{
	(void)ctx, (void)off;
	memset(dst, 0, n);
	return 0;
}

struct s_edit {
	const char *drop;      /* a tensor left out, or NULL */
	const char *add;       /* a tensor added (F32 zeros), or NULL */
	uint64_t add_ne[2];
	const char *reshape;   /* a tensor given add_ne instead */
	const char *key;       /* a u32 key set (added when the file lacks it), or NULL */
	uint32_t key_value;
	const char *arch;      /* general.architecture replaced, or NULL */
};

/* A copy of an oracle file's metadata and tensor table (zeros as data) with one edit. */
static int s_variant(const char *rel, const struct s_edit *e, const char *out)
{
	struct ns_gguf_writer *w = ns_gguf_writer_new(32);
	struct ns_model *m = NULL;
	const struct ns_gguf *g;
	char path[2048], err[NS_ERR_LEN];
	bool key_set = false;
	int rc = -ENOMEM;

	if (!w || ns_model_open(ns_test_oracle_path(path, sizeof(path), rel), &m, err,
				sizeof(err)))
		goto out;
	g = ns_model_meta(m);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct ns_gguf_kv *kv = &g->kv[i];

		const bool edit_key = e->key && !strcmp(kv->key.s, e->key);

		key_set |= edit_key;
		if (!strcmp(kv->key.s, "general.architecture") && e->arch)
			rc = ns_gguf_writer_set_str(w, kv->key.s, e->arch);
		else if (edit_key)
			rc = ns_gguf_writer_set_u32(w, kv->key.s, e->key_value);
		else
			rc = ns_gguf_writer_set_value(w, kv->key.s, &kv->value);
		if (rc)
			goto out;
	}
	if (e->key && !key_set && (rc = ns_gguf_writer_set_u32(w, e->key, e->key_value)))
		goto out;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const bool reshape = e->reshape && !strcmp(t->name, e->reshape);

		if (e->drop && !strcmp(t->name, e->drop))
			continue;
		rc = ns_gguf_writer_add_tensor_lazy(w, t->name, t->type, reshape ? 2 : t->n_dims,
						    reshape ? e->add_ne : t->ne, s_zeros, NULL);
		if (rc)
			goto out;
	}
	if (e->add && (rc = ns_gguf_writer_add_tensor_lazy(w, e->add, 0, 2, e->add_ne, s_zeros,
							    NULL)))
		goto out;
	rc = ns_gguf_writer_write_file(w, out, err, sizeof(err));
out:
	if (rc)
		fprintf(stderr, "variant of %s: %d %s\n", rel, rc, err);
	ns_gguf_writer_destroy(&w);
	ns_model_close(&m);
	return rc;
}

/* Bind the variant: want NULL for success, else a substring of the one line. */
static void s_edited(const char *rel, const struct s_edit *e, const char *want, const char *tmp)
{
	struct ns_model *m = NULL;
	struct ns_arch_model *am = NULL;
	char err[NS_ERR_LEN] = "";
	int rc;

	if (s_variant(rel, e, tmp)) {
		EXPECT(0, "%s: cannot write the variant", rel);
		return;
	}
	if (ns_model_open(tmp, &m, err, sizeof(err))) {
		EXPECT(0, "%s: %s", tmp, err);
		return;
	}
	rc = ns_arch_bind(m, &am, err, sizeof(err));
	if (!want)
		EXPECT(rc == 0, "%s (edited): %s", rel, err);
	else
		EXPECT(rc == -EINVAL && strstr(err, want) && !strchr(err, '\n'),
		       "%s (edited): %d '%s', want '%s'", rel, rc, err, want);
	if (rc == 0 && e->add) { /* an unknown tensor: read by nobody, placed by nobody */
		const struct ns_model_tensor *t = ns_model_find(m, e->add);

		EXPECT(t && ns_arch_role(&am->hp, t) == NS_ROLE_UNUSED, "%s: %s not unused", rel,
		       e->add);
	}
	ns_arch_model_free(&am);
	ns_model_close(&m);
	unlink(tmp);
}

static void s_edits(void)
{
	const char *root = getenv("NS_BUILD_ROOT");
	char tmp[1024];

	snprintf(tmp, sizeof(tmp), "%s/tests/model/arch-edit-%d.gguf", root && *root ? root : ".",
		 (int)getpid());
	s_edited("tiny/tiny-qwen3-F32.gguf", &(struct s_edit){ .drop = "blk.1.attn_k_norm.weight" },
		 "tensor blk.1.attn_k_norm.weight is missing", tmp);
	s_edited("tiny/tiny-qwen3-F32.gguf",
		 &(struct s_edit){ .reshape = "blk.0.ffn_down.weight", .add_ne = { 512, 128 } },
		 "blk.0.ffn_down.weight has shape [512, 128], expected [512, 256]", tmp);
	/* a DeltaNet layer (qwen35 layer 0) reads no attn_q */
	s_edited("tiny/tiny-qwen35-F32.gguf",
		 &(struct s_edit){ .add = "blk.0.attn_q.weight", .add_ne = { 256, 512 } },
		 "blk.0.attn_q.weight is in the file, but this layer of qwen35", tmp);
	s_edited("tiny/tiny-qwen3-F32.gguf",
		 &(struct s_edit){ .key = "qwen3.block_count", .key_value = 1000000 },
		 "block_count 1000000 exceeds the file's 24 tensors", tmp);
	s_edited("tiny/tiny-qwen3-F32.gguf",
		 &(struct s_edit){ .key = "qwen3.block_count", .key_value = 3 },
		 "tensor blk.2.attn_norm.weight is missing", tmp);
	s_edited("tiny/tiny-llama-F32.gguf",
		 &(struct s_edit){ .add = "blk.0.ffn_gate_shexp.weight", .add_ne = { 256, 64 } },
		 NULL, tmp);
	s_edited("tiny/tiny-llama-F32.gguf", &(struct s_edit){ .arch = "nonesuch" },
		 "architecture 'nonesuch' is not supported (computed: llama, qwen3", tmp);
	/* Gemma 4's mixture-of-experts variant runs on both backends: a dense gemma4 file that
	 * claims experts meets the MoE rules' one line on the cuda backend as on the cpu one */
	{
		struct ns_model *m = NULL;
		char err[NS_ERR_LEN] = "";
		int rc;

		if (s_variant("tiny/tiny-gemma4-F32.gguf",
			      &(struct s_edit){ .key = "gemma4.expert_count", .key_value = 4 },
			      tmp) == 0 && ns_model_open(tmp, &m, err, sizeof(err)) == 0) {
			for (int b = 0; b < 2; b++) {
				rc = ns_arch_check(m, b ? NS_BACKEND_CUDA : NS_BACKEND_CPU, err,
						   sizeof(err));
				EXPECT(rc == -EINVAL &&
				       strstr(err, "gemma4 expert hyperparameters incomplete or "
					      "inconsistent (expert_count 4") &&
				       !strchr(err, '\n'), "gemma4 experts alone on %s: %d '%s'",
				       b ? "cuda" : "cpu", rc, err);
			}
		} else {
			EXPECT(0, "gemma4 MoE variant: %s", err);
		}
		ns_model_close(&m);
		unlink(tmp);
	}
	/* an unknown architecture is described by shapes */
	{
		struct ns_model *m = NULL;
		struct ns_hparams hp;
		char err[NS_ERR_LEN];

		if (s_variant("tiny/tiny-qwen3moe-F32.gguf", &(struct s_edit){ .arch = "nonesuch" },
			      tmp) == 0 && ns_model_open(tmp, &m, err, sizeof(err)) == 0 &&
		    ns_hparams_load(m, &hp, err, sizeof(err)) == 0) {
			EXPECT(ns_arch_check_described(m, err, sizeof(err)) == 0, "described");
			EXPECT(ns_arch_role(&hp, ns_model_find(m, "blk.0.ffn_up_exps.weight")) ==
			       NS_ROLE_EXPERT &&
			       ns_arch_role(&hp, ns_model_find(m, "blk.0.attn_q_norm.weight")) ==
			       NS_ROLE_HELD &&
			       ns_arch_role(&hp, ns_model_find(m, "token_embd.weight")) ==
			       NS_ROLE_ROWS &&
			       ns_arch_role(&hp, ns_model_find(m, "blk.1.attn_v.weight")) ==
			       NS_ROLE_MATRIX, "roles by shape");
		} else {
			EXPECT(0, "unknown architecture variant");
		}
		ns_model_close(&m);
		unlink(tmp);
	}
}

int main(void)
{
	ns_test_require_oracle();
	s_table();
	for (size_t i = 0; i < NS_ARRAY_LEN(s_files); i++)
		s_file(s_files[i]);
	s_edits();
	if (s_fails) {
		fprintf(stderr, "%d failure(s)\n", s_fails);
		return 1;
	}
	printf("ok: table consistent, %zu files bound, edits refused\n", NS_ARRAY_LEN(s_files));
	return 0;
}
