/* srv_oai_parse.c - requests of the OpenAI API into srv_params (srv_oai.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "chat.h"
#include "srv_oai.h"
#include "tokenizer.h"

#define S_INVALID "invalid_request_error"
#define S_MAX_MESSAGES 4096

int srv_err(struct srv_error *e, int status, const char *type, const char *code,
	    const char *param, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	e->type = type;
	e->code = code;
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* Fields each endpoint takes; anything else is refused by name, as OpenAI does. */
static const char *const s_common[] = {
	"model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k",
	"min_p", "frequency_penalty", "presence_penalty", "repeat_penalty", "repeat_last_n",
	"seed", "stop", "logprobs", "logit_bias", "n", "user", "ignore_eos", NULL
};
static const char *const s_chat_only[] = {
	"messages", "max_completion_tokens", "top_logprobs", "reasoning_effort",
	"chat_template_kwargs", "response_format", "tools", "tool_choice", "parallel_tool_calls",
	"store", "metadata", NULL
};
static const char *const s_completion_only[] = { "prompt", "echo", "suffix", "best_of", NULL };

static bool s_in(const char *const *list, const char *k)
{
	for (; *list; list++)
		if (!strcmp(*list, k))
			return true;
	return false;
}

static const char *s_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

static int s_wrong_type(struct srv_error *e, const char *name, const json_t *v, const char *want)
{
	return srv_err(e, 400, S_INVALID, "invalid_type", name, "'%s' must be %s, not %s", name,
		       want, s_type_name(v));
}

/* A number in [lo, hi]. Returns 1 when absent or null, 0 with *out, -1 (e filled). */
static int s_number(json_t *o, const char *name, double lo, double hi, double *out,
		    struct srv_error *e)
{
	json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v))
		return 1;
	if (!json_is_number(v))
		return s_wrong_type(e, name, v, "a number");
	*out = json_number_value(v);
	if (!isfinite(*out) || *out < lo || *out > hi)
		return srv_err(e, 400, S_INVALID, "invalid_value", name, "'%s' must be between "
			       "%g and %g (got %g)", name, lo, hi, *out);
	return 0;
}

/* An integer in [lo, hi]: as s_number. */
static int s_integer(json_t *o, const char *name, int64_t lo, int64_t hi, int64_t *out,
		     struct srv_error *e)
{
	json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v))
		return 1;
	if (!json_is_integer(v))
		return s_wrong_type(e, name, v, "an integer");
	*out = json_integer_value(v);
	if (*out < lo || *out > hi)
		return srv_err(e, 400, S_INVALID, "invalid_value", name, "'%s' must be between "
			       "%lld and %lld (got %lld)", name, (long long)lo, (long long)hi,
			       (long long)*out);
	return 0;
}

static int s_bool(json_t *o, const char *name, bool *out, struct srv_error *e)
{
	json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v))
		return 1;
	if (!json_is_boolean(v))
		return s_wrong_type(e, name, v, "a boolean");
	*out = json_is_true(v);
	return 0;
}

static int s_oom(struct srv_error *e)
{
	return srv_err(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* One stop string. */
static int s_stop_add(json_t *it, struct srv_params *p, struct srv_error *e)
{
	const char *s = json_string_value(it);
	size_t n = json_string_length(it);

	if (!s)
		return s_wrong_type(e, "stop", it, "a string");
	if (!n || n > SRV_STOP_LEN || memchr(s, 0, n))
		return srv_err(e, 400, S_INVALID, "invalid_value", "stop", "a stop string must "
			       "have 1 to %d bytes and no NUL", SRV_STOP_LEN);
	if (!(p->stop[p->n_stop] = strdup(s)))
		return s_oom(e);
	p->n_stop++;
	return 0;
}

/* "stop": a string or up to 4 of them. */
static int s_stop(json_t *o, struct srv_params *p, struct srv_error *e)
{
	json_t *v = json_object_get(o, "stop"), *it;
	size_t i;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v))
		return s_stop_add(v, p, e);
	if (!json_is_array(v))
		return s_wrong_type(e, "stop", v, "a string or an array of strings");
	if (json_array_size(v) > SRV_STOP_MAX)
		return srv_err(e, 400, S_INVALID, "invalid_value", "stop", "'stop' takes at most "
			       "%d strings (got %zu)", SRV_STOP_MAX, json_array_size(v));
	json_array_foreach(v, i, it)
		if (s_stop_add(it, p, e) < 0)
			return -1;
	return 0;
}

