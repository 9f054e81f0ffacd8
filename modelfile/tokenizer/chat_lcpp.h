/* chat_lcpp.h - the chat families of llama.cpp's built-in template list that chat.c does not
 * render from a Jinja template of its own: ChatML, Mistral v1/v3/v3-tekken/v7/v7-tekken,
 * Llama 2 and its <<SYS>> variants, Phi-3, Phi-4, Zephyr, Vicuna (and Orca), DeepSeek
 * (coder), DeepSeek-V2, DeepSeek-V3, Command-R. Recognised from the template text by the
 * substrings llama.cpp's llm_chat_detect_template tests, rendered as its built-in renderer
 * (llm_chat_apply_template) renders them. Part of chat.h's interface (ns_chat_render). */
#ifndef NS_CHAT_LCPP_H
#define NS_CHAT_LCPP_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"

/* Family of a template text among these (NS_CHAT_UNKNOWN: none). tpl is not NULL. */
enum ns_chat_family ns_chat_lcpp_detect(const char *tpl);

/* msgs rendered as llama.cpp renders family f; *out malloc'd. 0, -EINVAL (not one of these
 * families) or -ENOMEM, with one line in err. */
int ns_chat_lcpp_render(enum ns_chat_family f, const struct ns_chat_msg *msgs, size_t n,
			bool add_generation_prompt, char **out, char *err, size_t errlen);

#endif
