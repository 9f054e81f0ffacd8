/* engine_replan.c - ns_engine_warmup (neurostream.h): re-plan from the expert hits of a
 * warm-up prompt while the engine runs. The hits come from nsrouter (--stats: hits per
 * (layer, expert) from the router decisions nscompute publishes); the difference across one
 * evaluation is written to the file nsplan plans from, nsplan re-reads it on SIGHUP and
 * publishes the next plan generation (hot experts pinned in the RAM budget), and nsio loads
 * its RAM windows between requests (shm/ram_seg.h); we wait for each step, bounded by the
 * caller's time. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "hparams.h"
#include "model.h"
#include "ns_util.h"
#include "plan_shm.h"
#include "plan_stats.h"
#include "ram_seg.h"
#include "session.h"
#include "summary.h"

/* nsrouter's counts now (all zero while the file is absent or unreadable). */
static int s_load(const char *path, const struct ns_hparams *hp, struct nsplan_stats *st)
{
	char err[NS_ERR_LEN];
	int rc = nsplan_stats_load(path, hp->n_layer, hp->n_expert, st, err, sizeof(err));

	if (rc == -ENOMEM)
		return rc;
	if (rc) { /* absent (nsrouter has counted nothing yet) */
		nsplan_stats_free(st);
		st->hits = calloc((size_t)hp->n_layer * hp->n_expert, sizeof(*st->hits));
		st->tokens = calloc(hp->n_layer, sizeof(*st->tokens));
		if (!st->hits || !st->tokens)
			return -ENOMEM;
	}
	return 0;
}

/* Did nsrouter count exactly n more tokens in every MoE layer from a to b? */
static bool s_whole(const struct nsplan_stats *a, const struct nsplan_stats *b,
		    const bool *moe, uint32_t n_layer, uint64_t n)
{
	for (uint32_t l = 0; l < n_layer; l++)
		if (moe[l] && b->tokens[l] - a->tokens[l] != n)
			return false;
	return true;
}

/* Write b - a (one evaluation's counts) in nsplan's format, atomically. Returns the expert
 * selections written, or a negative errno. */
static int64_t s_write_delta(const char *path, const struct nsplan_stats *a,
			     const struct nsplan_stats *b, const struct ns_hparams *hp)
{
	char tmp[PATH_MAX + 16];
	int64_t sel = 0;
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "# expert hits of the warm-up prompt (nsctl): tokens LAYER N / LAYER EXPERT "
		"HITS\n");
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		fprintf(f, "tokens %u %llu\n", l,
			(unsigned long long)(b->tokens[l] - a->tokens[l]));
		for (uint32_t x = 0; x < hp->n_expert; x++) {
			uint64_t i = (uint64_t)l * hp->n_expert + x, h = b->hits[i] - a->hits[i];

			if (h)
				fprintf(f, "%u %u %llu\n", l, x, (unsigned long long)h);
			sel += (int64_t)h;
		}
	}
	if (fclose(f) || rename(tmp, path)) {
		int rc = -errno;

		unlink(tmp);
		return rc;
	}
	return sel;
}

/* Generation of the session's published plan, 0 when there is none. */
static uint32_t s_plan_gen(const char *session)
{
	struct nsplan_header h;
	struct ns_seg seg;
	char err[NS_ERR_LEN];
	uint8_t *buf;
	size_t cap = 1u << 20, len = 0;
	uint32_t gen = 0;
	int rc = -EAGAIN;

	if (nsplan_shm_open(&seg, session, err, sizeof(err)))
		return 0;
	buf = malloc(cap);
	for (int i = 0; buf && i < 100 && rc == -EAGAIN; i++) {
		rc = nsplan_shm_read(&seg, buf, cap, &len);
		if (rc == -ENOSPC && cap < (1u << 30)) {
			uint8_t *nb = realloc(buf, cap *= 2);

			if (!nb)
				break;
			buf = nb;
			rc = -EAGAIN;
		}
	}
	if (rc == 0 && len >= sizeof(h)) {
		memcpy(&h, buf, sizeof(h));
		if (h.magic == NSPLAN_MAGIC)
			gen = h.generation;
	}
	free(buf);
	ns_seg_unmap(&seg);
	return gen;
}

