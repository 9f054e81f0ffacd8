/* nscompute - the compute process of a session (cpu backend; built a second time with the cuda
 * backend as nscompute-cuda).
 *
 *   nscompute --session ID --model PATH [--backend cpu|cuda] [--threads N] [--block-rows N]
 *             [--lookahead N] [-c CTX] [--ctl ENDPOINT] [--vram-budget SIZE] [--act f32|q8]
 *             [--parallel N] [--cache-type-k f32|f16|q8_0] [--cache-type-v f32|f16|q8_0]
 *             [--draft-model PATH] [--draft-mtp] [--moe-predict on|off] [--mmproj PATH]
 *             [--max-patches N] [--min-pixels N] [--max-pixels N]
 *
 * Attaches to the session's nsio as a client, runs the forward pass with every weight streamed
 * through nsio (weights_stream.h) - or, cuda, on the GPU with the plan's VRAM windows resident
 * and the rest streamed through nsio (cfwd.h, cuda_attach.c) - and serves nsctl over one ZeroMQ PAIR socket (proto/ctl_msg.h;
 * default endpoint ipc://RUNDIR/compute.sock). Malformed messages are counted and dropped.
 * SIGTERM/SIGINT, QUIT, or the death of the parent (nsctl): exit. Exit codes: 0 ok, 1 runtime
 * failure, 2 bad usage or input.
 *
 * --draft-model: a small model of the same vocabulary read wholly into this process's RAM, with
 * its own pass and KV cache of -c positions: the drafter of speculative generation
 * (NS_DRAFT_MODEL, compute_draft_model.h). With --backend cuda it is read into VRAM instead,
 * its pass a CUDA one, its arena taken from --vram-budget (cuda_attach.c). It lives here, beside the pass that verifies its
 * drafts, so drafting costs no message or copy per token (docs/decisions.md).
 *
 * --draft-mtp: the model's MTP block (Qwen3.5) read into RAM beside the pass, following its
 * sequence: the drafter of NS_DRAFT_MTP (nscompute/forward/mtp.h).
 *
 * --moe-predict on|off (off): publish each MoE layer's predicted routing one layer early
 * (forward.h moe_predict; nsrouter prefetches it as a weaker hint) and count how many of the
 * real router's experts it named (route_pub.c, the session's predict_* counters).
 *
 * --mmproj: the vision tower of a multimodal model, its matrices streamed through nsio as the
 * model's (nsctl starts nsio with the same --mmproj; only its small tensors are held); the
 * images of an EVAL's prompt come as IMAGES just before it (compute_image.h). The tower runs
 * on the CPU with the cpu backend, on the device with cuda (nscompute/cuda/ctower.h), its
 * output through the host to the CUDA pass (cfwd_eval.c); with cuda, the arena of the largest
 * image --max-patches / --min-pixels / --max-pixels and -c let through comes out of
 * --vram-budget (nsctl passes the limits it sends with IMAGES). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "client.h"
#include "compute_draft_model.h"
#include "compute_eval.h"
#include "compute_image.h"
#include "ctl_msg.h"
#include "forward.h"
#include "gemv.h"
#include "kvcache.h"
#include "model.h"
#include "ns_opt.h"
#include "ns_util.h"
#include "session.h"
#include "weights_stream.h"
#ifdef NS_WITH_CUDA
#include "cfwd.h"
#endif

#ifdef NS_WITH_CUDA
#define S_BACKENDS "cpu|cuda"
#else
#define S_BACKENDS "cpu"
#endif

static volatile sig_atomic_t s_stop; /* set by SIGTERM/SIGINT; read by the serve loop */

static void s_on_signal(int sig)
{
	(void)sig;
	s_stop = 1;
}

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nscompute --session ID --model PATH [--backend %s] [--threads N] "
		   "[--block-rows N] [--lookahead N] [-c CTX] [--ctl ENDPOINT] "
		   "[--vram-budget SIZE] [--act f32|q8] [--parallel N] [--cache-type-k T] "
		   "[--cache-type-v T] [--draft-model PATH] [--draft-mtp] [--moe-predict on|off]\n"
		   "       [--mmproj PATH [--max-patches N] [--min-pixels N] [--max-pixels N]]\n"
		   "  T: f32 (exact, default), f16, q8_0\n", S_BACKENDS);
}

static int s_u64(const char *flag, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (ns_parse_count(v, min, max, out) < 0) {
		fprintf(stderr, "nscompute: %s: bad value '%s' (%" PRIu64 "..%" PRIu64 ")\n", flag,
			v, min, max);
		return -EINVAL;
	}
	return 0;
}

