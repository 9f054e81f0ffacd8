/* test_hub_select.c - the pure parts of nsctl pull, by table:
 *  - names: "org/name[:QUANT|/FILE]" accepted and refused as the hub's repo-id rules say;
 *  - GGUF file names read as llama.cpp reads them (shard index/count, quantization tag);
 *  - which files a name means, by llama.cpp's -hf rules (common/download.cpp's
 *    find_best_model / get_split_files, worked out by hand for each listing below): Q4_K_M
 *    first, then Q8_0, then the first model; mmproj/imatrix never; of a split model only the
 *    first shard is a candidate and all shards come along; a quant matched case-insensitively
 *    when followed by '.' or '-' (so "F16" matches "BF16-", as in llama.cpp);
 *  - a safetensors checkpoint: config/tokenizer files and the shards its index names;
 *  - the hub's checksums against values computed by other tools (sha256 test vectors, git's
 *    blob ids from `git hash-object`).
 * Exit 0 pass, 1 fail. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hub.h"
#include "ns_util.h"

static int s_fails;

#define CHECK(cond, ...)                                                                  \
	do {                                                                               \
		if (!(cond)) {                                                             \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
			printf(__VA_ARGS__);                                               \
			printf("\n");                                                      \
			s_fails++;                                                         \
		}                                                                          \
	} while (0)

static void s_ref(const char *text, int want_rc, const char *repo, const char *quant,
		  const char *file)
{
	struct hub_ref r;
	char err[NS_ERR_LEN] = "";
	int rc = hub_ref_parse(text, &r, err, sizeof(err));

	CHECK(rc == want_rc, "hub_ref_parse(\"%s\") = %d, want %d (%s)", text, rc, want_rc, err);
	if (rc || want_rc) {
		CHECK(rc == 0 || (err[0] && !strchr(err, '\n')), "'%s': no one-line error", text);
		return;
	}
	CHECK(!strcmp(r.repo, repo) && !strcmp(r.quant, quant) && !strcmp(r.file, file),
	      "'%s' -> repo '%s' quant '%s' file '%s'", text, r.repo, r.quant, r.file);
}

static void s_split(const char *path, bool gguf, unsigned index, unsigned count,
		    const char *prefix, const char *tag)
{
	struct hub_split s;
	bool got = hub_gguf_split(path, &s);

	CHECK(got == gguf, "hub_gguf_split(%s) = %d", path, got);
	if (!got || !gguf)
		return;
	CHECK(s.index == index && s.count == count && s.prefix_len == strlen(prefix) &&
		      !strncmp(path, prefix, s.prefix_len) && !strcmp(s.tag, tag),
	      "%s -> %u of %u, prefix '%.*s', tag '%s'", path, s.index, s.count,
	      (int)s.prefix_len, path, s.tag);
}

static void s_listing(struct hub_listing *l, const char *const *paths)
{
	memset(l, 0, sizeof(*l));
	for (; *paths; paths++)
		if (hub_listing_add(l, *paths, 1, true, "", false))
			printf("FAIL: out of memory\n"), s_fails++;
	hub_listing_sort(l);
}

/* r picks exactly `want` (NULL-terminated, in order), want[0] opened; or fails with rc and a
 * line holding `words`. */
static void s_pick(const char *const *paths, const char *name, int want_rc,
		   const char *const *want, const char *words)
{
	struct hub_listing l;
	struct hub_ref r;
	struct hub_pick p;
	char err[NS_ERR_LEN] = "";
	size_t n = 0;
	int rc;

	s_listing(&l, paths);
	if (hub_ref_parse(name, &r, err, sizeof(err))) {
		CHECK(0, "%s: %s", name, err);
		hub_listing_free(&l);
		return;
	}
	rc = hub_pick_files(&l, &r, &p, err, sizeof(err));
	CHECK(rc == want_rc, "pick %s = %d, want %d (%s)", name, rc, want_rc, err);
	if (!rc && !want_rc) {
		for (; want[n]; n++)
			CHECK(n < p.n && !strcmp(l.files[p.idx[n]].path, want[n]),
			      "pick %s: file %zu is %s, want %s", name, n,
			      n < p.n ? l.files[p.idx[n]].path : "(none)", want[n]);
		CHECK(p.n == n, "pick %s: %zu files, want %zu", name, p.n, n);
		CHECK(p.kind == HUB_KIND_SAFETENSORS || !strcmp(l.files[p.primary].path, want[0]),
		      "pick %s opens %s, want %s", name, l.files[p.primary].path, want[0]);
	} else if (rc) {
		const char *at = strstr(err, words);

		CHECK(at != NULL, "pick %s: '%s' lacks '%s'", name, err, words);
		/* a list of what the repo has is the whole list */
		CHECK(!at || strncmp(words, "it has:", 7) || !strcmp(at, words),
		      "pick %s: '%s' lists more than '%s'", name, err, words);
	}
	hub_pick_free(&p);
	hub_listing_free(&l);
}

