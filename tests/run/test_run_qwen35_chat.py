#!/usr/bin/env python3
"""nsctl run on a Qwen3.5 chat model (tiny-qwen35-F32 with --chat-template qwen35: the oracle's
tiny models carry no template), greedy:
  - -p goes through the template (a chat model), thinking off by default: the rendered prompt
    (--print-prompt) is the reference rendering's (tests/tokenizer/test_chat_qwen35.c) with the
    empty think block, and the prompt the engine evaluated has as many tokens as
    `nsctl tokenize --chat` gives (its default is run's) and `--chat --no-think`;
  - --thinking: the prompt opens the block, the tokens are `tokenize --chat --thinking`'s,
    every generated token is reasoning: on stderr as one "[thinking] ..." block,
    in --json's "reasoning", none on stdout, and the -n line says the thinking was cut;
  - --final-only hides the block; --system comes first in the prompt;
  - --thinking on a template that does not think on request is refused with one line.
Exit 0 pass, 1 fail, 77 oracle missing (1 under CI)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_testlib as rt  # noqa: E402

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen35-F32.gguf")
QWEN3 = os.path.join(ORACLE, "tiny/tiny-qwen3-F32.gguf")
ARGS = ["--chat-template", "qwen35", "--temp", "0", "-n", "6", "-c", "512"]
USER = "hi there"
NO_THINK = ("<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n")
THINK = "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n<think>\n"


def run(*extra):
    r = subprocess.run([NSCTL, "run", MODEL, "-p", USER] + ARGS + list(extra),
                       capture_output=True, timeout=120)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def n_tokens(*extra):
    r = subprocess.run([NSCTL, "tokenize", MODEL, "--chat", "--chat-template", "qwen35", "--ids"]
                       + list(extra) + [USER], capture_output=True, text=True, timeout=60)
    if r.returncode:
        rt.fail("tokenize --chat %s: exit %d: %s" % (extra, r.returncode, r.stderr.strip()))
        return -1
    return len(json.loads(r.stdout))


def main():
    rt.require_model(MODEL)
    rt.require_model(QWEN3)

    # thinking off (the default): the empty block, the answer on stdout
    rc, out, err = run("--print-prompt", "--json")
    obj = json.loads(out) if rc == 0 else {}
    if rc or NO_THINK + "\n" not in err:
        rt.fail("-p: exit %d, no empty-think prompt on stderr: %r" % (rc, err[-400:]))
    for extra in ((), ("--no-think",)):
        if obj.get("n_prompt") != n_tokens(*extra):
            rt.fail("-p: %s prompt tokens, tokenize --chat %s %d" %
                    (obj.get("n_prompt"), " ".join(extra), n_tokens(*extra)))
    if "reasoning" not in obj or obj.get("n_gen") != 6:
        rt.fail("-p --json: no reasoning field or not 6 tokens: %r" % obj)

    # --thinking: the open block; all 6 tokens are thinking (this tiny model never closes it)
    rc, out, err = run("--thinking", "--print-prompt", "--json")
    obj = json.loads(out) if rc == 0 else {}
    if rc or THINK + "\n" not in err:
        rt.fail("--thinking: exit %d, no open-think prompt on stderr: %r" % (rc, err[-400:]))
    if obj.get("n_prompt") != n_tokens("--thinking") or n_tokens("--thinking") == n_tokens():
        rt.fail("--thinking: %s prompt tokens, tokenize --chat --thinking %d (without %d)" %
                (obj.get("n_prompt"), n_tokens("--thinking"), n_tokens()))
    if obj.get("content") != "" or not obj.get("reasoning"):
        rt.fail("--thinking --json: content %r, reasoning %r" %
                (obj.get("content"), obj.get("reasoning")))
    rc, out, err = run("--thinking")
    lines = [ln for ln in err.splitlines() if ln.startswith("[thinking] ")]
    if rc or out != "\n" or len(lines) != 1 or "-n 6 reached inside the thinking" not in err:
        rt.fail("--thinking: exit %d, stdout %r, stderr %r" % (rc, out, err[-500:]))
    rc, out, err = run("--thinking", "--final-only")
    if rc or out != "\n" or "[thinking]" in err:
        rt.fail("--thinking --final-only: exit %d, stdout %r, stderr %r" % (rc, out, err[-400:]))

    # --system first
    rc, out, err = run("--print-prompt", "--system", "Be brief.")
    if rc or "<|im_start|>system\nBe brief.<|im_end|>\n" + NO_THINK not in err:
        rt.fail("--system: exit %d, stderr %r" % (rc, err[-400:]))

    # refused: a template that thinks unprompted (Qwen3's ChatML) or not at all
    r = subprocess.run([NSCTL, "run", QWEN3, "-p", "x", "-n", "1", "--chat-template", "chatml",
                        "--thinking"], capture_output=True, text=True, timeout=120)
    bad = [ln for ln in r.stderr.splitlines() if "--thinking" in ln]
    if r.returncode != 2 or len(bad) != 1 or "Qwen3.5" not in bad[0] or r.stdout:
        rt.fail("--thinking on chatml: exit %d, stderr %r" % (r.returncode, r.stderr))

    if rt.failures:
        print("%d failure(s)" % len(rt.failures))
        return 1
    print("run on qwen35: -p templated, thinking off by default, --thinking to stderr, refusals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