enum {
	O_HELP = 1, O_SESSION, O_MODEL, O_CTL, O_BACKEND, O_ACT, O_CTK, O_CTV, O_VRAM, O_THREADS,
	O_ROWS, O_LOOKAHEAD, O_PARALLEL, O_CTX, O_DRAFT_MODEL, O_MOE_PREDICT, O_MMPROJ,
	O_DRAFT_MTP, O_MAX_PATCHES, O_MIN_PIXELS, O_MAX_PIXELS,
};

/* The spellings nsctl passes (engine_args.c), and llama.cpp's where they mean the same. */
static const struct ns_opt s_opts[] = {
	{ "help", "-h", NS_OPT_SWITCH, O_HELP },
	{ "session", NULL, NS_OPT_VALUE, O_SESSION },
	{ "model", "-m", NS_OPT_VALUE, O_MODEL },
	{ "draft-model", NULL, NS_OPT_VALUE, O_DRAFT_MODEL },
	{ "draft-mtp", NULL, NS_OPT_SWITCH, O_DRAFT_MTP },
	{ "mmproj", NULL, NS_OPT_VALUE, O_MMPROJ },
	{ "max-patches", NULL, NS_OPT_VALUE, O_MAX_PATCHES },
	{ "min-pixels", NULL, NS_OPT_VALUE, O_MIN_PIXELS },
	{ "max-pixels", NULL, NS_OPT_VALUE, O_MAX_PIXELS },
	{ "ctl", NULL, NS_OPT_VALUE, O_CTL },
	{ "backend", NULL, NS_OPT_VALUE, O_BACKEND },
	{ "act", NULL, NS_OPT_VALUE, O_ACT },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, O_CTV },
	{ "vram-budget", NULL, NS_OPT_VALUE, O_VRAM },
	{ "threads", "-t", NS_OPT_VALUE, O_THREADS },
	{ "block-rows", NULL, NS_OPT_VALUE, O_ROWS },
	{ "lookahead", NULL, NS_OPT_VALUE, O_LOOKAHEAD },
	{ "parallel", "-np", NS_OPT_VALUE, O_PARALLEL },
	{ "ctx-size", "-c --ctx", NS_OPT_VALUE, O_CTX },
	{ "moe-predict", NULL, NS_OPT_VALUE, O_MOE_PREDICT },
};

/* One option (opt NULL: an argument, refused) spelled o: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *o, const char *v)
{
	struct nsc_proc *p = user;
	enum ns_kv_type t;
	uint64_t x = 0;
	int rc = 0;

	if (!opt) {
		fprintf(stderr, "nscompute: unexpected argument '%s' (try --help)\n", v);
		return -EINVAL;
	}
	switch (opt->id) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_SESSION:
		p->session = v;
		break;
	case O_MODEL:
		p->model_path = v;
		break;
	case O_DRAFT_MODEL:
		p->draft_path = v;
		break;
	case O_DRAFT_MTP:
		p->draft_mtp = true;
		break;
	case O_MMPROJ:
		p->mmproj_path = v;
		break;
	case O_MAX_PATCHES: /* nsctl's image limits: the largest image's VRAM (cuda_attach.c) */
		rc = s_u64(o, v, 1, 1u << 24, &p->img_max_tokens);
		break;
	case O_MIN_PIXELS:
		rc = s_u64(o, v, 1, 1ull << 40, &p->img_min_pixels);
		break;
	case O_MAX_PIXELS:
		rc = s_u64(o, v, 1, 1ull << 40, &p->img_max_pixels);
		break;
	case O_CTL:
		p->endpoint = v;
		break;
	case O_BACKEND:
#ifdef NS_WITH_CUDA
		p->cuda = !strcmp(v, "cuda");
#endif
		if (strcmp(v, "cpu") && !p->cuda) {
			fprintf(stderr, "nscompute: backend '%s' is not built into this "
				"executable (%s)\n", v, S_BACKENDS);
			return -EINVAL;
		}
		break;
	case O_ACT:
		if (strcmp(v, "f32") && strcmp(v, "q8")) {
			fprintf(stderr, "nscompute: %s f32|q8 (got '%s')\n", o, v);
			return -EINVAL;
		}
		p->act_q8 = !strcmp(v, "q8");
		break;
	case O_CTK:
	case O_CTV:
		if (ns_kv_type_parse(v, &t)) {
			fprintf(stderr, "nscompute: %s f32|f16|q8_0 (got '%s')\n", o, v);
			return -EINVAL;
		}
		*(opt->id == O_CTK ? &p->kv_k : &p->kv_v) = (int)t;
		break;
	case O_VRAM:
		if (ns_parse_bytes(v, &p->vram_budget) < 0) {
			fprintf(stderr, "nscompute: %s: bad size '%s'\n", o, v);
			return -EINVAL;
		}
		break;
	case O_THREADS:
		rc = s_u64(o, v, 0, 1024, &x);
		p->threads = (int)x;
		break;
	case O_ROWS:
		rc = s_u64(o, v, 0, UINT32_MAX, &p->block_rows);
		break;
	case O_LOOKAHEAD:
		rc = s_u64(o, v, 0, 1024, &x);
		p->lookahead = (uint32_t)x;
		p->lookahead_given = true;
		break;
	case O_PARALLEL:
		rc = s_u64(o, v, 1, NS_CMSG_MAX_SEQ, &x);
		p->n_seq = (uint32_t)x;
		break;
	case O_CTX:
		rc = s_u64(o, v, 1, 1u << 24, &x);
		p->n_ctx = (uint32_t)x;
		break;
	case O_MOE_PREDICT:
		if (strcmp(v, "on") && strcmp(v, "off")) {
			fprintf(stderr, "nscompute: %s on|off (got '%s')\n", o, v);
			return -EINVAL;
		}
		p->moe_predict = !strcmp(v, "on");
		break;
	}
	return rc;
}