static void s_test_names(void)
{
	s_ref("unsloth/Qwen3.5-4B-GGUF:Q4_K_M", 0, "unsloth/Qwen3.5-4B-GGUF", "Q4_K_M", "");
	s_ref("unsloth/Qwen3.5-4B-GGUF", 0, "unsloth/Qwen3.5-4B-GGUF", "", "");
	s_ref("unsloth/Qwen3.5-4B-GGUF:UD-Q4_K_XL", 0, "unsloth/Qwen3.5-4B-GGUF", "UD-Q4_K_XL", "");
	s_ref("org/m/sub/dir/m-Q8_0.gguf", 0, "org/m", "", "sub/dir/m-Q8_0.gguf");
	s_ref("a_b/c.d-e", 0, "a_b/c.d-e", "", "");
	s_ref("", -EINVAL, 0, 0, 0);
	s_ref("noslash", -EINVAL, 0, 0, 0);
	s_ref("/abs/path", -EINVAL, 0, 0, 0);
	s_ref("a//b", -EINVAL, 0, 0, 0);
	s_ref("org/-name", -EINVAL, 0, 0, 0);
	s_ref("org/name-", -EINVAL, 0, 0, 0);
	s_ref("org/na--me", -EINVAL, 0, 0, 0); /* "--" would be ambiguous in models--org--name */
	s_ref("org/na..me", -EINVAL, 0, 0, 0);
	s_ref("org/na me", -EINVAL, 0, 0, 0);
	s_ref("org/name:", -EINVAL, 0, 0, 0);
	s_ref("org/name:Q4:K", -EINVAL, 0, 0, 0);
	s_ref("org/name:Q4 K", -EINVAL, 0, 0, 0);
	s_ref("org/name/file:Q4", -EINVAL, 0, 0, 0);
	s_ref("org/name/../x", -EINVAL, 0, 0, 0);
	s_ref("org/name/./x", -EINVAL, 0, 0, 0);
	s_ref("org/name/a//b", -EINVAL, 0, 0, 0);
	s_ref("org/name/dir/", -EINVAL, 0, 0, 0);
	s_ref("org/name/a\\b", -EINVAL, 0, 0, 0);
	s_ref("org/name/a\nb", -EINVAL, 0, 0, 0);
	/* the hub's limit: 96 characters */
	char longest[HUB_REPO_MAX + 2];

	memcpy(longest, "o/", 2);
	memset(longest + 2, 'x', HUB_REPO_MAX - 1);
	longest[HUB_REPO_MAX + 1] = '\0';
	s_ref(longest, -EINVAL, 0, 0, 0);
	longest[HUB_REPO_MAX] = '\0';
	s_ref(longest, 0, longest, "", "");

	char folder[256];
	CHECK(!hub_repo_folder("unsloth/Qwen3-8B-GGUF", folder, sizeof(folder)) &&
		      !strcmp(folder, "models--unsloth--Qwen3-8B-GGUF"),
	      "folder %s", folder);
}

static void s_test_split_names(void)
{
	s_split("Qwen3-8B-Q4_K_M.gguf", true, 1, 1, "Qwen3-8B-Q4_K_M", "Q4_K_M");
	s_split("Qwen3.5-4B-UD-Q4_K_XL.gguf", true, 1, 1, "Qwen3.5-4B-UD-Q4_K_XL", "Q4_K_XL");
	s_split("d/m.q8_0-00002-OF-00004.gguf", true, 2, 4, "d/m.q8_0", "Q8_0");
	s_split("BF16/Model-BF16-00001-of-00003.gguf", true, 1, 3, "BF16/Model-BF16", "BF16");
	s_split("x-00001-of-00003.gguf", true, 1, 3, "x", "");
	s_split("model.gguf", true, 1, 1, "model", "");
	s_split("m-0001-of-00003.gguf", true, 1, 1, "m-0001-of-00003", "00003");
	s_split("m-Q4_0-0000a-of-00003.gguf", true, 1, 1, "m-Q4_0-0000a-of-00003", "00003");
	s_split("model.GGUF", false, 0, 0, 0, 0);
	s_split("model.safetensors", false, 0, 0, 0, 0);
}

