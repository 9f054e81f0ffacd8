/* engine_internal.h - the state behind neurostream.h, shared by api.c (requests, tokens) and
 * engine_proc.c (session, children, supervision). Not a public header. */
#ifndef NS_ENGINE_INTERNAL_H
#define NS_ENGINE_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "chat.h"
#include "ctl_proto.h"
#include "neurostream.h"

struct ns_model;
struct ns_tok;
struct ns_session;

struct ns_engine {
	struct ns_engine_opts o;      /* copy; wrap[] point into wrap_copy */
	char *wrap_copy[NS_PROC_COUNT];
	char model_path[PATH_MAX];
	struct ns_model *m;           /* metadata (tokenizer, chat template) */
	struct ns_tok *tok;
	enum ns_chat_family fam;
	struct ns_session *s;         /* owner: destroy unlinks */
	void *zctx, *sock;            /* PAIR socket bound at endpoint */
	char endpoint[PATH_MAX + 16];
	char sock_path[PATH_MAX];
	char procs_path[PATH_MAX];
	char exe[NS_PROC_COUNT][PATH_MAX];
	pid_t pid[NS_PROC_COUNT];     /* direct children (wrappers when wrapped); 0 = none */
	uint32_t restarts[NS_PROC_COUNT];
	bool plan_gone;               /* nsplan ended on its own: not restarted */
	pid_t router_pid;             /* nsrouter (engine_router.c); 0 = none */
	uint32_t router_restarts;
	bool router_off;              /* dense model, NS_NSROUTER=off, or given up */
	char router_exe[PATH_MAX];
	uint32_t n_vocab, n_ctx;
	int32_t stop_ids[NS_CMSG_MAX_STOP];
	uint32_t n_stop;
	int32_t *hist;                /* tokens in nscompute's context (chat prefix reuse) */
	size_t n_hist, hist_cap;
	struct ns_engine_stats st;
	volatile sig_atomic_t cancelled;
	uint64_t rejected;            /* malformed messages from nscompute */
	uint64_t t_supervise;         /* ns_now_ns() of the last child check */
	char err[512];
};

/* The statistics file nsplan plans from: "<opts.expert_stats>.plan" (engine_replan.c). */
#define NSE_PLAN_STATS_FMT "%s.plan"

/* engine_proc.c */
int nse_start(struct ns_engine *e);    /* session, nsio, nsplan, nscompute (HELLO read) */
void nse_teardown(struct ns_engine *e);
/* Check the children: restart a dead nsio/nsplan; -EPIPE when nscompute is gone. */
int nse_supervise(struct ns_engine *e);
/* Receive one message (waiting, supervising, honouring cancel). msg is initialised here and
 * closed by the caller. Returns 0, -ECANCELED, -EPIPE, -ETIMEDOUT (timeout_ms > 0). */
int nse_recv(struct ns_engine *e, zmq_msg_t *msg, uint64_t timeout_ms);
int nse_send(struct ns_engine *e, const void *buf, int n);
bool nse_cancelled(const struct ns_engine *e);

/* engine_proc.c: executable of a child: $ENV, $NS_BUILD_ROOT/dir/name, next to nsctl's own
 * binary (build tree ../dir/name, installed ./name), else the bare name (PATH). */
void nse_find_exe(const char *dir, const char *name, const char *env, char *buf, size_t n);

/* engine_proc.c: fork + exec argv (own process group, dies with nsctl, stdout to stderr). */
int nse_fork_exec(const char *const *argv, pid_t *pid);

/* engine_router.c: nsrouter for MoE models (started after nsio, restarted when it dies). */
void nse_router_start(struct ns_engine *e);
void nse_router_supervise(struct ns_engine *e);
void nse_router_stop(struct ns_engine *e);

#endif