static int s_parse(struct nsc_proc *p, int argc, char **argv)
{
	int rc = ns_opt_parse("nscompute", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, p);

	if (rc < 0)
		return rc;
	if (p->cuda && p->n_seq > 1) {
		fprintf(stderr, "nscompute: --parallel %u: the cuda backend evaluates one sequence "
			"at a time\n", p->n_seq);
		return -EINVAL;
	}
	return ns_session_args_check("nscompute", p->session, p->model_path);
}

/* A resident read (draft model, MTP block) beats as it goes: the stall watch judges nscompute
 * from its first beat, in ns_client_open, and a read of gigabytes can outlast the stall time. */
static void s_beat(void *c)
{
	ns_client_beat(c);
}

/* Model, nsio client, provider, forward pass. */
static int s_attach(struct nsc_proc *p)
{
	/* SIGTERM (also the kernel's, when nsctl dies) ends a wait for nsio at once */
	struct ns_client_opts co = { .attach_timeout_ms = 20000, .dead_timeout_ms = 15000,
				     .beat_role = NS_BEAT_NSCOMPUTE, .cancel = p->stop };
	struct ns_weights_stream_opts wo = { 0 };
	struct ns_fwd_opts fo = { 0 };
	char err[NS_ERR_LEN];
	int rc;

	rc = ns_model_open_flags(p->model_path, NS_MODEL_OPEN_NO_VOCAB, &p->m, err, sizeof(err));
	if (rc < 0 && rc != -ENOMEM) { /* missing, unreadable or malformed: bad input, exit 2 */
		fprintf(stderr, "nscompute: %s\n", err);
		return -EINVAL;
	}
#ifdef NS_WITH_CUDA
	if (rc == 0 && p->cuda) /* before the provider: no GPU, one line, nothing page-locked */
		rc = ns_cfwd_probe(err, sizeof(err));
#endif
	if (rc == 0)
		rc = ns_client_open(p->session, &co, &p->c, err, sizeof(err));
	if (rc == 0 && p->threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		p->threads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
	}
	if (rc == 0) {
		wo = (struct ns_weights_stream_opts){
			.n_threads = p->threads, .block_rows = p->block_rows,
			.session = p->session, /* its RAM tier, when nsio publishes one */
			.act = p->act_q8 ? NS_ACT_Q8 : NS_ACT_F32,
			.lookahead = p->lookahead_given ? p->lookahead
							: ns_client_default_lookahead(p->c) };
		wo.on_window = nsc_on_window; /* the prompt's PROGRESS */
		wo.on_window_ctx = p;
		p->n_layers = nsc_layers(p->m);
#ifdef NS_WITH_CUDA
		if (p->cuda) { /* page-locked, its rows go to the device by DMA */
			wo.on_ram_map = nsc_cuda_ram_map;
			wo.on_ram_map_ctx = p;
		}
#endif
		rc = ns_weights_stream_new(p->m, p->c, &wo, &p->w, err, sizeof(err));
	}
	if (rc == 0 && p->cuda) {
#ifdef NS_WITH_CUDA
		rc = nsc_cuda_attach(p, err, sizeof(err));
#endif
	} else if (rc == 0) {
		fo.n_ctx = p->n_ctx;
		fo.n_seq = p->n_seq; /* KV-cache slots of STEP (nsctl serve --parallel) */
		fo.kv_k = p->kv_k;
		fo.kv_v = p->kv_v;
		fo.on_route = nsc_route_cb; /* publishes once s_connect opened the socket */
		fo.route_user = p;
		fo.moe_predict = p->moe_predict; /* route_pub.c: the hit rate */
		/* speculative decoding on a recurrent model: a pass's tokens can be cut back
		 * (ns_fwd_mark); nsplan counts the buffers (NSPLAN_ROLLBACK_TOKENS) */
		fo.n_rollback = 1 + NS_CMSG_MAX_DRAFT;
		rc = ns_fwd_new(p->m, p->w, &fo, &p->f, err, sizeof(err));
	}
	/* resident: every tensor read now, once (cuda: into VRAM, by nsc_cuda_attach) */
	if (rc == 0 && p->draft_path && !p->cuda) {
		char derr[NS_ERR_LEN];

		rc = nsc_dmodel_open(p->draft_path, ns_fwd_n_ctx(p->f), p->threads, p->act_q8,
				     s_beat, p->c,
				     ns_fwd_n_vocab(p->f), &p->dm, derr, sizeof(derr));
		if (rc < 0)
			snprintf(err, sizeof(err), "--draft-model %.200s: %.200s", p->draft_path,
				 derr);
	}
	/* resident: the block's tensors read now, once, into RAM (cuda too: the pass hands it
	 * its h rows) */
	if (rc == 0 && p->draft_mtp)
		rc = ns_fwd_mtp_open(p->f, s_beat, p->c, err, sizeof(err));
	if (rc == 0 && p->mmproj_path) /* streamed as the model: nsio serves the mmproj too */
		rc = nsc_tower_open(p->mmproj_path, p->m, &wo, p->c, &p->tower, err, sizeof(err));
#ifdef NS_WITH_CUDA
	if (rc == 0 && p->tower && p->cuda) /* the tower's pass on the device too */
		rc = nsc_tower_cuda(p->tower, p->tower_vram, p->vram_budget != 0, p->c, err,
				    sizeof(err));
#endif
	if (rc < 0)
		fprintf(stderr, "nscompute: %s\n", err);
	return rc;
}

