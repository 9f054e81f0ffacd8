/* harmony.h - streaming parser of the OpenAI harmony format that gpt-oss models generate.
 *
 * After a prompt ending in "<|start|>assistant" the model writes messages such as
 *
 *   <|channel|>analysis<|message|>We need ...<|end|>
 *   <|start|>assistant<|channel|>final<|message|>The answer.<|return|>
 *
 * (also "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>").
 * The parser takes the generated text in pieces of any size, as the streaming detokenizer
 * hands them out, and reports the message bodies as (channel, text) events. It works on the
 * text, not on token ids: the structure tokens (<|start|> <|channel|> <|constrain|>
 * <|message|> <|end|>) are rendered as their text by our detokenizer, as by llama.cpp's;
 * <|return|> and <|call|> end generation and may arrive as text or not at all. Channel names
 * are ordinary text tokens ("analysis" can arrive as "an"+"al"+"ysis"); a marker whose text
 * is split across pieces ("<|chan" + "nel|>") is held back until it is complete, so no marker
 * text and no header text (role, channel name, recipient, constraint) ever reaches an event.
 * The cost: a piece ending in a possible marker prefix ("<", "<|me") is reported when the
 * next piece shows it is text.
 *
 * Text outside any message (the model ignoring the format) is reported on NS_HARMONY_NONE;
 * so is a header that runs past NS_HARMONY_HEADER_MAX bytes without <|message|> (its text
 * included), since no real header is that long. A header cut short by the end of the stream
 * is dropped.
 *
 * Lifecycle: ns_harmony_new / ns_harmony_destroy(&h). Not thread-safe; one per stream. */
#ifndef NS_HARMONY_H
#define NS_HARMONY_H

#include <stdbool.h>
#include <stddef.h>

#define NS_HARMONY_HEADER_MAX 256

enum ns_harmony_channel {
	NS_HARMONY_NONE = 0,   /* text outside a message, or a message without a channel */
	NS_HARMONY_ANALYSIS,   /* chain of thought */
	NS_HARMONY_COMMENTARY, /* tool calls and preambles */
	NS_HARMONY_FINAL,      /* the answer */
	NS_HARMONY_OTHER,      /* a channel name that is none of the above */
};

/* One event: len bytes of a message body on channel ch (never empty). A non-zero return
 * stops the feed call, which returns that value. */
typedef int (*ns_harmony_fn)(enum ns_harmony_channel ch, const char *text, size_t len,
			     void *user);

struct ns_harmony;

/* in_header: the prompt ended with "<|start|>assistant" (what the chat template renders with
 * add_generation_prompt), so the stream starts inside a message header; false: it starts
 * outside any message. Returns NULL when out of memory. */
struct ns_harmony *ns_harmony_new(bool in_header);
void ns_harmony_destroy(struct ns_harmony **h);

/* Feed len bytes of generated text (whole UTF-8 characters, as ns_detok_feed hands them
 * out). Returns 0 or the callback's non-zero return. */
int ns_harmony_feed(struct ns_harmony *h, const char *text, size_t len, ns_harmony_fn cb,
		    void *user);
/* End of the stream: text held back as a possible marker prefix is reported in the current
 * state. Returns as ns_harmony_feed. */
int ns_harmony_finish(struct ns_harmony *h, ns_harmony_fn cb, void *user);

/* Channel of the latest message whose <|message|> was seen (NONE before any). */
enum ns_harmony_channel ns_harmony_last_channel(const struct ns_harmony *h);
/* Inside a message body (its end marker not yet seen). */
bool ns_harmony_in_body(const struct ns_harmony *h);
/* Number of <|message|> markers seen: identifies the message an event belongs to. */
unsigned ns_harmony_n_messages(const struct ns_harmony *h);

/* "none", "analysis", "commentary", "final", "other". */
const char *ns_harmony_channel_name(enum ns_harmony_channel ch);

#endif
