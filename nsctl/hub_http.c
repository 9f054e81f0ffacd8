/* hub_http.c - the hub's HTTP interface over libcurl: small answers (the listing API), what
 * resolve/ says of a file, and ranged GETs of its bytes.
 *
 * The semantics are huggingface_hub's (file_download.py, utils/_http.py, read for them): the
 * metadata of a file is a HEAD of <endpoint>/<repo>/resolve/<rev>/<path> with relative
 * redirects followed (a renamed repo) and absolute ones not (an LFS file's bytes live on a
 * CDN: the redirect's Location); X-Repo-Commit names the commit, X-Linked-Etag (else ETag,
 * quotes and W/ dropped) the content, X-Linked-Size (else Content-Length when not a redirect)
 * its size. The token goes to the endpoint's own host only, never to the CDN (its URL is
 * signed). X-Error-Code says which 4xx it is (RepoNotFound, EntryNotFound, GatedRepo, ...). */
#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hub.h"
#include "ns_util.h"

#define S_REDIRECTS 5             /* relative redirects followed for one file's metadata */
#define S_RETRIES 3               /* a transfer cut by the network is resumed this often */

struct hub_client {
	CURL *curl;
	char endpoint[1024];   /* no trailing '/' */
	char *auth;            /* "Authorization: Bearer ..." or NULL */
	char curl_err[CURL_ERROR_SIZE];
};

/* What one request's headers and body said. Headers of an earlier response in a redirect
 * chain are dropped when the next status line arrives. */
struct s_resp {
	long status;
	char commit[64], linked_etag[160], etag[160], location[4096], error_code[64];
	char error_msg[256], content_range[128];
	char linked_size[32], content_length[32];
	/* a body kept in memory (API answers) */
	char *body;
	size_t len, max;
	bool too_big;
	/* a body streamed to a sink (file bytes) */
	struct hub_client *c;
	struct hub_sink *sink;
	bool started, bad_status, bad_range;
	uint64_t from, size, pos;
	int sink_rc;
};

/* ---- the client ---- */

int hub_client_new(struct hub_client **out, const char *endpoint, const char *token, char *err,
		   size_t errlen)
{
	struct hub_client *c;
	size_t n = strlen(endpoint);

	*out = NULL;
	while (n && endpoint[n - 1] == '/')
		n--;
	if (!n || n >= sizeof(c->endpoint) ||
	    (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))) {
		ns_errf(err, errlen, "HF_ENDPOINT '%s' is not an http:// or https:// URL", endpoint);
		return -EINVAL;
	}
	if (token) {
		for (const char *t = token; *t; t++)
			if ((unsigned char)*t <= ' ' || *t == 0x7f) {
				ns_errf(err, errlen, "HF_TOKEN holds a space or control character");
				return -EINVAL;
			}
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		ns_errf(err, errlen, "libcurl did not initialise");
		return -EIO;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->curl = curl_easy_init())) {
		free(c);
		curl_global_cleanup();
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(c->endpoint, endpoint, n);
	if (token && *token) {
		size_t len = strlen(token) + 32;

		c->auth = malloc(len);
		if (!c->auth) {
			hub_client_free(&c);
			ns_errf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		snprintf(c->auth, len, "Authorization: Bearer %s", token);
	}
	*out = c;
	return 0;
}

void hub_client_free(struct hub_client **c)
{
	if (!*c)
		return;
	curl_easy_cleanup((*c)->curl);
	free((*c)->auth);
	free(*c);
	*c = NULL;
	curl_global_cleanup();
}

const char *hub_client_endpoint(const struct hub_client *c)
{
	return c->endpoint;
}

/* scheme, host and port of url into out ("https://huggingface.co:443"); "" when unparsable. */
static void s_origin(const char *url, char *out, size_t len)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;

	out[0] = '\0';
	if (u && !curl_url_set(u, CURLUPART_URL, url, 0) &&
	    !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) &&
	    !curl_url_get(u, CURLUPART_HOST, &host, 0) &&
	    !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT))
		snprintf(out, len, "%s://%s:%s", scheme, host, port);
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

/* The token goes only where the endpoint is. */
static bool s_same_origin(const struct hub_client *c, const char *url)
{
	char a[1200], b[1200];

	s_origin(c->endpoint, a, sizeof(a));
	s_origin(url, b, sizeof(b));
	return a[0] && !strcmp(a, b);
}