/* Plan generation nsio has fully loaded; UINT32_MAX when nsio holds no RAM segment (nothing
 * in RAM: no loading to wait for). */
static uint32_t s_nsio_gen(const char *session)
{
	char err[NS_ERR_LEN];
	uint64_t gen;

	return ns_ram_seg_loaded(session, &gen, err, sizeof(err)) == 0 ? (uint32_t)gen
								       : UINT32_MAX;
}

/* Sleep 10 ms; false when the deadline passed or the caller cancelled. */
static bool s_tick(struct ns_engine *e, uint64_t t_end)
{
	if (nse_cancelled(e) || ns_now_ns() > t_end)
		return false;
	usleep(10000);
	return true;
}

static int s_discard(const char *piece, size_t len, int32_t id, void *user)
{
	(void)piece;
	(void)len;
	(void)id;
	(void)user;
	return 0;
}

/* One evaluation of the warm-up prompt from an empty context; *n gets its tokens. */
static int s_eval(struct ns_engine *e, const char *text, bool chat, const char *system,
		  uint32_t *n)
{
	struct ns_engine_msg m[2];
	struct ns_engine_stats st;
	struct ns_gen_params g;
	size_t k = 0;
	int rc;

	ns_gen_params_default(&g);
	g.n_predict = 0; /* prefill only */
	if (chat && system)
		m[k++] = (struct ns_engine_msg){ .role = "system", .content = system };
	m[k++] = (struct ns_engine_msg){ .role = "user", .content = text };
	ns_engine_reset(e);
	rc = chat ? ns_engine_chat(e, m, k, &g, s_discard, NULL)
		  : ns_engine_generate(e, text, &g, s_discard, NULL);
	ns_engine_reset(e);
	ns_engine_stats(e, &st);
	*n = st.n_prompt;
	return rc < 0 ? rc : 0;
}

/* nsrouter rewrites its file at most every 2 s (and polls every 200 ms): a pass it counted
 * shows up within this long. */
#define S_COUNT_WAIT_NS 3500000000ull
#define S_PASSES 3
#define S_LATE_NS 2500000000ull

