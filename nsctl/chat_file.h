/* chat_file.h - nsctl run --chat's /save FILE and /load FILE: the conversation as
 * {"messages": [{"role": "...", "content": "..."}, ...]} (the shape of an OpenAI chat
 * request's messages), through jansson. */
#ifndef NSCTL_CHAT_FILE_H
#define NSCTL_CHAT_FILE_H

#include <stddef.h>

#include "run_report.h"

/* 0, or -errno with one line in err. The file is written whole or not at all (a temporary
 * beside it, renamed). */
int chat_file_save(const char *path, const struct ns_chat_log *log, char *err, size_t errlen);

/* Replaces *log with the file's messages: 0, or -errno with one line in err and *log
 * unchanged. Each message needs a string role (system, user, assistant, tool, developer) and
 * a string content. */
int chat_file_load(const char *path, struct ns_chat_log *log, char *err, size_t errlen);

#endif
