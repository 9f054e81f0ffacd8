/* hub_ref.c - "org/name[:QUANT|/FILE]": a model on the Hugging Face hub, as the user names it
 * (llama.cpp's -hf repo:quant, plus a file inside the repo), and the paths inside a repo. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "ns_util.h"

static bool s_base_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* The hub's repo ids: base characters, with '/', '.', '-' only between two of them (so no
 * "--" or "..", which would make the cache's folder name ambiguous), exactly one '/'. */
static bool s_repo_valid(const char *s, size_t n)
{
	bool after_special = true;
	int slashes = 0;

	if (n == 0 || n > HUB_REPO_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s_base_char(s[i])) {
			after_special = false;
		} else if (s[i] == '/' || s[i] == '.' || s[i] == '-') {
			if (after_special)
				return false;
			slashes += s[i] == '/';
			after_special = true;
		} else {
			return false;
		}
	}
	return !after_special && slashes == 1;
}

static bool s_quant_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > HUB_QUANT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!s_base_char(s[i]) && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

bool hub_path_valid(const char *s)
{
	size_t n = strlen(s);
	const char *c = s;

	if (n == 0 || n > HUB_FILE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')
			return false;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);

		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			break;
		c = slash + 1;
		if (!*c)
			return false; /* trailing '/' */
	}
	return true;
}

int hub_ref_parse(const char *text, struct hub_ref *r, char *err, size_t errlen)
{
	const char *colon, *slash2;
	size_t repo_len;

	memset(r, 0, sizeof(*r));
	if (!text || !*text) {
		ns_errf(err, errlen, "no model named (want org/name, org/name:QUANT or "
			"org/name/FILE)");
		return -EINVAL;
	}
	colon = strchr(text, ':');
	if (colon && strchr(colon + 1, ':')) {
		ns_errf(err, errlen, "'%s' is not a hub model: more than one ':' (want "
			"org/name:QUANT)", text);
		return -EINVAL;
	}
	slash2 = strchr(text, '/');
	slash2 = slash2 ? strchr(slash2 + 1, '/') : NULL;
	if (colon && slash2 && slash2 < colon) {
		ns_errf(err, errlen, "'%s' names both a file and a quantization (want "
			"org/name:QUANT or org/name/FILE)", text);
		return -EINVAL;
	}
	repo_len = colon ? (size_t)(colon - text) : slash2 ? (size_t)(slash2 - text) : strlen(text);
	if (!s_repo_valid(text, repo_len)) {
		ns_errf(err, errlen, "'%.*s' is not a hub repository id (want org/name: letters, "
			"digits, '_', and '.' or '-' between them, at most %d characters)",
			(int)(repo_len > 200 ? 200 : repo_len), text, HUB_REPO_MAX);
		return -EINVAL;
	}
	memcpy(r->repo, text, repo_len);
	if (colon) {
		if (!s_quant_valid(colon + 1)) {
			ns_errf(err, errlen, "'%s' is not a quantization (want letters, digits, '_', "
				"'.', '-', as in Q4_K_M)", colon + 1);
			return -EINVAL;
		}
		snprintf(r->quant, sizeof(r->quant), "%s", colon + 1);
	} else if (slash2) {
		if (!hub_path_valid(slash2 + 1)) {
			ns_errf(err, errlen, "'%s' is not a file path inside a repository", slash2 + 1);
			return -EINVAL;
		}
		snprintf(r->file, sizeof(r->file), "%s", slash2 + 1);
	}
	return 0;
}

int hub_repo_folder(const char *repo, char *out, size_t outlen)
{
	const char *slash = strchr(repo, '/');
	int n;

	if (!slash)
		return -EINVAL;
	n = snprintf(out, outlen, "models--%.*s--%s", (int)(slash - repo), repo, slash + 1);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}
