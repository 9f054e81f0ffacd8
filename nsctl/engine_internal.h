/* engine_internal.h - the state behind neurostream.h, shared by the engine's files. Not a
 * public header.
 *
 *   api.c            requests, tokens, statistics (the public calls)
 *   engine_proc.c    the table of child processes: start, supervise (deaths, stalls), stop
 *   engine_spawn.c   fork + exec (wrappers, process groups), exit status, the procs file
 *   engine_args.c    each child's name, executable and command line
 *   engine_locate.c  where the children's executables are (environment, build or install tree)
 *   engine_ctl.c     the socket of the control channel to nscompute (proto/ctl_msg.h)
 *   engine_keeper.c  the session keeper: removes the session if nsctl itself dies
 *   engine_replan.c  ns_engine_warmup
 * Calls go down this list only (proc uses args, spawn, ctl and keeper; none calls back). */
#ifndef NS_ENGINE_INTERNAL_H
#define NS_ENGINE_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "chat.h"
#include "ctl_msg.h"
#include "neurostream.h"
#include "seg.h"

struct ns_model;
struct ns_tok;
struct ns_session;

/* One child process of the table (engine_proc.c). */
struct nse_child {
	pid_t pid;            /* the direct child (its wrapper when wrapped); 0: not running */
	uint64_t start;       /* its start time (ns_proc_start_time), for the procs file */
	uint32_t restarts;
	bool off;             /* not run (not needed, refused, finished) or given up on */
	char exe[PATH_MAX];
	uint64_t beats_seen;  /* its role's beat counter when last looked at */
	uint64_t t_beat;      /* ns_now_ns() when that counter last moved; 0: no beat yet */
	bool stalled;         /* killed for standing still (said so already) */
};

/* The session keeper (engine_keeper.c): a fork of nsctl made before the session exists. */
struct nse_keeper {
	pid_t pid;            /* 0: none */
	int fd;               /* write end of its lifeline pipe; -1: none */
	char shm_prefix[96];  /* "ns-<user>-<id>-": the session's /dev/shm entries */
	char rundir[PATH_MAX];
};

struct ns_engine {
	struct ns_engine_opts o;      /* copy; wrap[] point into wrap_copy */
	bool ram_watch;               /* the load or a prompt is waited for: nse_recv reports
				       * the RAM cache's fill (nse_ram_watch, o.progress) */
	bool ram_done;                /* the fill was seen complete: no more reports */
	uint64_t t_ram, t_ram0;       /* last look at the fill; the prompt's start */
	char *wrap_copy[NS_PROC_COUNT];
	char model_path[PATH_MAX];
	char draft_path[PATH_MAX];    /* o.draft_model made absolute (o.draft_model points here) */
	char mmproj_path[PATH_MAX];   /* o.mmproj made absolute (o.mmproj points here) */
	struct nse_images *img;       /* the tower's hyperparameters, pending images (api_image.c);
				       * NULL without a tower */
	struct ns_model *m;           /* metadata (tokenizer, chat template) */
	struct ns_tok *tok;
	bool recurrent;               /* recurrent layers (qwen35): nscompute cannot cut the
				       * context back, a changed prefix is evaluated again whole */
	enum ns_chat_family fam;
	char id[NS_SESSION_ID_LEN + 1]; /* the session's id, chosen before the keeper starts */
	struct ns_session *s;         /* owner: destroy unlinks */
	void *zctx, *sock;            /* PAIR socket bound at endpoint */
	char endpoint[PATH_MAX + 16];
	char sock_path[PATH_MAX];
	char procs_path[PATH_MAX];
	struct nse_child child[NS_PROC_COUNT];
	struct nse_keeper keeper;
	uint64_t stall_ns;            /* a beat counter still this long: stopped or stuck */
	uint32_t n_vocab, n_ctx;
	int32_t stop_ids[NS_CMSG_MAX_STOP];
	uint32_t n_stop;
	int32_t *hist;                /* tokens in nscompute's context (chat prefix reuse) */
	size_t n_hist, hist_cap;
	bool hist_cut;                /* ns_engine_rollback shortened hist: nscompute holds more,
				       * the next evaluation of slot 0 keeps n_hist (NS_EVAL_KEEP) */
	struct ns_engine_stats st;
	volatile sig_atomic_t cancelled;
	int think;                    /* ns_engine_set_thinking: 1 on, 0 off, -1 not said (the
				       * engine's default: chat_opts_of in api.c) */
	uint64_t rejected;            /* malformed messages from nscompute */
	bool ctl_broken;              /* a message was lost or malformed: the control stream is
				       * out of step, every later request refused (-EPIPE) */
	uint64_t t_supervise;         /* ns_now_ns() of the last child check */
	char err[512];
};

/* The statistics file nsplan plans from: "<opts.expert_stats>.plan" (engine_replan.c). */
#define NSE_PLAN_STATS_FMT "%s.plan"

/* api_image.c: the tower's checks at load (o.mmproj: a tower for this model), the images of
 * the next request. */
int nse_images_load(struct ns_engine *e);
void nse_images_free(struct ns_engine *e);
bool nse_images_pending(const struct ns_engine *e);
/* ids against the pending images (each run of the placeholder its image's length): 0 or
 * -EINVAL with e->err. */
