/* json_ints.h - just enough JSON to pull integer arrays out of the oracle's sidecars.
 *
 * json_ints(text, "a.b", out, cap, &n) finds the value at key path a -> b (objects only,
 * keys without escapes) and, when it is an array of integers, stores up to cap of them.
 * Returns 0, or -1 when the path is absent, the value is not an integer array, it holds more
 * than cap items, or the text is malformed. Header-only, for tests. */
#ifndef NS_TEST_JSON_INTS_H
#define NS_TEST_JSON_INTS_H

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *json_ws(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/* p at '"': returns just past the closing quote, or NULL. */
static const char *json_skip_string(const char *p)
{
	for (p++; *p; p++) {
		if (*p == '\\') {
			if (!*++p)
				return NULL;
		} else if (*p == '"') {
			return p + 1;
		}
	}
	return NULL;
}

static const char *json_skip_value(const char *p, int depth)
{
	p = json_ws(p);
	if (depth > 64 || !*p)
		return NULL;
	if (*p == '"')
		return json_skip_string(p);
	if (*p == '{' || *p == '[') {
		const char close = *p == '{' ? '}' : ']';

		p = json_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				if (*p != '"' || !(p = json_skip_string(p)))
					return NULL;
				p = json_ws(p);
				if (*p++ != ':')
					return NULL;
			}
			if (!(p = json_skip_value(p, depth + 1)))
				return NULL;
			p = json_ws(p);
			if (*p == ',') {
				p = json_ws(p + 1);
				continue;
			}
			return *p == close ? p + 1 : NULL;
		}
	}
	/* number, true, false, null */
	if (!strchr("-0123456789tfn", *p))
		return NULL;
	while (*p && !strchr(",]} \t\r\n", *p))
		p++;
	return p;
}

/* obj at '{': pointer to the value of key (klen bytes), or NULL. */
static const char *json_member(const char *obj, const char *key, size_t klen)
{
	const char *p = json_ws(obj);

	if (*p != '{')
		return NULL;
	p = json_ws(p + 1);
	while (*p == '"') {
		const char *k = p + 1, *end = json_skip_string(p);

		if (!end)
			return NULL;
		p = json_ws(end);
		if (*p++ != ':')
			return NULL;
		p = json_ws(p);
		if ((size_t)(end - 1 - k) == klen && !memcmp(k, key, klen))
			return p;
		if (!(p = json_skip_value(p, 1)))
			return NULL;
		p = json_ws(p);
		if (*p != ',')
			return NULL;
		p = json_ws(p + 1);
	}
	return NULL;
}

static int json_ints(const char *text, const char *path, int64_t *out, size_t cap, size_t *n)
{
	const char *p = text;

	*n = 0;
	while (*path) {
		const char *dot = strchr(path, '.');
		size_t klen = dot ? (size_t)(dot - path) : strlen(path);

		if (!(p = json_member(p, path, klen)))
			return -1;
		path += klen + (dot ? 1 : 0);
	}
	p = json_ws(p);
	if (*p != '[')
		return -1;
	p = json_ws(p + 1);
	if (*p == ']')
		return 0;
	for (;;) {
		char *end;
		long long v = strtoll(p, &end, 10);

		if (end == p || *n >= cap || (*end != ',' && *end != ']' && !isspace((unsigned char)*end)))
			return -1;
		out[(*n)++] = v;
		p = json_ws(end);
		if (*p == ']')
			return 0;
		if (*p != ',')
			return -1;
		p = json_ws(p + 1);
	}
}

#endif
