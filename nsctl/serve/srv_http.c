/* srv_http.c - see srv_http.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ns_util.h"
#include "srv_http.h"

#define S_WAIT_MS 100 /* how often a waiting request looks at its client */

struct srv_http {
	struct MHD_Daemon *d;
	const struct srv_model_info *mi;
	struct srv_sched *sched;
	const char *api_key;
	size_t max_body;
	uint16_t port;
	atomic_uint busy;       /* generation requests not yet answered in full */
};

enum s_route { S_NONE = 0, S_HEALTH, S_MODELS, S_CHAT, S_COMPLETIONS };

/* One request on a connection (MHD's con_cls). */
struct s_conn {
	struct srv_http *h;
	enum s_route route;
	struct ns_text body;
	bool too_large;
	bool answered;          /* a response is queued */
	uint64_t t0;
};

/* A streamed response: the reader's state (freed by MHD with the response). */
struct s_stream {
	struct srv_http *h;
	struct MHD_Connection *conn;
	struct srv_req *req;    /* a reference of its own */
	struct srv_resp resp;
	struct srv_take total;  /* counts for the usage chunk */
	bool include_usage, role_sent, ended;
	char *pend;             /* SSE bytes not yet handed to MHD */
	size_t pend_len, pend_off;
};

/* ------------------------------------------------------------ responses -------------- */

static enum MHD_Result s_send(struct MHD_Connection *c, unsigned status, const char *body,
			      size_t len, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								  MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* A JSON value as the body (the value is consumed). */
static enum MHD_Result s_send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	enum MHD_Result ret;

	json_decref(j);
	if (!s) {
		static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
					  "\"server_error\",\"param\":null,\"code\":null}}";

		return s_send(c, 500, oom, sizeof(oom) - 1, "application/json");
	}
	ret = s_send(c, status, s, strlen(s), "application/json");
	free(s);
	return ret;
}

static enum MHD_Result s_send_error(struct MHD_Connection *c, const struct srv_error *e)
{
	return s_send_json(c, (unsigned)e->status, srv_oai_error(e));
}

/* ------------------------------------------------------------ the client ------------- */