/* "logit_bias": {"token id": bias in [-100, 100]}. */
static int s_logit_bias(const struct srv_model_info *mi, json_t *o, struct srv_params *p,
			struct srv_error *e)
{
	json_t *v = json_object_get(o, "logit_bias"), *b;
	const char *k;
	size_t n;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return s_wrong_type(e, "logit_bias", v, "an object");
	n = json_object_size(v);
	if (n > 1024)
		return srv_err(e, 400, S_INVALID, "invalid_value", "logit_bias", "'logit_bias' "
			       "takes at most 1024 tokens");
	if (!n)
		return 0;
	p->bias_ids = malloc(n * sizeof(*p->bias_ids));
	p->bias = malloc(n * sizeof(*p->bias));
	if (!p->bias_ids || !p->bias)
		return s_oom(e);
	json_object_foreach(v, k, b) {
		char *end;
		unsigned long id;

		errno = 0;
		id = strtoul(k, &end, 10);
		if (!*k || *end || errno || k[0] < '0' || k[0] > '9' || id >= mi->n_vocab)
			return srv_err(e, 400, S_INVALID, "invalid_value", "logit_bias", "'logit_bias'"
				       " key '%.40s' is not a token id below %u", k, mi->n_vocab);
		if (!json_is_number(b) || !(json_number_value(b) >= -100) ||
		    !(json_number_value(b) <= 100))
			return srv_err(e, 400, S_INVALID, "invalid_value", "logit_bias", "'logit_bias'"
				       " values must be numbers between -100 and 100");
		p->bias_ids[p->n_bias] = (int32_t)id;
		p->bias[p->n_bias++] = (float)json_number_value(b);
	}
	return 0;
}

/* Everything both endpoints take: sampling, stops, streaming. */
static int s_common_fields(const struct srv_model_info *mi, json_t *o, struct srv_params *p,
			   struct srv_error *e)
{
	json_t *v;
	double x;
	int64_t i;
	int rc;

