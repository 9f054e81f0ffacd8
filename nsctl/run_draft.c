/* run_draft.c - see run_draft.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl_msg.h"
#include "draft_model.h"
#include "engine_flags.h"
#include "gguf.h"
#include "hparams.h"
#include "model.h"
#include "ns_util.h"
#include "run_draft.h"

#define S_WHO "nsctl run"

int nsctl_draft_flag(struct ns_gen_params *g, const char **draft_model, const char *a,
		     const char *v)
{
	uint64_t u = 0;
	int rc;

	if (strcmp(a, "--draft") && strcmp(a, "--draft-max") && strcmp(a, "--draft-min"))
		return 0;
	if (!v) {
		fprintf(stderr, S_WHO ": %s needs a value\n", a);
		return -EINVAL;
	}
	if (!strcmp(a, "--draft")) { /* 'ngram', 'mtp', else a draft model's path */
		g->draft = !strcmp(v, "ngram") ? NS_GEN_DRAFT_NGRAM :
			   !strcmp(v, "mtp") ? NS_GEN_DRAFT_MTP : NS_GEN_DRAFT_MODEL;
		*draft_model = g->draft == NS_GEN_DRAFT_MODEL ? v : NULL;
		if (!*v) {
			fprintf(stderr, S_WHO ": --draft needs 'ngram', 'mtp' or a draft model's "
				"path\n");
			return -EINVAL;
		}
		return 2;
	}
	if ((rc = nsctl_arg_count(S_WHO, a, v, 1, NS_CMSG_MAX_DRAFT, &u)))
		return rc;
	if (!strcmp(a, "--draft-max"))
		g->draft_max = (uint32_t)u;
	else
		g->draft_min = (uint32_t)u;
	return 2;
}

/* --draft mtp: MODEL must carry an MTP block we run (qwen35's, qwen35moe's; the block's loader
 * checks its tensors, nscompute/forward/mtp.c). 0, or -EINVAL after one line. A file that does
 * not open is not judged here (the run refuses it with its own line). */
static int s_mtp_check(const char *model)
{
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	char why[NS_ERR_LEN];
	int rc = 0;

	if (ns_model_open(model, &m, why, sizeof(why)) || ns_hparams_load(m, &hp, why,
									  sizeof(why))) {
		ns_model_close(&m);
		return 0;
	}
	if (!hp.n_nextn) {
		fprintf(stderr, S_WHO ": --draft mtp: %s has no MTP block (no %s.nextn_predict_layers; "
			"Qwen3.5 checkpoints carry one)\n", model, hp.arch[0] ? hp.arch : "?");
		rc = -EINVAL;
	} else if (strcmp(hp.arch, "qwen35") && strcmp(hp.arch, "qwen35moe")) {
		fprintf(stderr, S_WHO ": --draft mtp: the MTP block of %s is not run (qwen35 and "
			"qwen35moe only)\n", hp.arch);
		rc = -EINVAL;
	}
	ns_model_close(&m);
	return rc;
}

int nsctl_draft_check(const struct ns_gen_params *g, const char *model,
		      const char *draft_model)
{
	char err[NS_ERR_LEN];
	uint32_t max = g->draft_max ? g->draft_max : 16, min = g->draft_min ? g->draft_min : 1;

	if (!g->draft && (g->draft_max || g->draft_min)) {
		fprintf(stderr, S_WHO ": --draft-max and --draft-min go with --draft\n");
		return -EINVAL;
	}
	if (!g->draft)
		return 0;
	if (g->draft == NS_GEN_DRAFT_MTP && s_mtp_check(model) < 0)
		return -EINVAL;
	if (min > max) {
		fprintf(stderr, S_WHO ": --draft-min %u is over --draft-max %u\n", min, max);
		return -EINVAL;
	}
	if (draft_model && nsctl_draft_compatible(model, draft_model, err, sizeof(err)) < 0) {
		fprintf(stderr, S_WHO ": %s\n", err);
		return -EINVAL;
	}
	/* a target with a recurrent state (qwen35) rolls it back past a rejected draft
	 * (ns_fwd_mark; on cuda too, in VRAM); a draft model with one was refused above
	 * (draft_model.c) */
	return 0;
}