/* Has the client closed its end? (No way to answer it any more: its request is cancelled.) */
static bool s_client_gone(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;
	char b;

	if (!ci)
		return false;
	p = (struct pollfd){ .fd = ci->connect_fd, .events = POLLIN | POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return true;
	return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static bool s_key_ok(const char *want, const char *auth)
{
	size_t n = strlen(want), m;
	unsigned diff = 0;

	if (!auth || strncmp(auth, "Bearer ", 7))
		return false;
	auth += 7;
	m = strlen(auth);
	/* every byte compared whatever differs first: no timing hint of the key */
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(i < m ? auth[i] : 0);
	return !diff && m == n;
}

static void s_log(struct s_conn *cx, const char *method, const char *url, int status,
		  const struct srv_take *t, uint32_t n_prompt)
{
	double s = (double)(ns_now_ns() - cx->t0) / 1e9;

	if (t)
		fprintf(stderr, "nsctl serve: %s %s %d: prompt %u (cached %u), generated %u, "
			"%s, %.2f s\n", method, url, status, n_prompt, t->n_cached, t->n_gen,
			t->finish == SRV_FIN_ERROR ? t->err :
			srv_finish_name(t->finish) ? srv_finish_name(t->finish) : "-", s);
	else
		fprintf(stderr, "nsctl serve: %s %s %d\n", method, url, status);
}

/* ------------------------------------------------------------ streams ---------------- */

/* Append "data: JSON\n\n" (consumes j). Returns 0 or -ENOMEM. */
static int s_sse(struct s_stream *st, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) : 0;
	char *p;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	p = realloc(st->pend, st->pend_len + n + 9);
	if (!p) {
		free(s);
		return -ENOMEM;
	}
	st->pend = p;
	memcpy(p + st->pend_len, "data: ", 6);
	memcpy(p + st->pend_len + 6, s, n);
	memcpy(p + st->pend_len + 6 + n, "\n\n", 2);
	st->pend_len += n + 8;
	free(s);
	return 0;
}

static int s_sse_raw(struct s_stream *st, const char *line)
{
	size_t n = strlen(line);
	char *p = realloc(st->pend, st->pend_len + n);

	if (!p)
		return -ENOMEM;
	st->pend = p;
	memcpy(p + st->pend_len, line, n);
	st->pend_len += n;
	return 0;
}

/* Wait for the request's next output and turn it into events. Returns 0, or -1 when the
 * stream must end with an error (client gone, out of memory). */
static int s_stream_next(struct s_stream *st)
{
	struct srv_take t = { 0 };
	int rc = 0;

	st->pend_len = st->pend_off = 0;
	if (!st->role_sent && st->resp.kind == SRV_CHAT) { /* the role comes at once */
		st->role_sent = true;
		return s_sse(st, srv_oai_chunk(&st->resp, &t, true, NULL));
	}
	while (!srv_sched_wait(st->h->sched, st->req, S_WAIT_MS))
		if (s_client_gone(st->conn)) {
			srv_sched_cancel(st->h->sched, st->req);
			return -1;
		}
	srv_sched_take(st->h->sched, st->req, &t);
	st->total.n_gen = t.n_gen;
	st->total.n_cached = t.n_cached;
	if (t.answer.len || t.reasoning.len || t.n_lps)
		rc = s_sse(st, srv_oai_chunk(&st->resp, &t, false, NULL));
	if (rc == 0 && t.done) {
		st->ended = true;
		if (t.finish == SRV_FIN_ERROR) {
			struct srv_error e;

			srv_err(&e, t.err_status ? t.err_status : 500,
				t.err_status == 503 ? "unavailable_error" : "server_error", NULL,
				NULL, "%s", t.err);
			rc = s_sse(st, srv_oai_error(&e));
		} else {
			struct srv_take fin = { .finish = t.finish };

			rc = s_sse(st, srv_oai_chunk(&st->resp, &fin, false,
						     srv_finish_name(t.finish)));
			if (rc == 0 && st->include_usage)
				rc = s_sse(st, srv_oai_usage_chunk(&st->resp, &t));
			if (rc == 0)
				rc = s_sse_raw(st, "data: [DONE]\n\n");
		}
		st->total.finish = t.finish;
		snprintf(st->total.err, sizeof(st->total.err), "%s", t.err);
	}
	srv_take_free(&t);
	return rc < 0 ? -1 : 0;
}

static ssize_t s_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct s_stream *st = cls;
	size_t n;

	(void)pos;
	while (st->pend_off == st->pend_len) {
		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (s_stream_next(st) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = st->pend_len - st->pend_off < max ? st->pend_len - st->pend_off : max;
	memcpy(buf, st->pend + st->pend_off, n);
	st->pend_off += n;
	return (ssize_t)n;
}

static void s_stream_free(void *cls)
{
	struct s_stream *st = cls;

	atomic_fetch_sub(&st->h->busy, 1);
	if (!st->ended)
		srv_sched_cancel(st->h->sched, st->req);
	srv_sched_release(st->h->sched, st->req);
	free(st->pend);
	free(st);
}

/* ------------------------------------------------------------ generation ------------- */

static int s_submit_status(int rc, struct srv_error *e)
{
	if (rc == -EBUSY)
		return srv_err(e, 503, "unavailable_error", "queue_full", NULL, "the server is "
			       "busy: every slot is taken and the queue is full; retry later");
	return srv_err(e, 503, "unavailable_error", "shutting_down", NULL, "the server is "
		       "shutting down");
}

static enum MHD_Result s_whole(struct s_conn *cx, struct MHD_Connection *c, const char *method,
			       const char *url, struct srv_req *r, struct srv_resp *rp,
			       uint32_t n_prompt);

static enum MHD_Result s_generate(struct s_conn *cx, struct MHD_Connection *c,
				  const char *method, const char *url)
{
	struct srv_http *h = cx->h;
	enum srv_kind kind = cx->route == S_CHAT ? SRV_CHAT : SRV_COMPLETION;
	struct srv_params p;
	struct srv_error e;
	struct srv_resp resp;
	struct srv_req *r;
	enum MHD_Result ret;
	uint32_t n_prompt;
	int rc;

	if (srv_oai_parse(h->mi, kind, cx->body.buf ? cx->body.buf : "", cx->body.len, &p,
			  &e) < 0) {
		srv_params_free(&p);
		s_log(cx, method, url, e.status, NULL, 0);
		return s_send_error(c, &e);
	}
	srv_resp_init(&resp, h->mi, kind, &p);
	n_prompt = p.n_prompt;
	if (p.stream) {
		struct s_stream *st = calloc(1, sizeof(*st));
		struct MHD_Response *mr;

		if (!st)
			return srv_params_free(&p), MHD_NO;
		st->include_usage = p.include_usage;
		r = srv_req_new(&p);
		srv_params_free(&p);
		if (!r)
			return free(st), MHD_NO;
		st->h = h;
		atomic_fetch_add(&h->busy, 1); /* until s_stream_free */
		st->conn = c;
		st->req = r;
		st->resp = resp;
		st->resp.model = r->p.model;
		rc = srv_sched_submit(h->sched, r);
		if (rc < 0) {
			srv_sched_release(h->sched, r);
			free(st);
			s_submit_status(rc, &e);
			s_log(cx, method, url, e.status, NULL, 0);
			return s_send_error(c, &e);
		}
		mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, s_reader, st,
						       s_stream_free);
		if (!mr) {
			s_stream_free(st);
			return MHD_NO;
		}
		MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		ret = MHD_queue_response(c, 200, mr);
		MHD_destroy_response(mr);
		s_log(cx, method, url, 200, NULL, 0);
		return ret;
	}
	r = srv_req_new(&p);
	srv_params_free(&p);
	if (!r)
		return MHD_NO;
	atomic_fetch_add(&h->busy, 1);
	ret = s_whole(cx, c, method, url, r, &resp, n_prompt);
	atomic_fetch_sub(&h->busy, 1);
	return ret;
}

/* A request answered whole (stream false): wait for it, answer once. */
static enum MHD_Result s_whole(struct s_conn *cx, struct MHD_Connection *c, const char *method,
			       const char *url, struct srv_req *r, struct srv_resp *rp,
			       uint32_t n_prompt)
{
	struct srv_http *h = cx->h;
	struct srv_resp resp = *rp;
	struct srv_take t = { 0 };
	struct srv_error e;
	enum MHD_Result ret;
	int rc;

	resp.model = r->p.model;
	rc = srv_sched_submit(h->sched, r);
	if (rc < 0) {
		srv_sched_release(h->sched, r);
		s_submit_status(rc, &e);
		s_log(cx, method, url, e.status, NULL, 0);
		return s_send_error(c, &e);
	}
	for (uint64_t seen = ns_now_ns();;) {
		if (srv_sched_wait(h->sched, r, S_WAIT_MS)) {
			srv_sched_take(h->sched, r, &t);
			if (t.done)
				break;
		}
		/* nothing goes back before the end: only the socket says the client left */
		if (ns_now_ns() - seen < S_WAIT_MS * 1000000ull)
			continue;
		seen = ns_now_ns();
		if (s_client_gone(c)) {
			srv_sched_cancel(h->sched, r);
			srv_sched_release(h->sched, r);
			srv_take_free(&t);
			s_log(cx, method, url, 499, NULL, 0);
			return MHD_NO; /* nobody to answer */
		}
	}
	if (t.finish == SRV_FIN_ERROR) {
		srv_err(&e, t.err_status ? t.err_status : 500, t.err_status == 503 ?
			"unavailable_error" : "server_error", NULL, NULL, "%s", t.err);
		ret = s_send_error(c, &e);
	} else {
		ret = s_send_json(c, 200, srv_oai_full(&resp, &t));
	}
	s_log(cx, method, url, t.finish == SRV_FIN_ERROR ? e.status : 200, &t, n_prompt);
	srv_take_free(&t);
	srv_sched_release(h->sched, r);
	return ret;
}

/* ------------------------------------------------------------ routing ---------------- */

static enum MHD_Result s_health(struct srv_http *h, struct MHD_Connection *c)
{
	struct srv_sched_stats st;

	srv_sched_stats(h->sched, &st);
	return s_send_json(c, 200, json_pack("{s:s, s:I, s:I, s:I, s:I}", "status", "ok",
					     "slots_idle", (json_int_t)(st.slots - st.active),
					     "slots_processing", (json_int_t)st.active,
					     "requests_waiting", (json_int_t)st.waiting,
					     "requests_served", (json_int_t)st.served));
}

static enum s_route s_route_of(const char *url, const char **want_method)
{
	static const struct {
		const char *path, *method;
		enum s_route r;
	} routes[] = {
		{ "/health", "GET", S_HEALTH },
		{ "/v1/health", "GET", S_HEALTH },
		{ "/v1/models", "GET", S_MODELS },
		{ "/v1/chat/completions", "POST", S_CHAT },
		{ "/v1/completions", "POST", S_COMPLETIONS },
	};
	size_t n = strcspn(url, "?");

	for (size_t i = 0; i < NS_ARRAY_LEN(routes); i++)
		if (strlen(routes[i].path) == n && !strncmp(url, routes[i].path, n)) {
			*want_method = routes[i].method;
			return routes[i].r;
		}
	return S_NONE;
}

static enum MHD_Result s_access(void *cls, struct MHD_Connection *c, const char *url,
				const char *method, const char *version, const char *upload,
				size_t *upload_size, void **con_cls)
{
	struct srv_http *h = cls;
	struct s_conn *cx = *con_cls;
	struct srv_error e;

	(void)version;
	if (!cx) { /* headers are in: check what needs no body */
		const char *want = NULL, *cl;

		if (!(cx = calloc(1, sizeof(*cx))))
			return MHD_NO;
		cx->h = h;
		cx->t0 = ns_now_ns();
		*con_cls = cx;
		if (h->api_key && !s_key_ok(h->api_key, MHD_lookup_connection_value(
					c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))) {
			cx->answered = true;
			srv_err(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
				"Incorrect or missing API key: send \"Authorization: Bearer KEY\"");
			s_log(cx, method, url, 401, NULL, 0);
			return s_send_error(c, &e);
		}
		cx->route = s_route_of(url, &want);
		if (cx->route == S_NONE || strcmp(method, want)) {
			cx->answered = true;
			if (cx->route == S_NONE)
				srv_err(&e, 404, "invalid_request_error", "unknown_url", NULL,
					"Unknown request URL: %.16s %.200s", method, url);
			else
				srv_err(&e, 405, "invalid_request_error", "method_not_allowed",
					NULL, "%.200s takes %s, not %.16s", url, want, method);
			s_log(cx, method, url, e.status, NULL, 0);
			return s_send_error(c, &e);
		}
		cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > h->max_body)
			cx->too_large = true; /* refused once the body is read (or dropped) */
		return MHD_YES;
	}
	if (cx->answered) { /* an early answer: the rest of the body is not wanted */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!cx->too_large && cx->body.len + *upload_size > h->max_body)
			cx->too_large = true;
		if (!cx->too_large && ns_text_append(&cx->body, upload, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	cx->answered = true;
	if (cx->too_large) {
		srv_err(&e, 413, "invalid_request_error", "request_too_large", NULL, "the request "
			"body is over the server's limit of %zu bytes (--max-body)", h->max_body);
		s_log(cx, method, url, 413, NULL, 0);
		return s_send_error(c, &e);
	}
	switch (cx->route) {
	case S_HEALTH:
		return s_health(h, c);
	case S_MODELS:
		return s_send_json(c, 200, srv_oai_models(h->mi));
	default:
		return s_generate(cx, c, method, url);
	}
}

static void s_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			enum MHD_RequestTerminationCode toe)
{
	struct s_conn *cx = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (!cx)
		return;
	free(cx->body.buf);
	free(cx);
	*con_cls = NULL;
}

static void s_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fprintf(stderr, "nsctl serve: libmicrohttpd: ");
	vfprintf(stderr, fmt, ap);
}