static void s_test_gguf_picks(void)
{
	static const char *const qwen[] = {
		"README.md", "Qwen3-8B-Q8_0.gguf", "Qwen3-8B-Q4_K_M.gguf",
		"Qwen3-8B-BF16-00002-of-00002.gguf", "Qwen3-8B-BF16-00001-of-00002.gguf",
		"mmproj-Qwen3-8B-F16.gguf", "imatrix_unsloth.gguf", NULL
	};
	s_pick(qwen, "o/q", 0, (const char *const[]){ "Qwen3-8B-Q4_K_M.gguf", NULL }, NULL);
	s_pick(qwen, "o/q:Q4_K_M", 0, (const char *const[]){ "Qwen3-8B-Q4_K_M.gguf", NULL }, NULL);
	s_pick(qwen, "o/q:q8_0", 0, (const char *const[]){ "Qwen3-8B-Q8_0.gguf", NULL }, NULL);
	s_pick(qwen, "o/q:BF16", 0, (const char *const[]){ "Qwen3-8B-BF16-00001-of-00002.gguf",
		"Qwen3-8B-BF16-00002-of-00002.gguf", NULL }, NULL);
	/* llama.cpp's quirk kept: "F16-" is inside "BF16-"; the projector is never a model */
	s_pick(qwen, "o/q:F16", 0, (const char *const[]){ "Qwen3-8B-BF16-00001-of-00002.gguf",
		"Qwen3-8B-BF16-00002-of-00002.gguf", NULL }, NULL);
	s_pick(qwen, "o/q:Q4_K", -ENOENT, NULL, "it has: BF16 (2 shards), Q4_K_M, Q8_0");
	s_pick(qwen, "o/q/Qwen3-8B-BF16-00002-of-00002.gguf", 0, (const char *const[]){
		"Qwen3-8B-BF16-00001-of-00002.gguf", "Qwen3-8B-BF16-00002-of-00002.gguf", NULL },
	       NULL);
	s_pick(qwen, "o/q/mmproj-Qwen3-8B-F16.gguf", 0,
	       (const char *const[]){ "mmproj-Qwen3-8B-F16.gguf", NULL }, NULL);
	s_pick(qwen, "o/q/readme.MD", 0, (const char *const[]){ "README.md", NULL }, NULL);
	s_pick(qwen, "o/q/nope.gguf", -ENOENT, NULL, "nope.gguf is not in o/q");

	static const char *const proj[] = { "m-Q8_0.gguf", "mmproj-m-F16.gguf", "m-imatrix.gguf",
					    NULL };
	s_pick(proj, "o/m:F16", -ENOENT, NULL, "it has: Q8_0");
	s_pick(proj, "o/m", 0, (const char *const[]){ "m-Q8_0.gguf", NULL }, NULL);

	static const char *const no_q4km[] = { "m-Q5_K_M.gguf", "m-Q8_0.gguf", "m-Q6_K.gguf", NULL };
	s_pick(no_q4km, "o/m", 0, (const char *const[]){ "m-Q8_0.gguf", NULL }, NULL);
	static const char *const neither[] = { "m-Q6_K.gguf", "m-Q5_K_M.gguf", NULL };
	s_pick(neither, "o/m", 0, (const char *const[]){ "m-Q5_K_M.gguf", NULL }, NULL);

	/* folders per quantization, split inside */
	static const char *const dirs[] = {
		"Q4_K_M/M-Q4_K_M-00002-of-00002.gguf", "Q4_K_M/M-Q4_K_M-00001-of-00002.gguf",
		"Q8_0/M-Q8_0.gguf", NULL
	};
	s_pick(dirs, "o/m:Q4_K_M", 0, (const char *const[]){ "Q4_K_M/M-Q4_K_M-00001-of-00002.gguf",
		"Q4_K_M/M-Q4_K_M-00002-of-00002.gguf", NULL }, NULL);
	s_pick(dirs, "o/m:Q8_0", 0, (const char *const[]){ "Q8_0/M-Q8_0.gguf", NULL }, NULL);

	/* a split model whose first shard is missing is no candidate; a listing short of a shard */
	static const char *const gap[] = { "m-Q4_K_M-00002-of-00002.gguf", "m-Q8_0-00001-of-00003.gguf",
		"m-Q8_0-00003-of-00003.gguf", NULL };
	s_pick(gap, "o/m:Q4_K_M", -ENOENT, NULL, "no GGUF file of o/m matches Q4_K_M");
	s_pick(gap, "o/m:Q8_0", -ENOENT, NULL, "shard 2 of 3");
	s_pick(gap, "o/m/m-Q4_K_M-00002-of-00002.gguf", -ENOENT, NULL, "shard 1 of 2");

	static const char *const nothing[] = { "README.md", ".gitattributes", NULL };
	s_pick(nothing, "o/m", -ENOENT, NULL, "no GGUF model and no model.safetensors");
	s_pick(nothing, "o/m:Q4_K_M", -ENOENT, NULL, "has no GGUF model file");
}