static int s_connect(struct nsc_proc *p)
{
	char rundir[PATH_MAX];
	int linger = 1000;

	if (!p->endpoint) {
		if (ns_session_rundir(p->session, rundir, sizeof(rundir)) < 0 ||
		    snprintf(p->endpoint_buf, sizeof(p->endpoint_buf), "ipc://%s/compute.sock",
			     rundir) >= (int)sizeof(p->endpoint_buf)) {
			fprintf(stderr, "nscompute: runtime dir path too long\n");
			return -ENAMETOOLONG;
		}
		p->endpoint = p->endpoint_buf;
	}
	p->zctx = zmq_ctx_new();
	p->sock = p->zctx ? zmq_socket(p->zctx, ZMQ_PAIR) : NULL;
	if (!p->sock || zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_connect(p->sock, p->endpoint)) {
		fprintf(stderr, "nscompute: cannot connect to %s: %s\n", p->endpoint,
			zmq_strerror(zmq_errno()));
		return -EIO;
	}
	nsc_route_open(p); /* failure: announced, experts read on demand */
	return 0;
}

/* Serve until QUIT, a signal, or the parent's death. */
static int s_serve(struct nsc_proc *p)
{
	pid_t parent = getppid();
	int rc = nsc_send_hello(p);

	while (rc == 0 && !s_stop) {
		zmq_pollitem_t it = { .socket = p->sock, .events = ZMQ_POLLIN };
		zmq_msg_t msg;
		int n = zmq_poll(&it, 1, 100);

		ns_client_beat(p->c); /* idle: every 100 ms */
		if (getppid() != parent)
			return -EPIPE; /* nsctl is gone */
		if (n < 0 && zmq_errno() == EINTR)
			continue;
		if (n <= 0)
			continue;
		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
			int err = zmq_errno();

			zmq_msg_close(&msg);
			if (err == EAGAIN || err == EINTR)
				continue;
			fprintf(stderr, "nscompute: control socket: cannot receive: %s\n",
				zmq_strerror(err));
			return -EPIPE; /* a request is lost: nsctl would wait for it forever */
		}
		rc = nsc_handle(p, zmq_msg_data(&msg), zmq_msg_size(&msg));
		zmq_msg_close(&msg);
		if (rc == 1)
			return 0; /* QUIT */
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct nsc_proc p = { .n_ctx = 4096 };
	struct sigaction sa = { .sa_handler = s_on_signal };
	int rc;

	if (s_parse(&p, argc, argv) < 0)
		return 2;
	p.stop = &s_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = s_attach(&p);
	if (rc == 0)
		rc = s_connect(&p);
	if (rc == 0)
		rc = s_serve(&p);
	if (p.rejected)
		fprintf(stderr, "nscompute: %" PRIu64 " malformed control messages rejected\n",
			p.rejected);
#ifdef NS_WITH_CUDA
	nsc_cuda_detach(&p);
#endif
	nsc_proc_free(&p);
	if (rc == -EINVAL)
		return 2;
	if (rc == -EPERM)
		return NS_EXIT_FOREIGN; /* a segment of the session is not ours */
	return rc < 0 ? 1 : 0;
}
