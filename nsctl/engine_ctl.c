/* engine_ctl.c - the socket of the control channel to nscompute: one ZeroMQ PAIR socket that
 * nsctl binds at ipc://RUNDIR/compute.sock and nscompute connects to (proto/ctl_msg.h says
 * what travels on it). Waiting with supervision is engine_proc.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "ns_util.h"
#include "session.h"

int nse_ctl_open(struct ns_engine *e)
{
	int linger = 0;

	if (snprintf(e->sock_path, sizeof(e->sock_path), "%s/compute.sock", e->s->rundir) >=
		    (int)sizeof(e->sock_path) || strlen(e->sock_path) >= 100) {
		ns_errf(e->err, sizeof(e->err), "runtime dir path too long for a socket: %s",
			e->s->rundir);
		return -ENAMETOOLONG;
	}
	snprintf(e->endpoint, sizeof(e->endpoint), "ipc://%s", e->sock_path);
	e->zctx = zmq_ctx_new();
	e->sock = e->zctx ? zmq_socket(e->zctx, ZMQ_PAIR) : NULL;
	if (!e->sock || zmq_setsockopt(e->sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_bind(e->sock, e->endpoint)) {
		ns_errf(e->err, sizeof(e->err), "cannot bind %s: %s", e->endpoint,
			zmq_strerror(zmq_errno()));
		return -EIO;
	}
	return 0;
}

void nse_ctl_close(struct ns_engine *e)
{
	if (e->sock)
		zmq_close(e->sock);
	if (e->zctx)
		zmq_ctx_term(e->zctx);
	e->sock = e->zctx = NULL;
	if (e->sock_path[0])
		unlink(e->sock_path);
}

int nse_ctl_poll(struct ns_engine *e, zmq_msg_t *msg, int wait_ms)
{
	zmq_pollitem_t it = { .socket = e->sock, .events = ZMQ_POLLIN };
	int err;

	if (zmq_poll(&it, 1, wait_ms) <= 0)
		return 0;
	zmq_msg_init(msg);
	if (zmq_msg_recv(msg, e->sock, ZMQ_DONTWAIT) >= 0)
		return 1;
	err = zmq_errno();
	zmq_msg_close(msg);
	if (err == EAGAIN || err == EINTR)
		return 0;
	/* a message nscompute sent is lost: what follows would be out of step */
	e->ctl_broken = true;
	ns_errf(e->err, sizeof(e->err), "control socket: cannot receive: %s", zmq_strerror(err));
	return -EPIPE;
}

int nse_ctl_try_send(struct ns_engine *e, const void *buf, size_t n)
{
	if (zmq_send(e->sock, buf, n, ZMQ_DONTWAIT) >= 0)
		return 0;
	if (zmq_errno() == EAGAIN || zmq_errno() == EINTR)
		return -EAGAIN;
	e->ctl_broken = true;
	ns_errf(e->err, sizeof(e->err), "control socket: %s", zmq_strerror(zmq_errno()));
	return -EPIPE;
}