int srv_http_start(const struct srv_http_opts *o, const struct srv_model_info *mi,
		   struct srv_sched *sched, struct srv_http **out, char *err, size_t errlen)
{
	struct srv_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ITC | MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *di;

	*out = NULL;
	if (!h)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	h->mi = mi;
	h->sched = sched;
	h->api_key = o->api_key;
	h->max_body = o->max_body;
	if (inet_pton(AF_INET, o->host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(o->port);
	} else if (inet_pton(AF_INET6, o->host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(o->port);
		flags |= MHD_USE_IPv6;
	} else {
		free(h);
		return ns_errf(err, errlen, "--host '%s' is not a numeric IPv4 or IPv6 address",
			       o->host), -EINVAL;
	}
	h->d = MHD_start_daemon(flags, o->port, NULL, NULL, s_access, h,
				MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_NOTIFY_COMPLETED, s_completed, h,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
				MHD_OPTION_END);
	if (!h->d) {
		int rc = errno ? -errno : -EADDRINUSE;

		free(h);
		return ns_errf(err, errlen, "cannot listen on %s port %u: %s", o->host, o->port,
			       strerror(-rc)), rc;
	}
	di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di && di->port ? di->port : o->port;
	*out = h;
	return 0;
}

uint16_t srv_http_port(const struct srv_http *h)
{
	return h->port;
}

void srv_http_quiesce(struct srv_http *h)
{
	MHD_socket fd = MHD_quiesce_daemon(h->d);

	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

bool srv_http_drain(struct srv_http *h, uint64_t timeout_ms)
{
	uint64_t t0 = ns_now_ns();

	while (atomic_load(&h->busy)) {
		if (ns_now_ns() - t0 > timeout_ms * 1000000ull)
			return false;
		usleep(20000);
	}
	return true;
}

void srv_http_stop(struct srv_http **hp)
{
	struct srv_http *h = hp ? *hp : NULL;

	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
	*hp = NULL;
}
