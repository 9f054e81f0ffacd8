/* test_tok_json - a tokenizer from a checkpoint's tokenizer.json equals the one from its GGUF
 * conversion.
 *
 * 1. hf/qwen3_5/model-bf16 (the tiny HF models' tokenizer.json, tokenizer_config.json,
 *    chat_template.jinja) opened as a model, against hf/qwen3_5/gguf/qwen3_5-f32.gguf
 *    (llama.cpp's converter): every tokenizer.* key of the conversion equal (tokens, types,
 *    merges, special ids, the chat template); the ids of every case of
 *    hf/tokenizer/tokenizer_tests.json equal the case's (Hugging Face tokenizers') ids and the
 *    conversion's; every text of vocab-hf/hf-qwen3.jsonl and llama.cpp's qwen35 test inputs
 *    tokenizes (all four add_special/parse_special combinations) and detokenizes to the same
 *    ids and bytes with both.
 * 2. A full-size tokenizer.json: the Qwen3 vocabulary of vocab-hf/hf-qwen3-vocab.gguf written
 *    back the way its tokenizer.json holds it (model.vocab of the normal tokens, added_tokens,
 *    merges as pairs, the pre-tokenizer's split pattern; tokenizer_config.json's specials;
 *    config.json's vocab_size and bos_token_id; a third of the merges each as "a b" strings
 *    and as pairs with plain spaces, the other forms the converter reads) and read by
 *    hf_vocab: every tokenizer.* key of
 *    the GGUF equal (152k tokens incl. 267 [PAD] ones, 151k merges, CONTROL / USER_DEFINED
 *    types, pre "qwen2", add_bos false); and with Qwen3.5's split pattern the pre-tokenizer is
 *    "qwen35" and llama.cpp's qwen35 test pairs (Hugging Face ids) pass. Load time printed.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_meta.h"
#include "hf_vocab.h"
#include "json_min.h"
#include "lcpp_cases.h"
#include "model.h"
#include "ns_test.h"
#include "ns_test_gguf.h"
#include "ns_util.h"
#include "tokenizer.h"

static int s_fails;

/* Every tokenizer.* key of want is in got with the same value (and got has no other). */
static void s_same_tokenizer_keys(const char *what, const struct ns_gguf *got,
				  const struct ns_gguf *want)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < want->n_kv; i++) {
		const struct ns_gguf_kv *w = &want->kv[i], *g;

		if (strncmp(w->key.s, "tokenizer.", 10))
			continue;
		g = ns_gguf_find(got, w->key.s);
		NS_EXPECT(s_fails, g && ns_test_gguf_value_eq(&g->value, &w->value), "%s: %s %s",
			  what, w->key.s, g ? "differs" : "missing");
		n++;
	}
	for (uint64_t i = 0; i < got->n_kv; i++)
		NS_EXPECT(s_fails, strncmp(got->kv[i].key.s, "tokenizer.", 10) ||
			  ns_gguf_find(want, got->kv[i].key.s), "%s: extra key %s", what,
			  got->kv[i].key.s);
	printf("%s: %llu tokenizer keys equal the GGUF's\n", what, (unsigned long long)n);
}

/* text tokenized (4 flag combinations) and detokenized alike by a and b; returns mismatches */
static int s_same_ids(const struct ns_tok *a, const struct ns_tok *b, const char *text,
		      size_t len)
{
	int bad = 0;

	for (int f = 0; f < 4; f++) {
		int32_t *ia = NULL, *ib = NULL;
		size_t na = 0, nb = 0, la = 0, lb = 0;
		char *da = NULL, *db = NULL;
		bool add = f & 1, parse = f & 2;

		if (ns_tok_encode(a, text, len, add, parse, &ia, &na) ||
		    ns_tok_encode(b, text, len, add, parse, &ib, &nb) || na != nb ||
		    memcmp(ia, ib, na * sizeof(*ia)) ||
		    ns_tok_detokenize(a, ia, na, false, parse, &da, &la) ||
		    ns_tok_detokenize(b, ib, nb, false, parse, &db, &lb) || la != lb ||
		    memcmp(da, db, la)) {
			if (!bad++)
				fprintf(stderr, "  mismatch (add %d parse %d): \"%.*s\"\n", add, parse,
					(int)(len > 120 ? 120 : len), text);
		}
		free(ia);
		free(ib);
		free(da);
		free(db);
	}
	return bad;
}