static void s_test_checkpoint(void)
{
	static const char *const ckpt[] = {
		"README.md", "config.json", "generation_config.json", "tokenizer.json",
		"tokenizer_config.json", "chat_template.jinja", "model.safetensors.index.json",
		"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
		"original/consolidated.safetensors", NULL
	};
	const char *index = "{\"metadata\": {\"total_size\": 8}, \"weight_map\": {"
			    "\"b.weight\": \"model-00002-of-00002.safetensors\", "
			    "\"a.weight\": \"model-00001-of-00002.safetensors\", "
			    "\"c.weight\": \"model-00002-of-00002.safetensors\"}}";
	const char *const want[] = { "config.json", "generation_config.json", "tokenizer.json",
		"tokenizer_config.json", "chat_template.jinja", "model.safetensors.index.json",
		"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors" };
	struct hub_listing l;
	struct hub_ref r;
	struct hub_pick p;
	char err[NS_ERR_LEN] = "";
	int rc;

	s_listing(&l, ckpt);
	hub_ref_parse("o/ckpt", &r, err, sizeof(err));
	rc = hub_pick_files(&l, &r, &p, err, sizeof(err));
	CHECK(!rc && p.kind == HUB_KIND_SAFETENSORS && p.needs_index, "checkpoint: %d %s", rc, err);
	if (!rc) {
		rc = hub_pick_add_shards(&l, &p, index, strlen(index), err, sizeof(err));
		CHECK(!rc && p.n == NS_ARRAY_LEN(want), "shards: %d, %zu files (%s)", rc, p.n, err);
		for (size_t i = 0; i < p.n && i < NS_ARRAY_LEN(want); i++) {
			bool found = false;

			for (size_t k = 0; k < NS_ARRAY_LEN(want); k++)
				found = found || !strcmp(l.files[p.idx[i]].path, want[k]);
			CHECK(found, "checkpoint picked %s", l.files[p.idx[i]].path);
		}
		const char *bad = "{\"weight_map\": {\"x\": \"model-3.safetensors\"}}";

		CHECK(hub_pick_add_shards(&l, &p, bad, strlen(bad), err, sizeof(err)) == -EBADMSG &&
			      strstr(err, "model-3.safetensors"),
		      "index naming a missing file: %s", err);
		CHECK(hub_pick_add_shards(&l, &p, "[1,2", 4, err, sizeof(err)) == -EBADMSG,
		      "broken index accepted");
	}
	hub_pick_free(&p);
	hub_listing_free(&l);

	static const char *const single[] = { "config.json", "model.safetensors", "tokenizer.json", NULL };
	s_pick(single, "o/s", 0, (const char *const[]){ "config.json", "tokenizer.json",
		"model.safetensors", NULL }, NULL);
	static const char *const noconfig[] = { "model.safetensors", NULL };
	s_pick(noconfig, "o/s", -ENOENT, NULL, "no config.json");
}

static void s_hash(const char *oid, const char *data, int want)
{
	struct hub_hash *h = NULL;
	char hex[HUB_OID_MAX + 1] = "";
	int rc = hub_hash_new(&h, oid, strlen(data));

	if (!rc)
		rc = hub_hash_update(h, data, strlen(data));
	if (!rc)
		rc = hub_hash_check(h, oid, hex);
	CHECK(rc == want, "hash of \"%s\" vs %s: %d (got %s), want %d", data, oid, rc, hex, want);
	hub_hash_free(&h);
}

static void s_test_hashes(void)
{
	/* FIPS 180-2 test vectors */
	s_hash("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc", 0);
	s_hash("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", "", 0);
	s_hash("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abd", -EBADMSG);
	/* git hash-object: `printf 'hello\n' | git hash-object --stdin`, and the empty blob */
	s_hash("ce013625030ba8dba906f756967f9e9ca394464a", "hello\n", 0);
	s_hash("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "", 0);
	s_hash("ce013625030ba8dba906f756967f9e9ca394464a", "hellp\n", -EBADMSG);
	CHECK(!hub_oid_valid("xyz") && !hub_oid_valid("ce013625030ba8dba906f756967f9e9ca394464") &&
		      !hub_oid_valid("ce013625030ba8dba906f756967f9e9ca394464g") &&
		      hub_oid_valid("ce013625030ba8dba906f756967f9e9ca394464a"),
	      "oid validity");

	char b[32];
	CHECK(!strcmp(ns_format_eta(0, b, sizeof(b)), "0:00") &&
		      !strcmp(ns_format_eta(61.4, b, sizeof(b)), "1:01") &&
		      !strcmp(ns_format_eta(3725, b, sizeof(b)), "1:02:05") &&
		      !strcmp(ns_format_eta(-1, b, sizeof(b)), "--:--"),
	      "eta %s", b);
}

int main(void)
{
	s_test_names();
	s_test_split_names();
	s_test_gguf_picks();
	s_test_checkpoint();
	s_test_hashes();
	if (s_fails)
		printf("%d failures\n", s_fails);
	return s_fails ? 1 : 0;
}
