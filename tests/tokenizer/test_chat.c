/* test_chat - chat renderings against the reference renderings (Python jinja2 of the real
 * templates) in ../shared/oracle/vocab-hf/chat/, and the family detection.
 *
 * For each chat/<case>.json: the family is detected from the vocabulary GGUF's own
 * tokenizer.chat_template, the messages are rendered with the case's template_kwargs and
 * fixed date, and the bytes must equal chat/<case>.txt; tokenizing that text with
 * parse_special must give the case's ids. A template of no known family must be refused.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "gguf.h"
#include "json_min.h"
#include "ns_test.h"
#include "ns_util.h"
#include "tokenizer.h"

static int s_case(const char *dir, const char *json_name)
{
	char path[2200], err[NS_ERR_LEN];
	size_t jlen = 0, tlen = 0, nmsg;
	char *jtext, *want = NULL, *got = NULL;
	struct jm *c;
	const struct jm *msgs, *kw, *v, *stm;
	struct ns_gguf *g = NULL;
	struct ns_tok *t = NULL;
	struct ns_chat_msg m[16];
	struct ns_chat_opts o = { .enable_thinking = true, .date = "2025-08-05" };
	enum ns_chat_family fam;
	int fails = 1;

	snprintf(path, sizeof(path), "%.1024s/%.256s", dir, json_name);
	jtext = ns_test_read_file(path, &jlen);
	c = jtext ? jm_parse(jtext, jlen, err, sizeof(err)) : NULL;
	if (!c) {
		fprintf(stderr, "FAIL %s: cannot read or parse\n", path);
		free(jtext);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/%.256s", dir, jm_get(c, "rendered_file")->str);
	want = ns_test_read_file(path, &tlen);
	snprintf(path, sizeof(path), "%s/../%.256s", dir, jm_get(c, "vocab")->str);
	if (!want || ns_gguf_open(path, &g, err, sizeof(err))) {
		fprintf(stderr, "FAIL %s: %s\n", json_name, want ? err : "no rendering");
		goto out;
	}
	fam = ns_chat_family_detect(ns_gguf_get_str(g, "tokenizer.chat_template"));
	if (strcmp(ns_chat_family_name(fam), jm_get(c, "family")->str)) {
		fprintf(stderr, "FAIL %s: detected family %s, want %s\n", json_name,
			ns_chat_family_name(fam), jm_get(c, "family")->str);
		goto out;
	}
	t = ns_tok_new(g, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "FAIL %s: %s\n", json_name, err);
		goto out;
	}
	msgs = jm_get(c, "messages");
	nmsg = 0;
	for (const struct jm *k = msgs->kid; k && nmsg < 16; k = k->next, nmsg++) {
		m[nmsg].role = jm_get(k, "role")->str;
		m[nmsg].content = jm_get(k, "content")->str;
		m[nmsg].reasoning = NULL;
	}
	kw = jm_get(c, "template_kwargs");
	if ((v = jm_get(kw, "enable_thinking")))
		o.enable_thinking = v->b;
	if ((v = jm_get(kw, "reasoning_effort")))
		o.reasoning_effort = v->str;
	stm = jm_get(c, "special_tokens_map");
	if ((v = jm_get(stm, "bos_token")))
		o.bos_text = v->str;
	if (ns_chat_render(fam, m, nmsg, jm_get(c, "add_generation_prompt")->b, &o, &got, err,
			   sizeof(err))) {
		fprintf(stderr, "FAIL %s: %s\n", json_name, err);
		goto out;
	}
	if (strlen(got) != tlen || memcmp(got, want, tlen)) {
		fprintf(stderr, "FAIL %s: rendering differs\n--- want\n%s\n--- got\n%s\n---\n",
			json_name, want, got);
		goto out;
	}
	{
		const struct jm *ids = jm_get(c, "ids");
		int32_t *tok = NULL;
		size_t n = 0, i = 0;
		bool same;

		if (ns_tok_encode(t, got, strlen(got), false, true, &tok, &n)) {
			fprintf(stderr, "FAIL %s: encode\n", json_name);
			goto out;
		}
		same = n == ids->n;
		for (const struct jm *k = ids->kid; k && same; k = k->next, i++)
			same = tok[i] == (int32_t)k->num;
		free(tok);
		if (!same) {
			fprintf(stderr, "FAIL %s: ids of the rendering differ\n", json_name);
			goto out;
		}
	}
	printf("ok   %-32s %s, %zu bytes\n", json_name, ns_chat_family_name(fam), tlen);
	fails = 0;
out:
	ns_tok_destroy(&t);
	ns_gguf_close(&g);
	free(got);
	free(want);
	jm_free(c);
	free(jtext);
	return fails;
}

/* A template of no supported family is refused, not guessed. */
static int s_unknown(void)
{
	char path[1024], err[NS_ERR_LEN];
	struct ns_gguf *g = NULL;
	struct ns_chat_msg m = { "user", "hi", NULL };
	char *out = NULL;
	int fails = 0;

	ns_test_oracle_path(path, sizeof(path), "hf/qwen3_5/gguf/qwen3_5-f32.gguf");
	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		fprintf(stderr, "FAIL %s\n", err);
		return 1;
	}
	if (ns_chat_family_detect(ns_gguf_get_str(g, "tokenizer.chat_template")) !=
	    NS_CHAT_UNKNOWN) {
		fprintf(stderr, "FAIL: the <|role|> template of %s was recognised\n", path);
		fails++;
	}
	if (ns_chat_render(NS_CHAT_UNKNOWN, &m, 1, true, NULL, &out, err, sizeof(err)) == 0) {
		fprintf(stderr, "FAIL: rendering an unknown family succeeded\n");
		free(out);
		fails++;
	}
	if (ns_chat_family_detect(NULL) != NS_CHAT_UNKNOWN || ns_chat_family_detect("") !=
	    NS_CHAT_UNKNOWN) {
		fprintf(stderr, "FAIL: empty template recognised\n");
		fails++;
	}
	ns_gguf_close(&g);
	printf("%s unknown template refused\n", fails ? "FAIL" : "ok  ");
	return fails;
}

int main(void)
{
	char dir[1024];
	struct dirent **ents;
	int n, fails = 0, cases = 0;

	ns_test_require_oracle();
	ns_test_oracle_path(dir, sizeof(dir), "vocab-hf/chat");
	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "FAIL cannot list %s\n", dir);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		size_t l = strlen(ents[i]->d_name);

		if (l > 5 && !strcmp(ents[i]->d_name + l - 5, ".json")) {
			fails += s_case(dir, ents[i]->d_name);
			cases++;
		}
		free(ents[i]);
	}
	free(ents);
	fails += s_unknown();
	printf("%d chat cases, %d failures\n", cases, fails);
	return fails || cases == 0 ? 1 : 0;
}