/* Every text of a JSONL file of the oracle. */
static int s_same_on_jsonl(const struct ns_tok *a, const struct ns_tok *b, const char *rel,
			   size_t *n_texts)
{
	char path[1024], err[256], *save = NULL;
	size_t len = 0;
	char *buf = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	int bad = 0;

	NS_REQUIRE(buf, "cannot read %s", path);
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		struct jm *c = jm_parse(l, strlen(l), err, sizeof(err));
		const struct jm *t = c ? jm_get(c, "text") : NULL;

		NS_REQUIRE(t, "%s: %s", rel, err);
		bad += s_same_ids(a, b, t->str, t->len) != 0;
		(*n_texts)++;
		jm_free(c);
	}
	free(buf);
	return bad;
}

/* llama.cpp's test pairs (lcpp_cases.h); want_ids: check the .out ids with a (else compare a
 * and b). */
static int s_lcpp(const struct ns_tok *a, const struct ns_tok *b, const char *name,
		  bool want_ids, size_t *n_cases)
{
	char path[1024];
	struct lcpp_cases lc;
	int32_t want[4096];
	size_t tl, nwant;
	const char *ip;
	int bad = 0;

	NS_REQUIRE(lcpp_cases_open(&lc, name, path, sizeof(path)), "cannot read %s", path);
	while (lcpp_cases_next(&lc, &ip, &tl, want, &nwant, 4096)) {
		if (want_ids) {
			int32_t *got = NULL;
			size_t ngot = 0;

			bad += ns_tok_encode(a, ip, tl, false, false, &got, &ngot) || ngot != nwant ||
			       memcmp(got, want, ngot * sizeof(*got));
			free(got);
		} else {
			bad += s_same_ids(a, b, ip, tl) != 0;
		}
		(*n_cases)++;
	}
	lcpp_cases_close(&lc);
	return bad;
}

static struct ns_tok *s_tok(const struct ns_gguf *g, const char *what)
{
	char err[NS_ERR_LEN];
	struct ns_tok *t = ns_tok_new(g, err, sizeof(err));

	NS_REQUIRE(t, "%s: %s", what, err);
	return t;
}

static void s_tiny(void)
{
	char hp[1024], gp[1024], err[NS_ERR_LEN];
	struct ns_model *hf = NULL, *gg = NULL;
	struct ns_tok *a, *b;
	size_t len = 0, n_cases = 0, n_texts = 0, n_lcpp = 0;
	char *buf;
	struct jm *root;
	int bad = 0, bad_hf = 0;

	NS_REQUIRE(ns_model_open(ns_test_oracle_path(hp, sizeof(hp), "hf/qwen3_5/model-bf16"), &hf,
				 err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(gp, sizeof(gp),
						     "hf/qwen3_5/gguf/qwen3_5-f32.gguf"), &gg, err,
				 sizeof(err)) == 0, "%s", err);
	s_same_tokenizer_keys("hf/qwen3_5 tokenizer.json", ns_model_meta(hf), ns_model_meta(gg));
	a = s_tok(ns_model_meta(hf), "tokenizer.json");
	b = s_tok(ns_model_meta(gg), "GGUF");
	buf = ns_test_read_file(ns_test_oracle_path(hp, sizeof(hp),
						    "hf/tokenizer/tokenizer_tests.json"), &len);
	root = buf ? jm_parse(buf, len, err, sizeof(err)) : NULL;
	NS_REQUIRE(root && jm_get(root, "cases"), "tokenizer_tests.json: %s", err);
	for (const struct jm *c = jm_get(root, "cases")->kid; c; c = c->next) {
		const struct jm *text = jm_get(c, "text"), *ids = jm_get(c, "ids");
		int32_t *got = NULL;
		size_t n = 0, i = 0;
		bool ok;

		ok = !ns_tok_encode(a, text->str, text->len, false, false, &got, &n) && n == ids->n;
		for (const struct jm *k = ids->kid; ok && k; k = k->next, i++)
			ok = got[i] == (int32_t)k->num;
		bad_hf += !ok;
		bad += s_same_ids(a, b, text->str, text->len) != 0;
		n_cases++;
		free(got);
	}
	bad += s_same_on_jsonl(a, b, "vocab-hf/hf-qwen3.jsonl", &n_texts);
	bad += s_lcpp(a, b, "ggml-vocab-qwen35.gguf", false, &n_lcpp);
	printf("hf/qwen3_5 tokenizer.json: %zu tokenizer_tests.json cases (%d differ from the "
	       "HF ids), %zu + %zu texts x 4 flag sets: %d differ from the GGUF's tokenizer\n",
	       n_cases, bad_hf, n_texts, n_lcpp, bad);
	NS_EXPECT(s_fails, !bad && !bad_hf && n_cases && n_texts && n_lcpp, "tiny tokenizer.json");
	jm_free(root);
	free(buf);
	ns_tok_destroy(&a);
	ns_tok_destroy(&b);
	ns_model_close(&hf);
	ns_model_close(&gg);
}

