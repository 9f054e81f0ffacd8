#!/usr/bin/env python3
"""No process folder includes another process folder's private headers.

What crosses a process boundary is declared in shm/ or proto/ (STYLE.md); a process folder
may also export a library others link (nsio's client, the planner, the forward pass and
kernels, the C API). PUBLIC below lists those exported headers, each with the library it
belongs to; every other header of a process folder is private to that process. For each
#include in a process folder's sources that names a header of another process folder (bare
names resolved by file name, as meson's include paths do; a name that exists in several
folders is fine if one of them exports it), the header must be PUBLIC. argv: SOURCE_ROOT.
Exit 0 pass, 1 fail (each offending include on its own line)."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
PROCS = ["nsio", "nsplan", "nsrouter", "nscompute", "nsctl"]
PUBLIC = {
    "nsio/client.h": "libnsioclient: a client's side of nsio's rings",
    "nsplan/plan.h": "libnsplan: the plan and its record format",
    "nsplan/plan_shm.h": "libnsplan: the plan segment and its checked reader",
    "nsplan/plan_stats.h": "libnsplan: the expert statistics file",
    "nsplan/budget_defaults.h": "libnsplan: default budgets (nsctl plan, run, bench)",
    "nsplan/fixed_mem.h": "libnsplan: the fixed set of a run",
    "nsplan/gpu_need.h": "libnsplan: what the cuda pass holds besides windows",
    "nsctl/neurostream.h": "libneurostream: the C API",
}
PRIVATE_IN_LIBS = {"nscompute/compute_eval.h", "nscompute/forward/forward_impl.h",
                   "nscompute/kernels/kern_internal.h", "nscompute/cuda/nscuda_internal.h",
                   "nscompute/cuda/cfwd_internal.h",
                   "nscompute/vision/vision_impl.h", "nscompute/sampling/sampling_internal.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def headers(folder):
    out = {}
    for d, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith((".h", ".cuh")):
                rel = os.path.relpath(os.path.join(d, f), ROOT)
                out.setdefault(f, []).append(rel)
    return out


def public(rel):
    if rel in PUBLIC:
        return True
    # nscompute's forward pass, kernels, sampling and vision tower are libraries
    # (libnsforward, libnskernels, the cuda pass, libnssampling, libnsvision: nsctl image runs
    # the tower) others link, all but their internal headers
    return rel.startswith(("nscompute/forward/", "nscompute/kernels/", "nscompute/cuda/",
                           "nscompute/sampling/", "nscompute/vision/")) \
        and rel not in PRIVATE_IN_LIBS


def main():
    own = {p: headers(p) for p in PROCS}
    bad = []
    for p in PROCS:
        for d, _, files in os.walk(os.path.join(ROOT, p)):
            for f in files:
                if not f.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(d, f)
                with open(path, errors="replace") as fh:
                    text = fh.read()
                for inc in INCLUDE.findall(text):
                    name = os.path.basename(inc)
                    if name in own[p]:
                        continue
                    found = [h for q in PROCS if q != p for h in own[q].get(name, [])]
                    if found and not any(public(h) for h in found):
                        bad.append("%s includes %s: private to %s" % (
                            os.path.relpath(path, ROOT), " or ".join(found),
                            found[0].split("/")[0]))
    for b in bad:
        print("FAIL: " + b)
    if not bad:
        print("no process folder includes another one's private header (%d exported)" %
              len(PUBLIC))
    return 1 if bad else 0


sys.exit(main())