int ns_engine_warmup(struct ns_engine *e, const char *text, bool chat, const char *system,
		     uint64_t timeout_ms, struct ns_warmup_report *out)
{
	const uint64_t t_end = ns_now_ns() + timeout_ms * 1000000ull;
	struct nsplan_stats a = { 0 }, b = { 0 };
	char err[NS_ERR_LEN], plan_path[PATH_MAX + 8];
	struct ns_hparams hp;
	bool *moe = NULL, whole = false;
	uint32_t old, now;
	int64_t sel;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!e->o.expert_stats || e->o.no_plan || !e->child[NS_PROC_NSPLAN].pid ||
	    !e->child[NS_PROC_NSROUTER].pid)
		return ns_errf(e->err, sizeof(e->err), "--warmup needs an expert statistics file, "
			       "nsplan and nsrouter (a MoE model)"), -EINVAL;
	if (ns_hparams_load(e->m, &hp, err, sizeof(err)) || !hp.n_expert || !hp.n_layer)
		return ns_errf(e->err, sizeof(e->err), "--warmup: %s", hp.n_expert ? err :
			       "the model has no experts"), -EINVAL;
	if (snprintf(plan_path, sizeof(plan_path), NSE_PLAN_STATS_FMT, e->o.expert_stats) >=
	    (int)sizeof(plan_path))
		return ns_errf(e->err, sizeof(e->err), "--expert-stats path too long"),
		       -ENAMETOOLONG;
	moe = calloc(hp.n_layer, sizeof(*moe));
	if (!moe)
		return -ENOMEM;
	for (uint64_t i = 0; i < e->m->n_tensors; i++) {
		const char *name = e->m->tensors[i].name;
		int64_t l = ns_tensor_layer(name);

		if (ns_tensor_is_expert(name) && l >= 0 && l < (int64_t)hp.n_layer)
			moe[l] = true;
	}
	/* 1. evaluate until nsrouter has counted one whole pass. It subscribes to the router
	 * decisions a moment after nscompute binds (ZeroMQ reconnects every 100 ms): give it
	 * that moment first. A pass it missed (partly) may still reach its file late: wait that
	 * out before the next pass takes its baseline, so a baseline never lacks a pass. */
	usleep(300000);
	for (out->passes = 1; out->passes <= S_PASSES && !whole; out->passes++) {
		uint64_t t_pass;

		if (out->passes > 1) {
			t_pass = ns_now_ns();
			while (ns_now_ns() - t_pass < S_LATE_NS && s_tick(e, t_end))
				;
		}
		nsplan_stats_free(&a);
		if ((rc = s_load(e->o.expert_stats, &hp, &a)) < 0 ||
		    (rc = s_eval(e, text, chat, system, &out->n_tokens)) < 0)
			goto out;
		t_pass = ns_now_ns();
		do {
			/* ask nsrouter to write its counts now rather than at its 2 s tick */
			if (e->child[NS_PROC_NSROUTER].pid > 0)
				kill(e->child[NS_PROC_NSROUTER].pid, SIGUSR1);
			nsplan_stats_free(&b);
			if ((rc = s_load(e->o.expert_stats, &hp, &b)) < 0)
				goto out;
			whole = s_whole(&a, &b, moe, hp.n_layer, out->n_tokens);
		} while (!whole && ns_now_ns() - t_pass < S_COUNT_WAIT_NS && s_tick(e, t_end));
		if (nse_cancelled(e) || ns_now_ns() > t_end)
			break;
	}
	out->passes--;
	if (!whole) {
		rc = nse_cancelled(e) ? -ECANCELED : -ETIMEDOUT;
		ns_errf(e->err, sizeof(e->err), "nsrouter did not count the warm-up's routing "
			"(%s after %u evaluations)", e->o.expert_stats, out->passes);
		goto out;
	}
	sel = s_write_delta(plan_path, &a, &b, &hp);
	if (sel < 0) {
		rc = (int)sel;
		ns_errf(e->err, sizeof(e->err), "cannot write %s: %s", plan_path, strerror(-rc));
		goto out;
	}
	out->hits = (uint64_t)sel;
	/* 2. nsplan publishes the next generation */
	old = s_plan_gen(e->id);
	if (kill(e->child[NS_PROC_NSPLAN].pid, SIGHUP)) {
		rc = -errno;
		ns_errf(e->err, sizeof(e->err), "cannot signal nsplan: %s", strerror(-rc));
		goto out;
	}
	while ((now = s_plan_gen(e->id)) <= old && s_tick(e, t_end))
		;
	if (now <= old) {
		rc = -ETIMEDOUT;
		ns_errf(e->err, sizeof(e->err), "nsplan published no new plan generation (still "
			"%u; its message says why)", old);
		goto out;
	}
	out->generation = now;
	/* 3. nsio loads its RAM windows (UINT32_MAX: it holds nothing in RAM) */
	while (s_nsio_gen(e->id) < now && s_tick(e, t_end))
		;
	if (s_nsio_gen(e->id) < now) {
		rc = -ETIMEDOUT;
		ns_errf(e->err, sizeof(e->err), "nsio did not load plan generation %u in time",
			now);
	}
out:
	nsplan_stats_free(&a);
	nsplan_stats_free(&b);
	free(moe);
	return rc;
}
