/* json_min.c - see json_min.h. Recursive descent, bounded depth. */
#include "json_min.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct s_p {
	const char *s;
	size_t n, i;
	char *err;
	size_t errlen;
	int depth;
};

static void s_ws(struct s_p *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
			       p->s[p->i] == '\r'))
		p->i++;
}

static struct jm *s_fail(struct s_p *p, const char *what)
{
	snprintf(p->err, p->errlen, "json: offset %zu: %s", p->i, what);
	return NULL;
}

static int s_hex4(struct s_p *p, uint32_t *out)
{
	uint32_t v = 0;

	if (p->i + 4 > p->n)
		return -1;
	for (int k = 0; k < 4; k++) {
		char c = p->s[p->i++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t s_utf8(uint32_t cp, char *o)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static char *s_string(struct s_p *p, size_t *len)
{
	size_t start = ++p->i, k = 0;
	char *out;

	/* decoded text is never longer than the escaped text */
	while (p->i < p->n && p->s[p->i] != '"')
		p->i += p->s[p->i] == '\\' ? 2 : 1;
	if (p->i >= p->n)
		return NULL;
	out = malloc(p->i - start + 1);
	if (!out)
		return NULL;
	p->i = start;
	while (p->s[p->i] != '"') {
		char c = p->s[p->i++];
		uint32_t cp, lo;

		if (c != '\\') {
			out[k++] = c;
			continue;
		}
		c = p->s[p->i++];
		switch (c) {
		case 'n': out[k++] = '\n'; break;
		case 't': out[k++] = '\t'; break;
		case 'r': out[k++] = '\r'; break;
		case 'b': out[k++] = '\b'; break;
		case 'f': out[k++] = '\f'; break;
		case 'u':
			if (s_hex4(p, &cp))
				goto bad;
			if (cp >= 0xd800 && cp < 0xdc00 && p->i + 6 <= p->n &&
			    p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
				size_t save = p->i;

				p->i += 2;
				if (!s_hex4(p, &lo) && lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				else
					p->i = save;
			}
			k += s_utf8(cp, out + k);
			break;
		default: out[k++] = c; break; /* \" \\ \/ */
		}
	}
	p->i++;
	out[k] = '\0';
	*len = k;
	return out;
bad:
	free(out);
	return NULL;
}

static struct jm *s_value(struct s_p *p)
{
	struct jm *v, **tail;

	s_ws(p);
	if (p->i >= p->n)
		return s_fail(p, "unexpected end");
	if (++p->depth > 64)
		return s_fail(p, "too deep");
	v = calloc(1, sizeof(*v));
	if (!v)
		return s_fail(p, "out of memory");
	switch (p->s[p->i]) {
	case '{':
	case '[': {
		bool obj = p->s[p->i] == '{';
		char close = obj ? '}' : ']';

		v->type = obj ? JM_OBJ : JM_ARR;
		p->i++;
		tail = &v->kid;
		s_ws(p);
		if (p->i < p->n && p->s[p->i] == close) {
			p->i++;
			break;
		}
		for (;;) {
			char *key = NULL;
			size_t klen;
			struct jm *kid;

			s_ws(p);
			if (obj) {
				if (p->i >= p->n || p->s[p->i] != '"' || !(key = s_string(p, &klen)))
					goto bad;
				s_ws(p);
				if (p->i >= p->n || p->s[p->i++] != ':') {
					free(key);
					goto bad;
				}
			}
			kid = s_value(p);
			if (!kid) {
				free(key);
				jm_free(v);
				return NULL;
			}
			kid->key = key;
			*tail = kid;
			tail = &kid->next;
			v->n++;
			s_ws(p);
			if (p->i < p->n && p->s[p->i] == ',') {
				p->i++;
				continue;
			}
			if (p->i < p->n && p->s[p->i] == close) {
				p->i++;
				break;
			}
			goto bad;
		}
		break;
	}
	case '"':
		v->type = JM_STR;
		v->str = s_string(p, &v->len);
		if (!v->str)
			goto bad;
		break;
	case 't':
	case 'f':
	case 'n':
		if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) {
			v->type = JM_BOOL;
			v->b = true;
			p->i += 4;
		} else if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) {
			v->type = JM_BOOL;
			p->i += 5;
		} else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) {
			p->i += 4;
		} else {
			goto bad;
		}
		break;
	default: {
		char *end;

		v->type = JM_NUM;
		v->num = strtod(p->s + p->i, &end);
		if (end == p->s + p->i)
			goto bad;
		p->i = (size_t)(end - p->s);
	}
	}
	p->depth--;
	return v;
bad:
	jm_free(v);
	return s_fail(p, "syntax error");
}

struct jm *jm_parse(const char *text, size_t n, char *err, size_t errlen)
{
	struct s_p p = { text, n, 0, err, errlen, 0 };

	return s_value(&p);
}

void jm_free(struct jm *v)
{
	while (v) {
		struct jm *next = v->next;

		jm_free(v->kid);
		free(v->str);
		free(v->key);
		free(v);
		v = next;
	}
}

const struct jm *jm_get(const struct jm *obj, const char *key)
{
	if (!obj || obj->type != JM_OBJ)
		return NULL;
	for (const struct jm *k = obj->kid; k; k = k->next)
		if (!strcmp(k->key, key))
			return k;
	return NULL;
}

const struct jm *jm_at(const struct jm *arr, size_t i)
{
	const struct jm *k = arr ? arr->kid : NULL;

	while (k && i--)
		k = k->next;
	return k;
}
