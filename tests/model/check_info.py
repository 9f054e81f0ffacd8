#!/usr/bin/env python3
"""nsctl info against the oracle's metadata dumps (gguf-py), for every GGUF in ../shared/oracle.

For each meta/*.json: architecture, block_count, tensor count, per-type bytes, alignment, data
offset, every metadata key (type, value, array length and first items) and every tensor (name,
type, shape, offset, bytes) must match. Split models must describe themselves exactly as the
unsplit file does. Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import json
import os
import subprocess
import sys

oracle = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
nsctl = sys.argv[1]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def info(path):
    r = subprocess.run([nsctl, "info", path, "--json", "--metadata", "--tensors"],
                       capture_output=True, text=True, errors="surrogateescape")
    if r.returncode != 0:
        fail(f"{path}: nsctl info exited {r.returncode}: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def norm_type(t):
    return {"string": "STRING", "array": "ARRAY"}.get(t, t)


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a == b or (a != a and b != b)
    return a == b


def check_meta(rel, meta, got):
    for key, want in meta["metadata"].items():
        have = got["metadata"].get(key)
        if have is None:
            fail(f"{rel}: key {key} missing")
            continue
        if norm_type(want["type"]) != have["type"]:
            fail(f"{rel}: key {key} type {have['type']} != {want['type']}")
            continue
        if have["type"] == "ARRAY":
            if want["item_type"] != have["item_type"] or want["length"] != have["length"]:
                fail(f"{rel}: key {key} array {have['item_type']}[{have['length']}] != "
                     f"{want['item_type']}[{want['length']}]")
                continue
            n = min(len(want["first"]), len(have["first"]))
            if n < min(want["length"], 16) or not all(same(x, y) for x, y in
                                                       zip(want["first"][:n], have["first"][:n])):
                fail(f"{rel}: key {key} first items differ")
        elif not same(want["value"], have["value"]):
            fail(f"{rel}: key {key} value {have['value']!r} != {want['value']!r}")
    if len(meta["metadata"]) != len(got["metadata"]):
        fail(f"{rel}: {len(got['metadata'])} keys, oracle has {len(meta['metadata'])}")


def main():
    if not os.path.isdir(oracle):
        if os.environ.get("CI") == "true":
            print(f"oracle missing at {oracle} and CI=true")
            return 1
        print(f"oracle missing at {oracle}: skip")
        return 77
    metas = sorted(os.listdir(os.path.join(oracle, "meta")))
    checked = 0
    split_groups = {}
    for name in metas:
        meta = json.load(open(os.path.join(oracle, "meta", name)))
        rel = meta["file"]
        path = os.path.join(oracle, rel)
        if not os.path.exists(path):
            fail(f"{rel}: listed in meta but missing")
            continue
        got = info(path)
        if got is None:
            continue
        checked += 1
        shard_no = meta["metadata"].get("split.no", {}).get("value")
        if shard_no is None:
            for k in ("version", "alignment", "data_offset", "file_size", "n_tensors"):
                if got[k] != meta[k]:
                    fail(f"{rel}: {k} {got[k]} != {meta[k]}")
            if got["bytes_by_type"] != meta["bytes_by_type"]:
                fail(f"{rel}: bytes_by_type {got['bytes_by_type']} != {meta['bytes_by_type']}")
            mine = got["tensors"]
            check_meta(rel, meta, got)
        else:
            split_groups.setdefault(rel.rsplit("-", 3)[0], []).append(rel)
            mine = [t for t in got["tensors"] if t["shard"] == shard_no]
            shard_meta_ok = got["shards"][shard_no].endswith(os.path.basename(rel))
            if not shard_meta_ok:
                fail(f"{rel}: shard {shard_no} resolved to {got['shards'][shard_no]}")
            if shard_no == 0:
                check_meta(rel, meta, got)
        arch = meta["metadata"].get("general.architecture", {}).get("value")
        if arch is not None and got["architecture"] != arch:
            fail(f"{rel}: architecture {got['architecture']} != {arch}")
        # runnable exactly where our forward pass knows the architecture and the file has
        # weights (the oracle's models are consistent; vocabulary-only files are not models);
        # otherwise the reason names the architecture
        if arch in ("llama", "qwen3", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "gemma3",
                    "gemma4", "qwen3vl", "qwen3vlmoe"):
            if got.get("runnable") is not bool(meta["tensors"]):
                fail(f"{rel}: {len(meta['tensors'])} tensors, runnable {got.get('runnable')}: "
                     f"{got.get('unrunnable_why')}")
        elif arch is not None and (got.get("runnable") is not False or
                                   f"'{arch}'" not in got.get("unrunnable_why", "")):
            fail(f"{rel}: architecture {arch}: runnable {got.get('runnable')}, "
                 f"why {got.get('unrunnable_why')!r}")
        # the recurrent state per sequence, by hand from the metadata (llama.cpp's rule: every
        # full_attention_interval-th layer attention, the others conv history of K - 1 inputs
        # over inner + 2 * groups * state channels and state_size x inner of states)
        if arch in ("qwen35", "qwen35moe") and meta["tensors"]:
            mv = lambda k, d=None: meta["metadata"].get(f"{arch}.{k}", {}).get("value", d)
            n_rec = sum(1 for l in range(mv("block_count"))
                        if (l + 1) % mv("full_attention_interval", 4))
            ch = mv("ssm.inner_size") + 2 * mv("ssm.group_count") * mv("ssm.state_size")
            want = n_rec * ((mv("ssm.conv_kernel") - 1) * ch +
                            mv("ssm.state_size") * mv("ssm.inner_size")) * 4
            if got.get("recurrent_state_bytes") != want:
                fail(f"{rel}: recurrent_state_bytes {got.get('recurrent_state_bytes')} != {want}")
        bc = meta["metadata"].get(f"{arch}.block_count", {}).get("value") if arch else None
        if bc is not None and got["block_count"] != bc:
            fail(f"{rel}: block_count {got['block_count']} != {bc}")
        if len(mine) != len(meta["tensors"]):
            fail(f"{rel}: {len(mine)} tensors, oracle has {len(meta['tensors'])}")
        for a, b in zip(mine, meta["tensors"]):
            if (a["name"], a["type"], a["ne"], a["offset"], a["bytes"]) != \
               (b["name"], b["type"], b["shape"], b["offset"], b["bytes"]):
                fail(f"{rel}: tensor {a['name']} {a['type']} {a['ne']} @{a['offset']} "
                     f"{a['bytes']} != {b['name']} {b['type']} {b['shape']} @{b['offset']} {b['bytes']}")
                break
    # a split model from any shard describes itself as the unsplit file does
    for prefix, shards in split_groups.items():
        whole = os.path.join(oracle, prefix.replace("split/", "") + ".gguf")
        if not os.path.exists(whole):
            continue
        ref = info(whole)
        for rel in shards:
            got = info(os.path.join(oracle, rel))
            if ref is None or got is None:
                continue
            for k in ("architecture", "block_count", "n_tensors", "bytes_by_type", "n_params",
                      "bytes_per_token", "min_mem_budget", "hparams", "tokenizer", "layers"):
                if got[k] != ref[k]:
                    fail(f"{rel}: {k} differs from the unsplit file: {got[k]} != {ref[k]}")
            strip = lambda ts: [(t["name"], t["type"], t["ne"], t["bytes"]) for t in ts]
            if sorted(strip(got["tensors"])) != sorted(strip(ref["tensors"])):
                fail(f"{rel}: tensor set differs from the unsplit file")
            meta_ref = {k: v for k, v in ref["metadata"].items()}
            meta_got = {k: v for k, v in got["metadata"].items() if not k.startswith("split.")}
            if meta_got != meta_ref:
                fail(f"{rel}: metadata differs from the unsplit file")
            checked += 1
    print(f"{checked} checked, {len(failures)} failed")
    return 1 if failures or checked == 0 else 0


sys.exit(main())
