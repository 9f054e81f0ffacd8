/* json_text.h - text from models and files as JSON strings (jansson). JSON strings are
 * Unicode; generated text (a random model's, a byte token's piece) and names read from files
 * need not be UTF-8, so bytes that do not form a valid UTF-8 sequence become U+FFFD. */
#ifndef NSCTL_JSON_TEXT_H
#define NSCTL_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid (overlong forms,
 * surrogates and code points above U+10FFFF are invalid). */
size_t ns_utf8_seq_len(const unsigned char *p, size_t n);

/* A new JSON string of s[0, n) with invalid bytes replaced; NULL when out of memory. */
json_t *ns_json_text(const char *s, size_t n);

#endif