/* location resolved against base (a relative redirect). */
static int s_join(const char *base, const char *location, char *out, size_t len)
{
	CURLU *u = curl_url();
	char *full = NULL;
	int rc = -EBADMSG;

	if (u && !curl_url_set(u, CURLUPART_URL, base, 0) &&
	    !curl_url_set(u, CURLUPART_URL, location, 0) &&
	    !curl_url_get(u, CURLUPART_URL, &full, 0))
		rc = snprintf(out, len, "%s", full) < (int)len ? 0 : -ENAMETOOLONG;
	curl_free(full);
	curl_url_cleanup(u);
	return rc;
}

/* ---- one request ---- */

static void s_header_value(const char *line, size_t n, const char *name, char *out, size_t len)
{
	size_t k = strlen(name), v;

	if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return;
	for (v = k + 1; v < n && (line[v] == ' ' || line[v] == '\t'); v++)
		;
	while (n > v && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
		n--;
	snprintf(out, len, "%.*s", (int)(n - v), line + v);
}

static size_t s_on_header(char *line, size_t size, size_t nitems, void *arg)
{
	struct s_resp *r = arg;
	size_t n = size * nitems;

	if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
		/* a new response (after a redirect): forget the last one's headers */
		memset(r, 0, offsetof(struct s_resp, body));
		return n;
	}
	s_header_value(line, n, "X-Repo-Commit", r->commit, sizeof(r->commit));
	s_header_value(line, n, "X-Linked-Etag", r->linked_etag, sizeof(r->linked_etag));
	s_header_value(line, n, "ETag", r->etag, sizeof(r->etag));
	s_header_value(line, n, "Location", r->location, sizeof(r->location));
	s_header_value(line, n, "X-Error-Code", r->error_code, sizeof(r->error_code));
	s_header_value(line, n, "X-Error-Message", r->error_msg, sizeof(r->error_msg));
	s_header_value(line, n, "Content-Range", r->content_range, sizeof(r->content_range));
	s_header_value(line, n, "X-Linked-Size", r->linked_size, sizeof(r->linked_size));
	s_header_value(line, n, "Content-Length", r->content_length, sizeof(r->content_length));
	return n;
}

static size_t s_on_body_mem(char *buf, size_t size, size_t nitems, void *arg)
{
	struct s_resp *r = arg;
	size_t n = size * nitems;
	char *nb;

	if (n > r->max - r->len) {
		r->too_big = true;
		return 0;
	}
	nb = realloc(r->body, r->len + n + 1);
	if (!nb)
		return 0;
	r->body = nb;
	memcpy(r->body + r->len, buf, n);
	r->len += n;
	r->body[r->len] = '\0';
	return n;
}

static int s_u64(const char *text, uint64_t *out)
{
	return ns_parse_count(text, 0, UINT64_MAX, out);
}

/* "bytes A-B/T": A must be where we asked to start, T the file's size. */
static bool s_range_ok(const char *cr, uint64_t from, uint64_t size)
{
	unsigned long long a, b, t;
	int used = 0;

	return sscanf(cr, "bytes %llu-%llu/%llu%n", &a, &b, &t, &used) == 3 &&
	       (size_t)used == strlen(cr) && a == from && t == size && b + 1 == size;
}

/* Body bytes of a file GET: the status decides where they go (the first call), the sink
 * takes them. Returning less than n ends the transfer. */
static size_t s_on_body_sink(char *buf, size_t size, size_t nitems, void *arg)
{
	struct s_resp *r = arg;
	size_t n = size * nitems;

	if (!r->started) {
		long status = 0;

		curl_easy_getinfo(r->c->curl, CURLINFO_RESPONSE_CODE, &status);
		r->status = status;
		if (status == 206 && r->from > 0) {
			if (!s_range_ok(r->content_range, r->from, r->size)) {
				r->bad_range = true;
				return 0;
			}
			r->pos = r->from;
		} else if (status == 200) {
			r->pos = 0; /* the whole file, whatever we asked for */
		} else {
			r->bad_status = true;
			return 0;
		}
		r->started = true;
		if ((r->sink_rc = r->sink->start(r->sink->arg, r->pos)))
			return 0;
	}
	if (n > r->size - r->pos) {
		ns_errf(r->sink->err, r->sink->errlen, "the server sent more than the %llu bytes "
			"the hub announced", (unsigned long long)r->size);
		r->sink_rc = -EBADMSG;
		return 0;
	}
	if ((r->sink_rc = r->sink->data(r->sink->arg, buf, n)))
		return 0;
	r->pos += n;
	return n;
}