int nse_images_check_ids(struct ns_engine *e, const int32_t *ids, uint32_t n);
/* Send IMAGES (the pending images) before the EVAL: 0 or the send's error. */
int nse_images_send(struct ns_engine *e);
void nse_images_forget(struct ns_engine *e);
/* text tokenized with every "<|image_pad|>" replaced by the next pending image's run of the
 * placeholder (pieces between with parse_special; add_bos on the first): 0 or -errno. */
int nse_images_encode(struct ns_engine *e, const char *text, bool add_bos, bool parse_special,
		      int32_t **ids, size_t *n);

/* engine_proc.c */
int nse_start(struct ns_engine *e);
/* While e->ram_watch: at most ten times a second, the RAM segment's fill figures to
 * e->o.progress (NS_PROGRESS_RAM_FILL); the last once complete. */
void nse_ram_watch(struct ns_engine *e);    /* keeper, session, children (HELLO read) */
void nse_teardown(struct ns_engine *e);
/* Check the children: restart a dead or stalled nsio/nsplan/nsrouter; -EPIPE when
 * nscompute is gone, -ETIMEDOUT when it stalled (the line in e->err). */
int nse_supervise(struct ns_engine *e);
bool nse_cancelled(const struct ns_engine *e);
/* Receive one message from nscompute (waiting, supervising, honouring cancel). msg is
 * initialised here and closed by the caller. Returns 0, -ECANCELED, -EPIPE, -ETIMEDOUT
 * (timeout_ms > 0, or nscompute stalled). */
int nse_recv(struct ns_engine *e, zmq_msg_t *msg, uint64_t timeout_ms);
int nse_send(struct ns_engine *e, const void *buf, int n);

/* engine_args.c: the process name of a table entry ("nsio", ...), its build-tree folder and
 * the environment variable that names its executable. */
const char *nse_name(enum ns_engine_proc p);
void nse_exe_of(const struct ns_engine *e, enum ns_engine_proc p, char *buf, size_t n);
/* engine_args.c: the command line of child p after its executable, from the options. */
#define NSE_NUMS 16
struct nse_cmdline {
	const char *argv[48];         /* NULL-terminated; point into e and into this struct */
	char num[NSE_NUMS][32];       /* the numbers among them */
	char path[PATH_MAX + 8];      /* a path made for it (nsplan's statistics file) */
};
/* Returns the number of arguments, or -E2BIG. */
int nse_args(const struct ns_engine *e, enum ns_engine_proc p, struct nse_cmdline *c);

/* api_budgets.c: budgets left to the library (NS_BUDGET_AUTO) chosen as nsctl run does;
 * n_ctx_asked: the caller's n_ctx (0: the default). 0 or -errno with e->err. */
int nse_budgets_resolve(struct ns_engine *e, uint32_t n_ctx_asked);

/* engine_log.c: one line (no prefix, no newline) to the log callback or stderr */
void nse_log(enum ns_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* engine_locate.c */
/* Executable of a child: $ENV, $NS_BUILD_ROOT/dir/name, $NS_LIBEXECDIR/name, then from the
 * directory of this library (or the program it is linked into) and of the running program:
 * the build tree's ../dir/name, the install tree's <prefix>/<libexecdir>/neurostream/name,
 * the same directory; else the bare name (PATH). */
void nse_find_exe(const char *dir, const char *name, const char *env, char *buf, size_t n);

/* engine_spawn.c */
/* fork + exec [wrap words...] exe args...: own process group, SIGTERM when nsctl dies, stdout
 * to stderr. Returns 0 with *pid or -errno. */
int nse_spawn(const char *wrap, const char *exe, const char *const *args, pid_t *pid);
/* "exit status N" / "killed by signal N (NAME)" of a wait status. */
void nse_status_text(int st, char *buf, size_t n);
/* Has *pid exited? Reaps it (and SIGKILLs what its group left), describes how, zeroes *pid. */
bool nse_reap(pid_t *pid, int *status, char *why, size_t n);
/* Stop a child's process group: SIGTERM, up to 3 s, then SIGKILL; reaps it. Returns its wait
 * status, or -1 when it had to be killed. */
int nse_stop(pid_t pid, const char *name);
/* Write the procs file nsctl ps reads ("NAME PID START [wrapped:CMD]", "model PATH"). */
void nse_write_procs(const struct ns_engine *e);

/* engine_ctl.c: the nscompute channel's socket */
int nse_ctl_open(struct ns_engine *e);         /* bind the PAIR socket in the runtime dir */
void nse_ctl_close(struct ns_engine *e);
/* One message if one comes within wait_ms: 1 (msg initialised, the caller closes it) or 0;
 * -EPIPE (e->err, e->ctl_broken set) when receiving failed: a message is lost. */
int nse_ctl_poll(struct ns_engine *e, zmq_msg_t *msg, int wait_ms);
/* Queue one message without waiting: 0, -EAGAIN (queue full), -EPIPE. */
int nse_ctl_try_send(struct ns_engine *e, const void *buf, size_t n);

/* engine_keeper.c */
/* Fork the keeper for session e->id (before the session is created). */
int nse_keeper_start(struct ns_engine *e);
/* Tell it about a child's process group (on) or that it is gone (off). */
void nse_keeper_child(struct ns_engine *e, pid_t pid, bool on);
/* Restart it if it died (it tells no one; the children are told to it again). */
void nse_keeper_supervise(struct ns_engine *e);
/* The session is torn down: let it go (it removes nothing) and reap it. */
void nse_keeper_stop(struct ns_engine *e);

#endif