/* ---- the full-size Qwen3 vocabulary written as tokenizer.json ---- */

static void s_write_json(const char *dir, const char *name, json_t *j)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	NS_REQUIRE(json_dump_file(j, path, JSON_COMPACT) == 0, "cannot write %s", path);
	json_decref(j);
}

/* s[0:n) with each U+0120 (the byte-level alphabet's space) as a plain space. */
static char *s_plain_spaces(const char *s, size_t n)
{
	char *o = malloc(n + 1);
	size_t k = 0;

	NS_REQUIRE(o, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && s[i] == '\xc4' && s[i + 1] == '\xa0') {
			o[k++] = ' ';
			i++;
		} else {
			o[k++] = s[i];
		}
	}
	o[k] = '\0';
	return o;
}

/* tokenizer.json, tokenizer_config.json and config.json of g's vocabulary into dir. */
static void s_write_qwen3(const char *dir, const struct ns_gguf *g, const char *regex)
{
	const struct ns_gguf_value *tok = ns_gguf_get_arr(g, "tokenizer.ggml.tokens");
	const struct ns_gguf_value *typ = ns_gguf_get_arr(g, "tokenizer.ggml.token_type");
	const struct ns_gguf_value *mer = ns_gguf_get_arr(g, "tokenizer.ggml.merges");
	const struct ns_gguf_str *ts = tok->v.arr.items, *ms = mer->v.arr.items;
	json_t *vocab = json_object(), *added = json_array(), *merges = json_array();
	json_t *root, *model, *pre, *cfg;
	uint64_t eos = 0, pad = 0, bos = 0;

	for (uint64_t i = 0; i < tok->v.arr.n; i++) {
		int64_t t = ns_gguf_arr_i64(typ, i);

		if (t == 1) /* NORMAL: the BPE model's vocabulary */
			json_object_set_new(vocab, ts[i].s, json_integer((json_int_t)i));
		else if (t == 3 || t == 4) /* CONTROL / USER_DEFINED: added tokens */
			json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}",
							       "id", (json_int_t)i, "content", ts[i].s,
							       "single_word", 0, "lstrip", 0, "rstrip", 0,
							       "normalized", 0, "special", t == 3));
		/* UNUSED [PAD] ids are absent, as in the real file */
	}
	for (uint64_t i = 0; i < mer->v.arr.n; i++) {
		const char *sp = strchr(ms[i].s, ' ');

		NS_REQUIRE(sp && !strchr(sp + 1, ' '), "merge %s", ms[i].s);
		if (i % 3 == 0) { /* Qwen3's own form: [a, b] with U+0120 for a space */
			json_array_append_new(merges, json_pack("[s#, s]", ms[i].s,
								(int)(sp - ms[i].s), sp + 1));
		} else if (i % 3 == 1) { /* the older "a b" string form */
			json_array_append_new(merges, json_string(ms[i].s));
		} else { /* [a, b] with plain spaces, which the converter writes as U+0120 */
			char *l = s_plain_spaces(ms[i].s, (size_t)(sp - ms[i].s));
			char *r = s_plain_spaces(sp + 1, strlen(sp + 1));

			json_array_append_new(merges, json_pack("[s, s]", l, r));
			free(l);
			free(r);
		}
	}
	model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE",
			  "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
			  "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab,
			  "merges", merges);
	pre = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type",
			"Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", regex,
			"behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space",
			0, "trim_offsets", 0, "use_regex", 0);
	root = json_pack("{s:s, s:n, s:n, s:o, s:{s:s}, s:o, s:n, s:{s:s}, s:o}", "version", "1.0",
			 "truncation", "padding", "added_tokens", added, "normalizer", "type", "NFC",
			 "pre_tokenizer", pre, "post_processor", "decoder", "type", "ByteLevel",
			 "model", model);
	NS_REQUIRE(root, "json_pack");
	s_write_json(dir, "tokenizer.json", root);
	NS_REQUIRE(ns_gguf_get_u64(g, "tokenizer.ggml.eos_token_id", &eos) &&
		   ns_gguf_get_u64(g, "tokenizer.ggml.padding_token_id", &pad) &&
		   ns_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &bos), "special ids");
	cfg = json_pack("{s:b, s:n, s:s, s:s, s:s}", "add_bos_token", 0, "bos_token",
			"eos_token", ts[eos].s, "pad_token", ts[pad].s, "chat_template",
			ns_gguf_get_str(g, "tokenizer.chat_template"));
	s_write_json(dir, "tokenizer_config.json", cfg);
	s_write_json(dir, "config.json", json_pack("{s:I, s:I}", "vocab_size",
						   (json_int_t)tok->v.arr.n, "bos_token_id",
						   (json_int_t)bos));
}

