/* draft_model.c - see draft_model.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "commands.h"
#include "draft_model.h"
#include "fixed_mem.h"
#include "gguf.h"
#include "gpu_need.h"
#include "hparams.h"
#include "model.h"
#include "ns_util.h"

/* The first id whose text differs between the two token tables, or n when none does. */
static uint64_t s_first_diff(const struct ns_gguf_value *a, const struct ns_gguf_value *b,
			     uint64_t n)
{
	const struct ns_gguf_str *x = a->v.arr.items, *y = b->v.arr.items;

	for (uint64_t i = 0; i < n; i++)
		if (x[i].len != y[i].len || memcmp(x[i].s, y[i].s, x[i].len))
			return i;
	return n;
}

static const struct ns_gguf_value *s_tokens(const struct ns_model *m)
{
	const struct ns_gguf_value *t = ns_gguf_get_arr(ns_model_meta(m), "tokenizer.ggml.tokens");

	return t && t->v.arr.item_type == NS_GGUF_STRING ? t : NULL;
}

/* The vocabularies of model a and draft b agree: one line in err when they do not. */
static int s_same_vocab(const struct ns_model *a, const struct ns_model *b, const char *draft,
			char *err, size_t errlen)
{
	const struct ns_gguf_value *ta = s_tokens(a), *tb = s_tokens(b);
	const struct ns_gguf_str *sa, *sb;
	uint64_t i;

	if (!ta || !tb)
		return ns_errf(err, errlen, "--draft %s: %s has no tokenizer.ggml.tokens to compare "
			       "vocabularies by", draft, !tb ? "the draft model" : "the model"),
		       -EINVAL;
	if (ta->v.arr.n != tb->v.arr.n)
		return ns_errf(err, errlen, "--draft %s: vocabulary mismatch: the draft model has "
			       "%llu tokens, the model %llu", draft,
			       (unsigned long long)tb->v.arr.n, (unsigned long long)ta->v.arr.n),
		       -EINVAL;
	i = s_first_diff(ta, tb, ta->v.arr.n);
	sa = ta->v.arr.items;
	sb = tb->v.arr.items;
	if (i < ta->v.arr.n)
		return ns_errf(err, errlen, "--draft %s: vocabulary mismatch: token %llu is '%.40s' "
			       "in the draft model, '%.40s' in the model", draft,
			       (unsigned long long)i, sb[i].s, sa[i].s), -EINVAL;
	return 0;
}

/* The draft's architecture: a cpu pass whose KV cache can be cut back, text only. */
static int s_runnable(const struct ns_model *d, const char *draft, char *err, size_t errlen)
{
	struct ns_arch_model *am = NULL;
	char why[NS_ERR_LEN];
	int rc = ns_arch_check(d, NS_BACKEND_CPU, why, sizeof(why));

	if (rc < 0)
		return ns_errf(err, errlen, "--draft %s: %s", draft, why), rc;
	if ((rc = ns_arch_bind(d, &am, why, sizeof(why))) < 0)
		return ns_errf(err, errlen, "--draft %s: %s", draft, why), rc;
	if (am->arch->flags & (NS_ARCH_RECURRENT | NS_ARCH_DEEPSTACK | NS_ARCH_MROPE) ||
	    (am->kinds & NS_LAYER_RECURRENT)) {
		ns_errf(err, errlen, "--draft %s: a draft model needs a text-only pass whose KV "
			"cache can be cut back; '%s' has %s", draft, am->arch->name,
			am->arch->flags & NS_ARCH_RECURRENT || am->kinds & NS_LAYER_RECURRENT ?
			"a recurrent state" : "vision inputs (M-RoPE)");
		rc = -EINVAL;
	}
	ns_arch_model_free(&am);
	return rc;
}

int nsctl_draft_compatible(const char *model, const char *draft, char *err, size_t errlen)
{
	struct ns_model *m = NULL, *d = NULL;
	char why[NS_ERR_LEN];
	int rc;

	if (ns_model_open(model, &m, why, sizeof(why)) < 0)
		return 0;
	rc = ns_model_open(draft, &d, why, sizeof(why));
	if (rc < 0) {
		ns_errf(err, errlen, "--draft %s: %s", draft, why);
		rc = rc == -ENOMEM ? rc : -EINVAL;
	}
	if (rc == 0)
		rc = s_same_vocab(m, d, draft, err, errlen);
	if (rc == 0)
		rc = s_runnable(d, draft, err, errlen);
	ns_model_close(&d);
	ns_model_close(&m);
	return rc;
}

