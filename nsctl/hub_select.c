/* hub_select.c - which files of a repo make the model the user named.
 *
 * GGUF repos hold one model in several quantizations, some split into shards, beside
 * projectors and imatrix files. The rules are llama.cpp's for `-hf repo[:quant]` (its
 * common/download.cpp, read for the behaviour, not copied): a file is a model when it ends in
 * .gguf and its name has none of mmproj, imatrix, or a draft/speculative model's marker; a
 * quant matches a path holding it followed by '.' or '-', case-insensitively, and of a split
 * model only the first shard is a candidate; with no quant, Q4_K_M, then Q8_0, then the first
 * model. The quant is matched as text (llama.cpp builds a regex from it; nobody means one).
 * A repo without GGUF files is read as a Transformers checkpoint. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub.h"
#include "ns_util.h"

/* Names llama.cpp skips as models: projectors, importance matrices, draft models. */
static const char *const s_not_models[] = { "mmproj", "imatrix", "mtp-", "eagle3-", "dflash-",
					    "dspark-" };

/* The files a safetensors checkpoint needs besides its weights, when the repo has them. */
static const char *const s_checkpoint_files[] = {
	"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"tokenizer.model", "special_tokens_map.json", "added_tokens.json", "vocab.json",
	"merges.txt", "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
};

#define S_INDEX_NAME "model.safetensors.index.json"

static bool s_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

static const char *s_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

bool hub_gguf_split(const char *path, struct hub_split *s)
{
	size_t n = strlen(path), p;
	unsigned a, b;
	char of[3];
	int used = 0;

	memset(s, 0, sizeof(*s));
	if (!s_ends_with(path, ".gguf"))
		return false;
	p = n - 5;
	s->index = s->count = 1;
	/* "<prefix>-NNNNN-of-NNNNN": 5 digits each, "of" in any case */
	if (p > 15 && path[p - 15] == '-' &&
	    sscanf(path + p - 14, "%5u-%2c-%5u%n", &a, of, &b, &used) == 3 && used == 14 &&
	    tolower((unsigned char)of[0]) == 'o' && tolower((unsigned char)of[1]) == 'f') {
		bool digits = true;

		for (size_t i = 0; i < 5; i++)
			digits = digits && isdigit((unsigned char)path[p - 14 + i]) &&
				 isdigit((unsigned char)path[p - 5 + i]);
		if (digits) {
			s->index = a;
			s->count = b;
			p -= 15;
		}
	}
	s->prefix_len = p;
	/* the tag: the run of [A-Za-z0-9_] ending the prefix, after a '-' or '.' */
	for (size_t i = p; i > 0; i--) {
		char c = path[i - 1];

		if (isalnum((unsigned char)c) || c == '_')
			continue;
		if ((c == '-' || c == '.') && i < p && p - i <= HUB_QUANT_MAX) {
			for (size_t k = i; k < p; k++)
				s->tag[k - i] = (char)toupper((unsigned char)path[k]);
			s->tag[p - i] = '\0';
		}
		break;
	}
	return true;
}

static bool s_is_model_gguf(const char *path)
{
	const char *base = s_basename(path);

	if (!s_ends_with(path, ".gguf"))
		return false;
	for (size_t i = 0; i < NS_ARRAY_LEN(s_not_models); i++)
		if (strstr(base, s_not_models[i]))
			return false;
	return true;
}

/* The path holds tag followed by '.' or '-', case-insensitively. */
static bool s_has_tag(const char *path, const char *tag)
{
	size_t k = strlen(tag);

	for (const char *c = path; *c; c++)
		if (!strncasecmp(c, tag, k) && (c[k] == '.' || c[k] == '-'))
			return true;
	return false;
}

static int s_push(struct hub_pick *p, size_t i)
{
	if (p->n == p->cap && hub_grow((void **)&p->idx, &p->cap, sizeof(*p->idx)))
		return -ENOMEM;
	p->idx[p->n++] = i;
	return 0;
}

/* A model candidate: a model GGUF that is unsplit or the first shard. */
static bool s_candidate(const char *path)
{
	struct hub_split s;

	return s_is_model_gguf(path) && hub_gguf_split(path, &s) && (s.count <= 1 || s.index == 1);
}

/* "BF16 (2 shards)", "Q4_K_M": how the model at path is shown in a list. */
static void s_model_item(const char *path, char *out, size_t len)
{
	struct hub_split s;
	const char *name;

	hub_gguf_split(path, &s);
	name = s.tag[0] ? s.tag : s_basename(path);
	if (s.count > 1)
		snprintf(out, len, "%s (%u shards)", name, s.count);
	else
		snprintf(out, len, "%s", name);
}

