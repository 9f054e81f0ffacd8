/* commands.h - the nsctl subcommands. Each lives in its own cmd_<name>.c and gets argv
 * starting at the subcommand's first argument. Exit codes: 0 ok, 1 runtime failure,
 * 2 bad usage or bad input (malformed model file, wrong flag). */
#ifndef NSCTL_COMMANDS_H
#define NSCTL_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tensor(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ps(int argc, char **argv);

#endif