static struct ns_gguf *s_read_json_vocab(const char *dir, uint32_t n_vocab, double *ms)
{
	char err[NS_ERR_LEN];
	struct ns_gguf *g = ns_gguf_meta_new(dir, 0);
	uint64_t t0 = ns_now_ns();

	NS_REQUIRE(g && ns_hf_vocab_load(dir, n_vocab, g, err, sizeof(err)) == 0, "%s", err);
	*ms = (double)(ns_now_ns() - t0) / 1e6;
	return g;
}

static void s_full_size(void)
{
	/* the split patterns of the Qwen3 and Qwen3.5 tokenizer.json files */
	static const char qwen2_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
		"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
	static const char qwen35_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?"
		"[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
		"\\s+(?!\\S)|\\s+";
	char gp[1280], dir[1024], err[NS_ERR_LEN];
	const char *root = getenv("NS_BUILD_ROOT");
	struct ns_gguf *ref = NULL, *g;
	struct ns_tok *t;
	size_t n_lcpp = 0;
	double ms;
	int bad;

	NS_REQUIRE(ns_gguf_open(ns_test_oracle_path(gp, sizeof(gp), "vocab-hf/hf-qwen3-vocab.gguf"),
				&ref, err, sizeof(err)) == 0, "%s", err);
	snprintf(dir, sizeof(dir), "%.900s/tok-json-%d", root && *root ? root : ".", (int)getpid());
	NS_REQUIRE(mkdir(dir, 0700) == 0, "mkdir %s", dir);
	s_write_qwen3(dir, ref, qwen2_re);
	g = s_read_json_vocab(dir, 151936, &ms);
	printf("Qwen3 tokenizer.json (151936 ids, 151387 merges): read in %.0f ms\n", ms);
	s_same_tokenizer_keys("Qwen3 tokenizer.json", g, ref);
	ns_gguf_close(&g);
	s_write_qwen3(dir, ref, qwen35_re);
	g = s_read_json_vocab(dir, 151936, &ms);
	NS_EXPECT(s_fails, !strcmp(ns_gguf_get_str(g, "tokenizer.ggml.pre"), "qwen35"),
		  "Qwen3.5's pattern is not named qwen35");
	t = s_tok(g, "Qwen3.5-pattern tokenizer.json");
	bad = s_lcpp(t, NULL, "ggml-vocab-qwen35.gguf", true, &n_lcpp);
	printf("Qwen3.5 pattern: pre %s, llama.cpp's qwen35 pairs: %d of %zu differ from the HF "
	       "ids\n", ns_gguf_get_str(g, "tokenizer.ggml.pre"), bad, n_lcpp);
	NS_EXPECT(s_fails, !bad && n_lcpp, "qwen35 pairs");
	ns_tok_destroy(&t);
	ns_gguf_close(&g);
	ns_gguf_close(&ref);
	for (const char *const *f = (const char *const[]){ "tokenizer.json",
			"tokenizer_config.json", "config.json", NULL }; *f; f++) {
		snprintf(gp, sizeof(gp), "%s/%s", dir, *f);
		unlink(gp);
	}
	rmdir(dir);
}

int main(void)
{
	ns_test_require_oracle();
	s_tiny();
	s_full_size();
	return s_fails ? 1 : 0;
}