int nsctl_draft_bytes(const char *draft, uint32_t n_ctx, uint64_t *bytes, char *err,
		      size_t errlen)
{
	struct ns_model *d = NULL;
	struct ns_hparams hp;
	struct nsplan_fixed fx;
	char why[NS_ERR_LEN];
	int rc = ns_model_open(draft, &d, why, sizeof(why));

	if (rc == 0)
		rc = ns_hparams_load(d, &hp, why, sizeof(why));
	if (rc == 0) /* f32 KV (32 floats: 128 bytes), no process overhead: nscompute's own */
		rc = nsplan_fixed_compute_kv(d, &hp, n_ctx, 128, 128, 0, &fx, why, sizeof(why));
	if (rc == 0 && ns_add_u64_overflow(d->total_tensor_bytes, fx.kv_bytes + fx.scratch_bytes,
					   bytes)) {
		snprintf(why, sizeof(why), "its size overflows");
		rc = -EOVERFLOW;
	}
	if (rc < 0)
		ns_errf(err, errlen, "--draft %s: %s", draft, why);
	ns_model_close(&d);
	return rc;
}

int nsctl_draft_vram(const char *draft, uint32_t n_ctx, uint64_t *bytes, char *err,
		     size_t errlen)
{
	struct ns_model *d = NULL;
	char why[NS_ERR_LEN];
	int rc = ns_model_open(draft, &d, why, sizeof(why));

	*bytes = 0;
	if (rc == 0) /* as nscompute sizes its arena (compute_draft_cuda.c) */
		rc = nsplan_gpu_resident_need(d, n_ctx, NSPLAN_GPU_RESIDENT_STAGE, bytes, why,
					      sizeof(why));
	if (rc < 0)
		ns_errf(err, errlen, "--draft %s: %s", draft, why);
	ns_model_close(&d);
	return rc;
}

int nsctl_pass_vram_reserve(const char *model, uint32_t n_ctx, const char *ctk, const char *ctv,
			    uint64_t *reserve, char *err, size_t errlen)
{
	struct ns_model *m = NULL;
	struct nsplan_gpu_need gn;
	char why[NS_ERR_LEN];
	int rc = ns_model_open(model, &m, why, sizeof(why));

	if (rc == 0)
		rc = nsplan_gpu_need(m, n_ctx, 0, 0, (enum ns_kv_type)nsctl_kv_enum(ctk),
				     (enum ns_kv_type)nsctl_kv_enum(ctv), &gn, why, sizeof(why));
	ns_model_close(&m);
	if (rc < 0)
		return ns_errf(err, errlen, "%s", why), rc;
	*reserve = gn.total;
	return 0;
}

int nsctl_draft_vram_reserve(const char *model, const char *draft, uint32_t n_ctx,
			     const char *ctk, const char *ctv,
			     uint64_t vram, uint64_t reserve, uint64_t *plan_reserve,
			     uint64_t *draft_vram, char *err, size_t errlen)
{
	char s[4][32];
	uint64_t d = 0, sum;
	int rc;

	*plan_reserve = reserve;
	rc = nsctl_draft_vram(draft, n_ctx, &d, err, errlen);
	if (rc < 0)
		return rc;
	if (draft_vram)
		*draft_vram = d;
	if (!reserve && (rc = nsctl_pass_vram_reserve(model, n_ctx, ctk, ctv, &reserve, err,
						     errlen)) < 0)
		return rc;
	if (ns_add_u64_overflow(reserve, d, &sum))
		return ns_errf(err, errlen, "--draft %s: the VRAM sizes overflow", draft),
		       -EOVERFLOW;
	if (vram && sum > vram)
		return ns_errf(err, errlen, "--draft %s: the draft model's %s of VRAM (weights, KV "
			       "cache and scratch at -c %u) does not fit: with the cuda pass's %s "
			       "it exceeds --vram-budget %s; smallest workable: --vram-budget %"
			       PRIu64 " (or a smaller draft, a lower -c, or --backend cpu)", draft,
			       ns_format_bytes(d, s[0], 32), n_ctx,
			       ns_format_bytes(reserve, s[1], 32), ns_format_bytes(vram, s[2], 32),
			       sum), -ENOSPC;
	*plan_reserve = sum;
	return 0;
}