/* "Q4_K_M, Q8_0, BF16 (2 shards)": the models the repo offers, each once, for a line. */
static void s_list_models(const struct hub_listing *l, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < l->n && used + 1 < len; i++) {
		char item[HUB_FILE_MAX + 32], other[HUB_FILE_MAX + 32];
		bool seen = false;
		int n;

		if (!s_candidate(l->files[i].path))
			continue;
		s_model_item(l->files[i].path, item, sizeof(item));
		for (size_t k = 0; k < i && !seen; k++) {
			if (!s_candidate(l->files[k].path))
				continue;
			s_model_item(l->files[k].path, other, sizeof(other));
			seen = !strcmp(item, other); /* the same quant in two folders */
		}
		if (seen)
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", item);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

/* "a.json, b.txt, ..." for a repo that has no model we know. */
static void s_list_files(const struct hub_listing *l, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < l->n && i < 12; i++) {
		int n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", l->files[i].path);

		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
	if (l->n > 12)
		snprintf(out + used, len - used, ", ... (%zu files)", l->n);
	if (!l->n)
		snprintf(out, len, "no files");
}

/* Every shard of the split model whose first shard is l->files[first], in order. */
static int s_add_shards(const struct hub_listing *l, size_t first, struct hub_pick *p,
			char *err, size_t errlen)
{
	struct hub_split s0;
	const char *p0 = l->files[first].path;
	int rc;

	hub_gguf_split(p0, &s0);
	if (s0.count <= 1)
		return s_push(p, first);
	for (unsigned want = 1; want <= s0.count; want++) {
		size_t found = l->n;

		for (size_t i = 0; i < l->n; i++) {
			struct hub_split s;

			if (hub_gguf_split(l->files[i].path, &s) && s.count == s0.count &&
			    s.index == want && s.prefix_len == s0.prefix_len &&
			    !memcmp(l->files[i].path, p0, s0.prefix_len)) {
				found = i;
				break;
			}
		}
		if (found == l->n) {
			ns_errf(err, errlen, "shard %u of %u of %.*s is not in the repository", want,
				s0.count, (int)s0.prefix_len, p0);
			return -ENOENT;
		}
		if ((rc = s_push(p, found)))
			return rc;
	}
	return 0;
}

static size_t s_find(const struct hub_listing *l, const char *path, bool nocase)
{
	for (size_t i = 0; i < l->n; i++)
		if (nocase ? !strcasecmp(l->files[i].path, path) : !strcmp(l->files[i].path, path))
			return i;
	return l->n;
}

/* A Transformers checkpoint: its config and tokenizer files, then model.safetensors, or the
 * index whose weight_map names the shards (hub_pick_add_shards). Root folder only. */
static int s_pick_safetensors(const struct hub_listing *l, const char *repo, struct hub_pick *p,
			      char *err, size_t errlen)
{
	size_t index = s_find(l, S_INDEX_NAME, false), single = s_find(l, "model.safetensors", false);
	char files[1024];
	int rc;

	if (index == l->n && single == l->n) {
		s_list_files(l, files, sizeof(files));
		ns_errf(err, errlen, "%s has no GGUF model and no model.safetensors (files: %s)",
			repo, files);
		return -ENOENT;
	}
	if (s_find(l, "config.json", false) == l->n) {
		ns_errf(err, errlen, "%s has safetensors weights but no config.json", repo);
		return -ENOENT;
	}
	p->kind = HUB_KIND_SAFETENSORS;
	for (size_t k = 0; k < NS_ARRAY_LEN(s_checkpoint_files); k++) {
		size_t i = s_find(l, s_checkpoint_files[k], false);

		if (i < l->n && (rc = s_push(p, i)))
			return rc;
	}
	p->primary = p->idx[0]; /* config.json: the checkpoint is its folder */
	if (index < l->n) {
		p->needs_index = true;
		p->index_file = index;
		return s_push(p, index);
	}
	return s_push(p, single);
}

int hub_pick_files(const struct hub_listing *l, const struct hub_ref *r, struct hub_pick *p,
		   char *err, size_t errlen)
{
	static const char *const defaults[] = { "Q4_K_M", "Q8_0" };
	char have[1024];
	size_t chosen = l->n;
	int rc;

	memset(p, 0, sizeof(*p));
	if (r->file[0]) {
		size_t i = s_find(l, r->file, false);
		struct hub_split s;

		if (i == l->n)
			i = s_find(l, r->file, true);
		if (i == l->n) {
			s_list_models(l, have, sizeof(have));
			if (!have[0])
				s_list_files(l, have, sizeof(have));
			ns_errf(err, errlen, "%s is not in %s (it has: %s)", r->file, r->repo, have);
			return -ENOENT;
		}
		p->primary = i;
		if (s_is_model_gguf(l->files[i].path) && hub_gguf_split(l->files[i].path, &s) &&
		    s.count > 1) {
			/* any shard named: all of them, the first one opened */
			p->kind = HUB_KIND_GGUF;
			for (size_t k = 0; k < l->n && chosen == l->n; k++) {
				struct hub_split t;

				if (hub_gguf_split(l->files[k].path, &t) && t.index == 1 &&
				    t.count == s.count && t.prefix_len == s.prefix_len &&
				    !memcmp(l->files[k].path, l->files[i].path, s.prefix_len))
					chosen = k;
			}
			if (chosen == l->n) {
				ns_errf(err, errlen, "shard 1 of %u of %.*s is not in the repository",
					s.count, (int)s.prefix_len, l->files[i].path);
				return -ENOENT;
			}
			p->primary = chosen;
			return s_add_shards(l, chosen, p, err, errlen);
		}
		p->kind = s_is_model_gguf(l->files[i].path) ? HUB_KIND_GGUF : HUB_KIND_FILE;
		return s_push(p, i);
	}
	for (size_t t = 0; t < (r->quant[0] ? 1 : NS_ARRAY_LEN(defaults)) && chosen == l->n; t++) {
		const char *tag = r->quant[0] ? r->quant : defaults[t];

		for (size_t i = 0; i < l->n && chosen == l->n; i++)
			if (s_candidate(l->files[i].path) && s_has_tag(l->files[i].path, tag))
				chosen = i;
	}
	if (chosen == l->n && !r->quant[0])
		for (size_t i = 0; i < l->n && chosen == l->n; i++)
			if (s_candidate(l->files[i].path))
				chosen = i;
	if (chosen == l->n) {
		if (!r->quant[0])
			return s_pick_safetensors(l, r->repo, p, err, errlen);
		s_list_models(l, have, sizeof(have));
		if (have[0])
			ns_errf(err, errlen, "no GGUF file of %s matches %s; it has: %s", r->repo,
				r->quant, have);
		else
			ns_errf(err, errlen, "%s has no GGUF model file, so no quantization %s",
				r->repo, r->quant);
		return -ENOENT;
	}
	p->kind = HUB_KIND_GGUF;
	p->primary = chosen;
	rc = s_add_shards(l, chosen, p, err, errlen);
	return rc;
}

static int s_by_index(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

int hub_pick_add_shards(const struct hub_listing *l, struct hub_pick *p, const char *json,
			size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(json, len, 0, &jerr), *map;
	const char *key;
	json_t *v;
	size_t first_shard = p->n;
	int rc = 0;

	map = root ? json_object_get(root, "weight_map") : NULL;
	if (!json_is_object(map) || !json_object_size(map)) {
		ns_errf(err, errlen, "%s is not a safetensors index (no weight_map%s%s)",
			l->files[p->index_file].path, root ? "" : ": ", root ? "" : jerr.text);
		json_decref(root);
		return -EBADMSG;
	}
	json_object_foreach(map, key, v) {
		const char *shard = json_string_value(v);
		size_t i, k;

		if (!shard) {
			ns_errf(err, errlen, "%s: tensor %s maps to no file name",
				l->files[p->index_file].path, key);
			rc = -EBADMSG;
			break;
		}
		i = s_find(l, shard, false);
		if (i == l->n) {
			ns_errf(err, errlen, "%s names %s, which is not in the repository",
				l->files[p->index_file].path, shard);
			rc = -EBADMSG;
			break;
		}
		for (k = 0; k < p->n && p->idx[k] != i; k++)
			;
		if (k == p->n && (rc = s_push(p, i)))
			break;
	}
	json_decref(root);
	if (!rc) /* shards in name order (the listing's), not the map's */
		qsort(p->idx + first_shard, p->n - first_shard, sizeof(*p->idx), s_by_index);
	return rc;
}

void hub_pick_free(struct hub_pick *p)
{
	free(p->idx);
	memset(p, 0, sizeof(*p));
}
