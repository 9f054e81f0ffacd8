/* srv_http.h - the HTTP side of nsctl serve (libmicrohttpd, one thread per connection):
 * routes, the API key, body limits, JSON responses and server-sent event streams.
 *
 *   GET  /health                 {"status": "ok", slots and queue counts}
 *   GET  /v1/models              the one model served
 *   POST /v1/chat/completions    chat (srv_oai.h), whole or streamed
 *   POST /v1/completions         plain text completion, whole or streamed
 *
 * Every other path is 404, a known path with another method 405, a body over max_body 413;
 * with an API key, a request without "Authorization: Bearer KEY" is 401, whatever its path.
 * Errors are OpenAI's error object. A client that goes away (its socket closed) cancels its
 * request: the scheduler frees its slot at the next step. */
#ifndef NSCTL_SRV_HTTP_H
#define NSCTL_SRV_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_oai.h"
#include "srv_sched.h"

struct srv_http;

struct srv_http_opts {
	const char *host;         /* address to listen on (numeric IPv4 or IPv6) */
	uint16_t port;            /* 0: any free port (srv_http_port tells which) */
	const char *api_key;      /* NULL: none required */
	size_t max_body;          /* bytes of a request body at most */
	uint32_t max_conns;       /* connections at once */
};

/* Listen. app (model info) and sched are borrowed and must outlive the server. Returns 0,
 * or a negative errno with one line in err (address in use, bad address). */
int srv_http_start(const struct srv_http_opts *o, const struct srv_model_info *mi,
		   struct srv_sched *sched, struct srv_http **out, char *err, size_t errlen);
uint16_t srv_http_port(const struct srv_http *h);
/* Stop accepting connections (the listening socket closes); those open go on. */
void srv_http_quiesce(struct srv_http *h);
/* Wait until every generation request has been answered in full (a stream's last event
 * handed to the socket), at most timeout_ms. Returns true when none is left. */
bool srv_http_drain(struct srv_http *h, uint64_t timeout_ms);
/* Close every connection and stop. Requests must have ended (srv_sched_stop). */
void srv_http_stop(struct srv_http **h);

#endif
