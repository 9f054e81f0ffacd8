#!/usr/bin/env python3
"""nsctl run --chat with images (issue 21): /image FILE attaches an image to the next user
turn, placed as Qwen-VL's chat template places image parts (<|vision_start|><|image_pad|>
<|vision_end|> opening the message), against `run --image -p` given the same rendered text.

    test_nsctl_chat_image.py NSCTL

hf/qwen3_vl (GGUF, tiny random weights) with its mmproj, --chat-template chatml, greedy, piped
sessions:
  - "/image F", "describe", "more": each reply equals run --image F -p's on the conversation
    rendered up to it (the second turn keeps the first turn's image in its place);
  - --image F on the command line: the first turn's reply is the same as with /image F;
  - /image of a file that is not an image: one line, not attached, the session goes on (its
    reply is a session's without the image); /reset forgets an attached image; /save of a
    conversation with images is refused in one line; /image without a tower (--no-mmproj):
    one line; without --mmproj the tower beside the model is taken, and said;
  - a mutation check of the test itself: the reply with the image differs from the reply
    without it.
Exit 0 pass, 1 fail (77: oracle missing outside CI).
"""
import os
import subprocess
import sys
import tempfile

from vision_testlib import Checks, oracle_missing, png

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
BASE = os.path.join(ORACLE, "hf", "qwen3_vl")
MODEL = os.path.join(BASE, "gguf", "qwen3_vl-f32.gguf")
MMPROJ = os.path.join(BASE, "gguf", "mmproj-qwen3_vl-f32.gguf")
if not os.path.isfile(MODEL) or not os.path.isfile(MMPROJ):
    oracle_missing(BASE)
COMMON = ["--temp", "0", "-n", "8", "-c", "256", "--mem-budget", "8MB", "--ram-budget", "0",
          "--min-pixels", "4096", "--image-token", "1000"]
TOWER = ["--mmproj", MMPROJ]
checks = Checks()
fail = checks.fail


def chat(lines, *extra):
    """A piped session: (exit code, the replies (one stdout line each), stderr)."""
    r = subprocess.run([NSCTL, "run", MODEL, "--chat", "--chat-template", "chatml", *COMMON,
                        *extra], input="".join(x + "\n" for x in lines), capture_output=True,
                       text=True, errors="replace", timeout=120)
    return r.returncode, r.stdout.split("\n")[:-1], r.stderr


def single(prompt, image):
    r = subprocess.run([NSCTL, "run", MODEL, *COMMON, *TOWER, "--image", image, "-p", prompt],
                       capture_output=True, text=True, errors="replace", timeout=120)
    if r.returncode != 0:
        fail(f"run --image -p: exit {r.returncode}: {r.stderr[-500:]}")
    return r.stdout.rstrip("\n")


def turn(role, text):
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


MARK = "<|vision_start|><|image_pad|><|vision_end|>"
GEN = "<|im_start|>assistant\n"

with tempfile.TemporaryDirectory() as d:
    image = os.path.join(d, "image.png")
    png(image, 64, 64, open(os.path.join(BASE, "image.u8"), "rb").read())
    bad = os.path.join(d, "not-an-image.png")
    with open(bad, "w") as f:
        f.write("not an image\n" * 10)

    rc, rep, err = chat(["/image " + image, "describe", "more"], *TOWER)
    if rc != 0 or len(rep) != 2:
        fail(f"/image session: exit {rc}, replies {rep!r}, stderr {err[-500:]!r}")
        rep = ["?", "?"]
    elif "attached to your next message: 4 tokens" not in err:
        fail(f"/image did not say it attached a 4-token image: {err!r}")
    p1 = turn("user", MARK + "describe") + GEN
    want1 = single(p1, image)
    p2 = p1 + rep[0] + "<|im_end|>\n" + turn("user", "more") + GEN
    want2 = single(p2, image)
    print(f"/image, describe -> {rep[0]!r}; run --image -p -> {want1!r}")
    print(f"more (the image kept)  -> {rep[1]!r}; run --image -p -> {want2!r}")
    if rep[0] != want1 or rep[1] != want2:
        fail("the chat's replies are not run --image -p's on the same rendered text")

    rc, rep_cli, err = chat(["describe"], *TOWER, "--image", image)
    if rc != 0 or rep_cli[:1] != rep[:1]:
        fail(f"--chat --image: exit {rc}, {rep_cli!r}, expected {rep[:1]!r}: {err[-300:]!r}")

    rc, plain, err = chat(["describe"], *TOWER)
    if rc != 0 or len(plain) != 1:
        fail(f"a session without images: exit {rc}, {plain!r}, {err[-300:]!r}")
    elif plain[0] == rep[0]:
        fail(f"the image changes nothing in the reply ({plain[0]!r}): the test cannot tell")

    rc, got, err = chat(["/image " + bad, "describe"], *TOWER)
    lines = [x for x in err.split("\n") if x.startswith("nsctl run: /image")]
    if rc != 0 or got != plain or len(lines) != 1 or "not attached" not in lines[0]:
        fail(f"/image of a bad file: exit {rc}, {got!r} (want {plain!r}), stderr {err!r}")
    else:
        print("  /image not-an-image -> " + lines[0])

    rc, got, err = chat(["/image " + image, "/reset", "describe"], *TOWER)
    if rc != 0 or got != plain:
        fail(f"/image then /reset: exit {rc}, {got!r}, want {plain!r}")

    save = os.path.join(d, "conv.json")
    rc, got, err = chat(["/image " + image, "describe", "/save " + save], *TOWER)
    lines = [x for x in err.split("\n") if x.startswith("nsctl run: /save")]
    if rc != 0 or os.path.exists(save) or len(lines) != 1:
        fail(f"/save with images: exit {rc}, saved {os.path.exists(save)}, stderr {err!r}")
    else:
        print("  /save with images -> " + lines[0])

    rc, got, err = chat(["/image " + image, "describe"], "--no-mmproj")  # no tower
    lines = [x for x in err.split("\n") if x.startswith("nsctl run: /image")]
    if rc != 0 or got != plain or len(lines) != 1 or "no vision tower" not in lines[0]:
        fail(f"/image without a tower: exit {rc}, {got!r}, stderr {err!r}")
    else:
        print("  /image without a tower -> " + lines[0])

    # no --mmproj: --chat takes the mmproj beside the model (images may come), says so, and
    # answers as with it named
    rc, got, err = chat(["/image " + image, "describe"])
    if rc != 0 or got != rep[:1] or f"vision tower {MMPROJ} (found beside the model" not in err:
        fail(f"--chat with the tower beside: exit {rc}, {got!r}, want {rep[:1]!r}: {err!r}")

checks.done()