	ns_sampler_params_default(&p->sp);
	if ((rc = s_bool(o, "stream", &p->stream, e)) < 0)
		return rc;
	v = json_object_get(o, "stream_options");
	if (v && !json_is_null(v)) {
		json_t *u;

		if (!json_is_object(v))
			return s_wrong_type(e, "stream_options", v, "an object");
		if (!p->stream)
			return srv_err(e, 400, S_INVALID, "invalid_value", "stream_options",
				       "'stream_options' is only allowed with 'stream': true");
		u = json_object_get(v, "include_usage");
		if (json_object_size(v) != (u ? 1u : 0u))
			return srv_err(e, 400, S_INVALID, "invalid_value", "stream_options",
				       "'stream_options' takes only 'include_usage'");
		if ((rc = s_bool(v, "include_usage", &p->include_usage, e)) < 0)
			return rc;
	}
	if ((rc = s_number(o, "temperature", 0, 2, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.temperature = (float)x;
	if ((rc = s_number(o, "top_p", 0, 1, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.top_p = (float)x;
	if ((rc = s_number(o, "min_p", 0, 1, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.min_p = (float)x;
	if ((rc = s_integer(o, "top_k", 0, 1 << 30, &i, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.top_k = (int32_t)i;
	if ((rc = s_number(o, "frequency_penalty", -2, 2, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.freq_penalty = (float)x;
	if ((rc = s_number(o, "presence_penalty", -2, 2, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.presence_penalty = (float)x;
	if ((rc = s_number(o, "repeat_penalty", 0.01, 100, &x, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.repeat_penalty = (float)x;
	if ((rc = s_integer(o, "repeat_last_n", 0, 1 << 20, &i, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.repeat_last_n = (int32_t)i;
	if ((rc = s_integer(o, "seed", INT64_MIN, INT64_MAX, &i, e)) < 0)
		return rc;
	if (rc == 0)
		p->sp.seed = (uint64_t)i;
	else if (getrandom(&p->sp.seed, sizeof(p->sp.seed), 0) != sizeof(p->sp.seed))
		p->sp.seed = (uint64_t)(uintptr_t)p ^ (uint64_t)time(NULL);
	if ((rc = s_integer(o, "n", 1, 1, &i, e)) < 0)
		return srv_err(e, 400, S_INVALID, "invalid_value", "n", "only 'n': 1 is supported "
			       "(one choice per request)");
	if ((rc = s_integer(o, "max_tokens", 1, INT32_MAX, &i, e)) < 0)
		return rc;
	if (rc == 0)
		p->max_tokens = (uint32_t)i;
	if ((rc = s_bool(o, "ignore_eos", &p->ignore_eos, e)) < 0)
		return rc;
	v = json_object_get(o, "user");
	if (v && !json_is_null(v) && !json_is_string(v))
		return s_wrong_type(e, "user", v, "a string");
	if (s_stop(o, p, e) < 0 || s_logit_bias(mi, o, p, e) < 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------ chat ------------------- */

/* A message's content: a string, or text parts joined. *out is malloc'd. */
static int s_content(json_t *c, size_t idx, char **out, struct srv_error *e)
{
	char param[48];
	json_t *part;
	size_t i, len = 0;
	char *buf;

	snprintf(param, sizeof(param), "messages[%zu].content", idx);
	if (!c || json_is_null(c))
		return (*out = strdup("")) ? 0 : s_oom(e);
	if (json_is_string(c))
		return (*out = strndup(json_string_value(c), json_string_length(c))) ? 0 : s_oom(e);
	if (!json_is_array(c))
		return s_wrong_type(e, param, c, "a string or an array of content parts");
	json_array_foreach(c, i, part) {
		const char *type = json_string_value(json_object_get(part, "type"));
		json_t *t = json_object_get(part, "text");

		if (!json_is_object(part) || !type)
			return srv_err(e, 400, S_INVALID, "invalid_value", param, "a content part "
				       "must be an object with a 'type'");
		if (strcmp(type, "text"))
			return srv_err(e, 400, S_INVALID, "unsupported_content", param, "content "
				       "parts of type '%.40s' are not supported (text only)", type);
		if (!json_is_string(t) || json_object_size(part) != 2)
			return srv_err(e, 400, S_INVALID, "invalid_value", param, "a text part has "
				       "'type' and a string 'text'");
		len += json_string_length(t);
	}
	if (!(buf = malloc(len + 1)))
		return s_oom(e);
	len = 0;
	json_array_foreach(c, i, part) {
		json_t *t = json_object_get(part, "text");

		memcpy(buf + len, json_string_value(t), json_string_length(t));
		len += json_string_length(t);
	}
	buf[len] = 0;
	*out = buf;
	return 0;
}

struct s_msgs {
	struct ns_chat_msg *m;
	char **owned;            /* strings to free */
	size_t n, n_owned;
};

static void s_msgs_free(struct s_msgs *ms)
{
	for (size_t i = 0; i < ms->n_owned; i++)
		free(ms->owned[i]);
	free(ms->owned);
	free(ms->m);
}

static int s_messages(json_t *arr, struct s_msgs *ms, struct srv_error *e)
{
	static const char *const roles[] = { "system", "developer", "user", "assistant", NULL };
	static const char *const keys[] = { "role", "content", "name", "reasoning_content",
					    NULL };
	json_t *m;
	size_t i;

	if (!arr)
		return srv_err(e, 400, S_INVALID, "missing_required_parameter", "messages",
			       "'messages' is required");
	if (!json_is_array(arr))
		return s_wrong_type(e, "messages", arr, "an array");
	if (!json_array_size(arr) || json_array_size(arr) > S_MAX_MESSAGES)
		return srv_err(e, 400, S_INVALID, "invalid_value", "messages", "'messages' must "
			       "hold 1 to %d messages", S_MAX_MESSAGES);
	ms->m = calloc(json_array_size(arr), sizeof(*ms->m));
	ms->owned = calloc(json_array_size(arr) * 2, sizeof(*ms->owned));
	if (!ms->m || !ms->owned)
		return s_oom(e);
	json_array_foreach(arr, i, m) {
		char param[48];
		const char *role = json_string_value(json_object_get(m, "role")), *k;
		json_t *v, *rc;

		snprintf(param, sizeof(param), "messages[%zu]", i);
		if (!json_is_object(m))
			return s_wrong_type(e, param, m, "an object");
		json_object_foreach(m, k, v)
			if (!s_in(keys, k))
				return srv_err(e, 400, S_INVALID, "unsupported_parameter", param,
					       "%s: '%.40s' is not supported (tool calls are not)",
					       param, k);
		if (!role)
			return srv_err(e, 400, S_INVALID, "invalid_value", param, "%s has no string "
				       "'role'", param);
		if (!s_in(roles, role))
			return srv_err(e, 400, S_INVALID, "invalid_value", param, "%s: role '%.40s' "
				       "is not supported (system, developer, user, assistant)", param,
				       role);
		v = json_object_get(m, "name");
		if (v && !json_is_string(v))
			return s_wrong_type(e, "name", v, "a string");
		if (s_content(json_object_get(m, "content"), i, &ms->owned[ms->n_owned], e) < 0)
			return -1;
		ms->m[i].role = role;
		ms->m[i].content = ms->owned[ms->n_owned++];
		rc = json_object_get(m, "reasoning_content");
		if (rc && !json_is_null(rc)) {
			if (!json_is_string(rc))
				return s_wrong_type(e, "reasoning_content", rc, "a string");
			if (!(ms->owned[ms->n_owned] = strdup(json_string_value(rc))))
				return s_oom(e);
			ms->m[i].reasoning = ms->owned[ms->n_owned++];
		}
		ms->n++;
	}
	return 0;
}

/* Fields of the chat endpoint we know and refuse (or take only one value of). */
static int s_chat_unsupported(json_t *o, struct srv_error *e)
{
	json_t *v = json_object_get(o, "tools"), *rf = json_object_get(o, "response_format");
	json_t *tc = json_object_get(o, "tool_choice");

	if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)))
		return srv_err(e, 400, S_INVALID, "unsupported_parameter", "tools", "tools (function "
			       "calling) are not supported");
	if (tc && !json_is_null(tc) && !(json_is_string(tc) &&
					 !strcmp(json_string_value(tc), "none")))
		return srv_err(e, 400, S_INVALID, "unsupported_parameter", "tool_choice",
			       "tool_choice other than \"none\" is not supported");
	if (rf && !json_is_null(rf)) {
		const char *t = json_string_value(json_object_get(rf, "type"));

		if (!json_is_object(rf) || !t || strcmp(t, "text") || json_object_size(rf) != 1)
			return srv_err(e, 400, S_INVALID, "unsupported_parameter", "response_format",
				       "only response_format {\"type\": \"text\"} is supported");
	}
	if ((v = json_object_get(o, "parallel_tool_calls")) && !json_is_null(v) &&
	    !json_is_boolean(v))
		return s_wrong_type(e, "parallel_tool_calls", v, "a boolean");
	if ((v = json_object_get(o, "store")) && !json_is_null(v) && !json_is_false(v))
		return srv_err(e, 400, S_INVALID, "unsupported_parameter", "store", "stored "
			       "completions are not supported ('store' must be false)");
	if ((v = json_object_get(o, "metadata")) && !json_is_null(v) && !json_is_object(v))
		return s_wrong_type(e, "metadata", v, "an object");
	return 0;
}

static int s_chat(const struct srv_model_info *mi, json_t *o, struct srv_params *p,
		  struct srv_error *e)
{
	struct ns_chat_opts co = { .enable_thinking = true,
				   .reasoning_effort = mi->reasoning_effort };
	struct s_msgs ms = { 0 };
	json_t *v;
	char *text = NULL, err[256];
	int64_t i;
	size_t n_ids = 0;
	int rc;

	if (s_chat_unsupported(o, e) < 0)
		return -1;
	if ((rc = s_integer(o, "max_completion_tokens", 1, INT32_MAX, &i, e)) < 0)
		return rc;
	if (rc == 0)
		p->max_tokens = (uint32_t)i;
	v = json_object_get(o, "logprobs");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return s_wrong_type(e, "logprobs", v, "a boolean");
	p->logprobs = json_is_true(v);
	if ((rc = s_integer(o, "top_logprobs", 0, SRV_TOP_LOGPROBS_MAX, &i, e)) < 0)
		return rc;
	if (rc == 0 && !p->logprobs)
		return srv_err(e, 400, S_INVALID, "invalid_value", "top_logprobs", "'top_logprobs' "
			       "needs 'logprobs': true");
	if (rc == 0)
		p->top_logprobs = (uint32_t)i;
	v = json_object_get(o, "reasoning_effort");
	if (v && !json_is_null(v)) {
		const char *r = json_string_value(v);

		if (!r || (strcmp(r, "low") && strcmp(r, "medium") && strcmp(r, "high")))
			return srv_err(e, 400, S_INVALID, "invalid_value", "reasoning_effort",
				       "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
		co.reasoning_effort = !strcmp(r, "low") ? "low" : !strcmp(r, "high") ? "high" :
				      "medium";
	}
	v = json_object_get(o, "chat_template_kwargs");
	if (v && !json_is_null(v)) {
		json_t *t = json_object_get(v, "enable_thinking");

		if (!json_is_object(v) || json_object_size(v) != (t ? 1u : 0u) ||
		    (t && !json_is_boolean(t)))
			return srv_err(e, 400, S_INVALID, "invalid_value", "chat_template_kwargs",
				       "'chat_template_kwargs' takes only a boolean "
				       "'enable_thinking'");
		if (t)
			co.enable_thinking = json_is_true(t);
	}
	if (mi->fam == NS_CHAT_UNKNOWN)
		return srv_err(e, 400, S_INVALID, "no_chat_template", "messages", "this model has "
			       "no chat template we know (tokenizer.chat_template); use "
			       "/v1/completions");
	if (s_messages(json_object_get(o, "messages"), &ms, e) < 0) {
		s_msgs_free(&ms);
		return -1;
	}
	rc = ns_chat_render(mi->fam, ms.m, ms.n, true, &co, &text, err, sizeof(err));
	s_msgs_free(&ms);
	if (rc == -ENOMEM)
		return s_oom(e);
	if (rc < 0)
		return srv_err(e, 400, S_INVALID, "invalid_value", "messages", "%s", err);
	rc = ns_tok_encode(mi->tok, text, strlen(text), ns_chat_family_adds_bos(mi->fam), true,
			   &p->prompt, &n_ids);
	free(text);
	if (rc < 0)
		return s_oom(e);
	p->n_prompt = (uint32_t)n_ids;
	/* Qwen3.5's prompt opens the think block unless enable_thinking is false (the template's
	 * default, which serve keeps, as llama-server does) */
	p->split = mi->fam == NS_CHAT_GPTOSS ? SRV_SPLIT_HARMONY :
		   mi->fam == NS_CHAT_QWEN3 ? SRV_SPLIT_THINK :
		   mi->fam == NS_CHAT_QWEN35 ? (co.enable_thinking ? SRV_SPLIT_THINK_OPEN :
						SRV_SPLIT_THINK) : SRV_SPLIT_NONE;
	return 0;
}

/* ------------------------------------------------------------ completions ------------ */

static int s_completion(const struct srv_model_info *mi, json_t *o, struct srv_params *p,
			struct srv_error *e)
{
	json_t *v = json_object_get(o, "prompt"), *it;
	int64_t i;
	size_t n = 0, k;
	int rc;

	if ((v = json_object_get(o, "echo")) && !json_is_null(v) && !json_is_false(v))
		return srv_err(e, 400, S_INVALID, "unsupported_parameter", "echo", "'echo' is not "
			       "supported");
	if ((v = json_object_get(o, "suffix")) && !json_is_null(v))
		return srv_err(e, 400, S_INVALID, "unsupported_parameter", "suffix", "'suffix' is "
			       "not supported");
	if ((rc = s_integer(o, "best_of", 1, 1, &i, e)) < 0)
		return srv_err(e, 400, S_INVALID, "invalid_value", "best_of", "only 'best_of': 1 "
			       "is supported");
	if ((rc = s_integer(o, "logprobs", 0, 5, &i, e)) < 0)
		return rc;
	if (rc == 0) {
		p->logprobs = true;
		p->top_logprobs = (uint32_t)i;
	}
	v = json_object_get(o, "prompt");
	if (!v)
		return srv_err(e, 400, S_INVALID, "missing_required_parameter", "prompt",
			       "'prompt' is required");
	if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
		v = json_array_get(v, 0); /* one prompt in a list */
	if (json_is_string(v)) {
		rc = ns_tok_encode(mi->tok, json_string_value(v), json_string_length(v), true,
				   false, &p->prompt, &n);
		if (rc < 0)
			return s_oom(e);
	} else if (json_is_array(v) && json_array_size(v) && json_is_integer(json_array_get(v, 0))) {
		/* token ids, used as given */
		if (json_array_size(v) > mi->n_ctx)
			n = json_array_size(v); /* refused below as too long */
		else if (!(p->prompt = malloc(json_array_size(v) * sizeof(*p->prompt))))
			return s_oom(e);
		json_array_foreach(v, k, it) {
			json_int_t id = json_integer_value(it);

			if (!json_is_integer(it) || id < 0 || id >= (json_int_t)mi->n_vocab)
				return srv_err(e, 400, S_INVALID, "invalid_value", "prompt", "prompt "
					       "token %zu is not a token id below %u", k, mi->n_vocab);
			if (p->prompt)
				p->prompt[n++] = (int32_t)id;
		}
	} else if (json_is_array(v) && json_array_size(v) > 1) {
		return srv_err(e, 400, S_INVALID, "unsupported_value", "prompt", "one prompt per "
			       "request (a list of several is not supported)");
	} else {
		return s_wrong_type(e, "prompt", v, "a string or an array of token ids");
	}
	p->n_prompt = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	p->split = SRV_SPLIT_NONE;
	return 0;
}

int srv_oai_parse(const struct srv_model_info *mi, enum srv_kind kind, const char *body,
		  size_t len, struct srv_params *p, struct srv_error *e)
{
	json_error_t je;
	json_t *o, *v;
	const char *k, *model;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	p->kind = kind;
	o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return srv_err(e, 400, S_INVALID, "invalid_json", NULL, "the body is not valid "
			       "JSON: %s (at byte %d)", je.text, je.position);
	if (!json_is_object(o)) {
		srv_err(e, 400, S_INVALID, "invalid_json", NULL, "the body must be a JSON object");
		goto out;
	}
	json_object_foreach(o, k, v) {
		if (!s_in(s_common, k) &&
		    !s_in(kind == SRV_CHAT ? s_chat_only : s_completion_only, k)) {
			srv_err(e, 400, S_INVALID, "unknown_parameter", k, "Unrecognized request "
				"argument supplied: %.60s", k);
			goto out;
		}
	}
	v = json_object_get(o, "model");
	if (!v) {
		srv_err(e, 400, S_INVALID, "missing_required_parameter", "model", "'model' is "
			"required");
		goto out;
	}
	if (!(model = json_string_value(v))) {
		s_wrong_type(e, "model", v, "a string");
		goto out;
	}
	if (strcmp(model, mi->id)) {
		srv_err(e, 404, S_INVALID, "model_not_found", "model", "The model '%.80s' does not "
			"exist; this server serves '%s'", model, mi->id);
		goto out;
	}
	if (!(p->model = strdup(model))) {
		s_oom(e);
		goto out;
	}
	if (s_common_fields(mi, o, p, e) < 0)
		goto out;
	if (kind == SRV_CHAT ? s_chat(mi, o, p, e) < 0 : s_completion(mi, o, p, e) < 0)
		goto out;
	if (!p->n_prompt) {
		srv_err(e, 400, S_INVALID, "invalid_value", kind == SRV_CHAT ? "messages" : "prompt",
			"the prompt is empty (and the vocabulary adds no BOS token)");
		goto out;
	}
	if (p->n_prompt >= mi->n_ctx) {
		srv_err(e, 400, S_INVALID, "context_length_exceeded", kind == SRV_CHAT ? "messages" :
			"prompt", "This model's maximum context length is %u tokens; the prompt has "
			"%u, which leaves no room to generate (-c)", mi->n_ctx, p->n_prompt);
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}