/* A header line appended; false (the list as it was) when out of memory. */
static bool s_add_header(struct curl_slist **h, const char *line)
{
	struct curl_slist *t = curl_slist_append(*h, line);

	if (!t)
		return false;
	*h = t;
	return true;
}

/* One request: a HEAD (redirects not followed: the caller reads them), or a GET (redirects
 * followed) whose body goes to write_fn with r; r->status set. */
static CURLcode s_perform(struct hub_client *c, const char *url, struct s_resp *r,
			  const char *range, curl_write_callback write_fn)
{
	struct curl_slist *h = NULL;
	CURL *k = c->curl;
	CURLcode cc = CURLE_OUT_OF_MEMORY;

	curl_easy_reset(k);
	curl_easy_setopt(k, CURLOPT_URL, url);
	curl_easy_setopt(k, CURLOPT_USERAGENT, "neurostream-nsctl/0.1");
	curl_easy_setopt(k, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(k, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a stalled transfer (under 1 byte/s for a minute) is a failed one, retried */
	curl_easy_setopt(k, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(k, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(k, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(k, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(k, CURLOPT_FOLLOWLOCATION, write_fn ? 1L : 0L);
	curl_easy_setopt(k, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(k, CURLOPT_HEADERFUNCTION, s_on_header);
	curl_easy_setopt(k, CURLOPT_HEADERDATA, r);
	if (write_fn) {
		curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, write_fn);
		curl_easy_setopt(k, CURLOPT_WRITEDATA, r);
	} else {
		curl_easy_setopt(k, CURLOPT_NOBODY, 1L);
	}
	c->curl_err[0] = '\0';
	/* sizes must be the bytes', not a compressed body's; the token only to the hub itself */
	if (s_add_header(&h, "Accept-Encoding: identity") &&
	    (!c->auth || !s_same_origin(c, url) || s_add_header(&h, c->auth)) &&
	    (!range || s_add_header(&h, range))) {
		curl_easy_setopt(k, CURLOPT_HTTPHEADER, h);
		cc = curl_easy_perform(k);
		curl_easy_getinfo(k, CURLINFO_RESPONSE_CODE, &r->status);
	}
	curl_slist_free_all(h);
	return cc;
}

static const char *s_reason(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 416: return "Range Not Satisfiable";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

/* One line for a refused request, as huggingface_hub words its errors; what: "the listing of
 * org/name", "org/name/file". */
static int s_status_error(const struct hub_client *c, const struct s_resp *r, const char *repo,
			  const char *what, char *err, size_t errlen)
{
	const char *msg = r->error_msg, *code = r->error_code;
	char extra[300] = "";

	if (msg[0])
		snprintf(extra, sizeof(extra), " (%s)", msg);
	if (!repo[0]) /* not the hub's API: a CDN or the bytes of a small file */
		goto plain;
	if (r->status == 401 && !strcmp(msg, "Invalid credentials in Authorization header")) {
		ns_errf(err, errlen, "%s: 401 Unauthorized: %s refused HF_TOKEN (invalid "
			"credentials)", what, c->endpoint);
		return -EACCES;
	}
	if (r->status == 401 || (r->status == 404 && !strcmp(code, "RepoNotFound"))) {
		ns_errf(err, errlen, "%s: %ld %s: repository %s not found at %s, or private or gated "
			"%s%s", what, r->status, s_reason(r->status), repo, c->endpoint,
			c->auth ? "and HF_TOKEN gives no access to it" :
				  "(set HF_TOKEN to a token that can read it)", extra);
		return r->status == 401 ? -EACCES : -ENOENT;
	}
	if (r->status == 403) {
		ns_errf(err, errlen, "%s: 403 Forbidden: %s%s", what,
			!strcmp(code, "GatedRepo") ? "a gated repository: accept its conditions on "
						     "the hub with the account of HF_TOKEN" :
						     "HF_TOKEN has no access",
			extra);
		return -EACCES;
	}
	if (r->status == 404) {
		if (!strcmp(code, "RevisionNotFound"))
			ns_errf(err, errlen, "%s: 404: no such revision in %s%s", what, repo, extra);
		else if (!strcmp(code, "EntryNotFound"))
			ns_errf(err, errlen, "%s: 404: no such file in %s%s", what, repo, extra);
		else
			ns_errf(err, errlen, "%s: 404 Not Found at %s%s", what, c->endpoint, extra);
		return -ENOENT;
	}
	if (r->status == 429) {
		ns_errf(err, errlen, "%s: 429 Too Many Requests from %s: try again later%s", what,
			c->endpoint, extra);
		return -EIO;
	}
plain:
	ns_errf(err, errlen, "%s: the server answered %ld %s%s%s", what, r->status,
		s_reason(r->status), extra, r->status >= 500 ? "; try again later" : "");
	return -EIO;
}

static int s_curl_error(const struct hub_client *c, CURLcode cc, const char *what, char *err,
			size_t errlen)
{
	ns_errf(err, errlen, "%s: %s%s%s", what, curl_easy_strerror(cc), c->curl_err[0] ? ": " : "",
		c->curl_err);
	return -EIO;
}

/* ---- a small answer ---- */

int hub_get_small(struct hub_client *c, const char *url, size_t max, const char *repo,
		  const char *what, char **body, size_t *len, char *err, size_t errlen)
{
	struct s_resp r = { .max = max, .c = c };
	CURLcode cc;
	int rc = 0;

	*body = NULL;
	*len = 0;
	cc = s_perform(c, url, &r, NULL, s_on_body_mem);
	if (r.too_big) {
		ns_errf(err, errlen, "%s is larger than %zu bytes", what, max);
		rc = -EBADMSG;
	} else if (cc != CURLE_OK) {
		rc = s_curl_error(c, cc, what, err, errlen);
	} else if (r.status != 200) {
		rc = s_status_error(c, &r, repo, what, err, errlen);
	}
	if (rc) {
		free(r.body);
		return rc;
	}
	*body = r.body;
	*len = r.len;
	return 0;
}

/* ---- a file's metadata ---- */

/* Path segments percent-encoded, '/' kept (huggingface_hub quotes file names so). */
static int s_escape_path(const char *path, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || strchr("/-_.~", *p);

		if (o + 4 >= len)
			return -ENAMETOOLONG;
		if (keep) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return 0;
}

static void s_normalize_etag(const char *in, char *out, size_t len)
{
	size_t n;

	if (!strncmp(in, "W/", 2))
		in += 2;
	if (*in == '"')
		in++;
	n = strlen(in);
	if (n && in[n - 1] == '"')
		n--;
	snprintf(out, len, "%.*s", (int)n, in);
}

int hub_head_file(struct hub_client *c, const char *repo, const char *commit, const char *path,
		  struct hub_meta *m, char *err, size_t errlen)
{
	char url[4096], esc[3 * HUB_FILE_MAX + 1], what[HUB_REPO_MAX + HUB_FILE_MAX + 2];
	struct s_resp r;

	memset(m, 0, sizeof(*m));
	snprintf(what, sizeof(what), "%s/%s", repo, path);
	if (s_escape_path(path, esc, sizeof(esc)) ||
	    snprintf(url, sizeof(url), "%s/%s/resolve/%s/%s", c->endpoint, repo, commit, esc) >=
		    (int)sizeof(url))
		return -ENAMETOOLONG;
	for (int hop = 0;; hop++) {
		CURLcode cc;
		bool redirect;
		const char *etag, *size;

		memset(&r, 0, sizeof(r));
		r.c = c;
		cc = s_perform(c, url, &r, NULL, NULL);
		if (cc != CURLE_OK)
			return s_curl_error(c, cc, what, err, errlen);
		redirect = r.status >= 300 && r.status < 400;
		if (redirect && !r.location[0]) {
			ns_errf(err, errlen, "%s: a %ld redirect without a Location", what, r.status);
			return -EBADMSG;
		}
		if (redirect && r.location[0] == '/') { /* relative: a renamed repo, followed */
			char next[4096];

			if (hop >= S_REDIRECTS || s_join(url, r.location, next, sizeof(next))) {
				ns_errf(err, errlen, "%s: too many redirects", what);
				return -EBADMSG;
			}
			snprintf(url, sizeof(url), "%s", next);
			continue;
		}
		if (!redirect && r.status != 200)
			return s_status_error(c, &r, repo, what, err, errlen);
		etag = r.linked_etag[0] ? r.linked_etag : r.etag;
		size = r.linked_size[0] ? r.linked_size : redirect ? "" : r.content_length;
		s_normalize_etag(etag, m->oid, sizeof(m->oid));
		if (strlen(r.commit) != HUB_COMMIT_LEN || !hub_oid_valid(r.commit)) {
			ns_errf(err, errlen, "%s: the answer has no X-Repo-Commit: %s does not look "
				"like a Hugging Face hub", what, c->endpoint);
			return -EBADMSG;
		}
		if (!hub_oid_valid(m->oid)) {
			ns_errf(err, errlen, "%s: the hub gives no checksum for it (ETag '%s'), so it "
				"cannot be verified", what, etag);
			return -EBADMSG;
		}
		if (s_u64(size, &m->size)) {
			ns_errf(err, errlen, "%s: the hub gives no size for it", what);
			return -EBADMSG;
		}
		snprintf(m->commit, sizeof(m->commit), "%s", r.commit);
		if (redirect && s_join(url, r.location, m->url, sizeof(m->url))) {
			ns_errf(err, errlen, "%s: unusable redirect '%s'", what, r.location);
			return -EBADMSG;
		}
		if (!redirect)
			snprintf(m->url, sizeof(m->url), "%s", url);
		return 0;
	}
}

/* ---- a file's bytes ---- */

int hub_get(struct hub_client *c, const char *url, uint64_t from, uint64_t size,
	    struct hub_sink *s, char *err, size_t errlen)
{
	const char *name = strrchr(url, '/');
	bool restarted = false;

	name = name ? name + 1 : url;
	for (int attempt = 0;; attempt++) {
		struct s_resp r = { .c = c, .sink = s, .from = from, .size = size, .pos = from };
		char range[64];
		CURLcode cc;

		snprintf(range, sizeof(range), "Range: bytes=%llu-", (unsigned long long)from);
		cc = s_perform(c, url, &r, from ? range : NULL, s_on_body_sink);
		if (r.sink_rc) {
			if (s->err != err)
				ns_errf(err, errlen, "%s", s->err);
			return r.sink_rc;
		}
		if (r.bad_range) {
			ns_errf(err, errlen, "the server answered the range request for bytes %llu- "
				"with '%s' (want bytes %llu-%llu/%llu)", (unsigned long long)from,
				r.content_range, (unsigned long long)from,
				(unsigned long long)(size - 1), (unsigned long long)size);
			return -EBADMSG;
		}
		if (r.status == 416 && from > 0 && !restarted) {
			/* what we hold is not a prefix the server knows: start over */
			restarted = true;
			from = 0;
			continue;
		}
		if (cc == CURLE_OK && !r.started && (r.status == 200 || r.status == 206)) {
			/* an empty body: the sink still learns where it starts */
			if ((r.sink_rc = s->start(s->arg, 0))) {
				if (s->err != err)
					ns_errf(err, errlen, "%s", s->err);
				return r.sink_rc;
			}
			r.started = true;
			r.pos = 0;
		}
		if (r.bad_status || (cc == CURLE_OK && r.status != 200 && r.status != 206))
			return s_status_error(c, &r, "", name, err, errlen);
		if (cc == CURLE_OK && r.pos == size)
			return 0;
		/* cut short by the network (or a body that ended early): resume where it stopped */
		if (attempt >= S_RETRIES) {
			if (cc != CURLE_OK)
				return s_curl_error(c, cc, name, err, errlen);
			ns_errf(err, errlen, "%s: the body ended at byte %llu of %llu", name,
				(unsigned long long)r.pos, (unsigned long long)size);
			return -EIO;
		}
		fprintf(stderr, "nsctl pull: %s: %s at byte %llu of %llu; resuming (try %d of %d)\n",
			name, cc != CURLE_OK ? curl_easy_strerror(cc) : "the body ended",
			(unsigned long long)r.pos, (unsigned long long)size, attempt + 2,
			S_RETRIES + 1);
		sleep(1u << attempt);
		from = r.started ? r.pos : from;
	}
}
