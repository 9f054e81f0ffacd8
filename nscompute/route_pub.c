/* route_pub.c - publish each MoE layer's router decision for nsrouter (ZeroMQ PUB).
 *
 * nscompute binds ipc://RUNDIR/router.ipc; nsrouter subscribes. One message per layer and
 * chunk: an NS_ZMSG_ROUTER whose expert list is the chunk's distinct experts in ascending id
 * order (the order moe.c multiplies them in) and whose weight is the number of routing slots
 * that chose each one. Sends never block (ZMQ_DONTWAIT, small high-water mark): with no
 * subscriber, or a slow or dead nsrouter, the message is dropped and compute reads on demand,
 * so the tokens never depend on nsrouter.
 * A predicted routing (forward.h moe_predict) goes out the same way as NS_ZMSG_ROUTER_PREDICT,
 * and is scored against the real decision of its layer (s_score). */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "client.h"
#include "compute_eval.h"
#include "forward.h"
#include "session.h"
#include "zmsg.h"

int nsc_route_open(struct nsc_proc *p)
{
	char rundir[PATH_MAX], ep[PATH_MAX + 32];
	int hwm = 64, linger = 0;

	if (!p->zctx || ns_session_rundir(p->session, rundir, sizeof(rundir)) < 0 ||
	    snprintf(ep, sizeof(ep), "ipc://%s/router.ipc", rundir) >= (int)sizeof(ep))
		return -ENAMETOOLONG;
	p->route_sock = zmq_socket(p->zctx, ZMQ_PUB);
	if (!p->route_sock)
		return -EIO;
	if (zmq_setsockopt(p->route_sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(p->route_sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_bind(p->route_sock, ep)) {
		fprintf(stderr, "nscompute: cannot publish router decisions on %s: %s "
			"(reading experts on demand)\n", ep, zmq_strerror(zmq_errno()));
		zmq_close(p->route_sock);
		p->route_sock = NULL;
		return -EIO;
	}
	return 0;
}

void nsc_route_close(struct nsc_proc *p)
{
	if (p->route_sock)
		zmq_close(p->route_sock);
	p->route_sock = NULL;
}

/* A prediction is kept (the experts it names); the real decision of its layer and chunk then
 * counts, in the session's counters, the experts it chose and how many the prediction named.
 * Layers without a prediction (the first, or --moe-predict off) count nothing. */
static void s_score(struct nsc_proc *p, const struct ns_fwd_route *r, const uint32_t *count)
{
	uint64_t chosen = 0, hits = 0;

	if (r->predicted) {
		for (uint32_t e = 0; e < r->n_expert; e++)
			p->pred[e] = count[e] != 0;
		p->pred_layer = r->layer;
		p->pred_pos0 = r->pos0;
		p->pred_n = r->n_tok;
		p->pred_valid = true;
		return;
	}
	if (!p->pred_valid || p->pred_layer != r->layer || p->pred_pos0 != r->pos0 ||
	    p->pred_n != r->n_tok)
		return;
	p->pred_valid = false;
	for (uint32_t e = 0; e < r->n_expert; e++) {
		chosen += count[e] != 0;
		hits += count[e] != 0 && p->pred[e];
	}
	if (p->c) {
		struct ns_stats *st = &ns_client_ctl(p->c)->stats;

		atomic_fetch_add(&st->predict_experts, chosen);
		atomic_fetch_add(&st->predict_hits, hits);
	}
}

int nsc_route_cb(void *user, const struct ns_fwd_route *r)
{
	struct nsc_proc *p = user;
	static const size_t cap = NS_ZMSG_HDR_BYTES + 64 + NS_ZMSG_MAX_EXPERTS * 8;
	unsigned char buf[NS_ZMSG_HDR_BYTES + 64 + NS_ZMSG_MAX_EXPERTS * 8];
	struct ns_zrouter m;
	uint32_t count[NS_ZMSG_MAX_EXPERTS];
	uint64_t n_slot = (uint64_t)r->n_tok * r->n_used;
	int n;

	if (r->n_expert == 0 || r->n_expert > NS_ZMSG_MAX_EXPERTS)
		return 0;
	memset(count, 0, sizeof(count));
	for (uint64_t i = 0; i < n_slot; i++)
		if (r->experts[i] >= 0 && (uint32_t)r->experts[i] < r->n_expert)
			count[r->experts[i]]++;
	s_score(p, r, count);
	if (!p->route_sock)
		return 0;
	m.token = r->pos0;
	m.predicted = r->predicted;
	m.layer = r->layer;
	m.n_used = 0;
	for (uint32_t e = 0; e < r->n_expert; e++) {
		if (!count[e])
			continue;
		m.expert[m.n_used] = e;
		m.weight[m.n_used++] = (float)count[e];
	}
	n = ns_zrouter_encode(&m, buf, cap);
	if (n < 0 || zmq_send(p->route_sock, buf, (size_t)n, ZMQ_DONTWAIT) != n)
		p->route_dropped++;
	else
		p->route_sent++;
	return 0; /* never fail the evaluation over a hint */
}
