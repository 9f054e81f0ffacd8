#!/usr/bin/env python3
"""Hugging Face checkpoints made here, read through nsctl.

1. A qwen35moe checkpoint (F32 and BF16 tensors, two shards and an index) with 2 key and 6
   value heads (so the grouped -> tiled value-head order is not its own inverse, unlike the
   oracle's 2/4), an MTP layer (mtp.* tensors), per-expert matrices in layer 0 and fused ones
   (experts.gate_up_proj / experts.down_proj) in layer 1. Every tensor `nsctl tensor` prints
   must be what llama.cpp's convert_hf_to_gguf.py writes, computed here from the converter's
   rules written out as the converter states them (reshape [n_k, r, hd] -> swap -> flatten,
   1 + w for RMSNorm offsets, -exp(A_log), conv1d squeezed, experts stacked [E, rows, cols],
   gate_up split in halves, mtp.* -> blk.<n_layer>.nextn.*), bit for bit; `nsctl info` must
   carry the converter's keys (block_count with the MTP layer, nextn_predict_layers, expert
   sizes, ssm.*, the default rope sections) and count the MTP block's tensors as not run.
   The checkpoint opens as its directory, its index and any of its shards.
2. Bad checkpoints: each one through every nsctl command that takes a model (info, tensor,
   tokenize, plan, run, logits, bench) must exit non-zero with one line on stderr naming the
   problem, within a time limit, never by a signal or with a sanitizer report.

argv: NSCTL. Exit 0 pass, 1 fail."""
import json, math, os, re, shutil, struct, subprocess, sys, tempfile

nsctl = os.path.abspath(sys.argv[1])
oracle = os.environ.get("NS_ORACLE_DIR", "")
tok_dir = os.path.join(oracle, "hf", "tokenizer")
if not os.path.isfile(os.path.join(tok_dir, "tokenizer.json")):
    if os.environ.get("CI") == "true":
        print("FAIL: oracle tokenizer missing (NS_ORACLE_DIR=%r) under CI" % oracle)
        sys.exit(1)
    print("skip: oracle tokenizer missing")
    sys.exit(77)
fails = 0
work = tempfile.mkdtemp(prefix="ns-hf-", dir=os.environ.get("NS_BUILD_ROOT") or None)


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg, flush=True)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    """x must be exactly representable in bfloat16."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    assert u & 0xFFFF == 0, x
    return u >> 16


# ---- the checkpoint: dimensions ---------------------------------------------------------------
N_EMBD, N_LAYER, N_VOCAB = 8, 2, 1024
NK, NV, KD, VD, KCONV = 2, 6, 4, 2, 3           # linear attention: key/value heads and dims
R = NV // NK
N_HEAD, N_KV, HEAD_DIM = 2, 1, 4
N_EXP, N_EXP_USED, FF_EXP, FF_SH = 3, 2, 4, 4
QKV_ROWS, CONV_CH = 2 * NK * KD + NV * VD, 2 * NK * KD + NV * VD

# name -> (dtype, shape, values); values are exact in the dtype, distinct within a tensor
tensors = {}


def put(name, shape, dtype="F32", op=None):
    n = 1
    for s in shape:
        n *= s
    k = len(tensors) + 1
    if dtype == "BF16":
        vals = [((i * 7 + k) % 64 - 32) / 16.0 for i in range(n)]
    elif op == "alog":
        vals = [-(1 + (i + k) % 9) / 8.0 for i in range(n)]
    else:
        vals = [k + (i % 1000) / 1024.0 for i in range(n)]
    tensors[name] = (dtype, list(shape), vals)


def layer_common(p):
    put(p + "input_layernorm.weight", [N_EMBD], "BF16")
    put(p + "post_attention_layernorm.weight", [N_EMBD])


def full_attention(p):
    put(p + "self_attn.q_proj.weight", [N_HEAD * HEAD_DIM * 2, N_EMBD])
    put(p + "self_attn.k_proj.weight", [N_KV * HEAD_DIM, N_EMBD])
    put(p + "self_attn.v_proj.weight", [N_KV * HEAD_DIM, N_EMBD], "BF16")
    put(p + "self_attn.o_proj.weight", [N_EMBD, N_HEAD * HEAD_DIM])
    put(p + "self_attn.q_norm.weight", [HEAD_DIM])
    put(p + "self_attn.k_norm.weight", [HEAD_DIM], "BF16")


def shared_expert(p):
    put(p + "mlp.gate.weight", [N_EXP, N_EMBD])
    put(p + "mlp.shared_expert.gate_proj.weight", [FF_SH, N_EMBD])
    put(p + "mlp.shared_expert.up_proj.weight", [FF_SH, N_EMBD])
    put(p + "mlp.shared_expert.down_proj.weight", [N_EMBD, FF_SH])
    put(p + "mlp.shared_expert_gate.weight", [1, N_EMBD], "BF16")


put("model.language_model.embed_tokens.weight", [N_VOCAB, N_EMBD])
put("lm_head.weight", [N_VOCAB, N_EMBD], "BF16")
put("model.language_model.norm.weight", [N_EMBD])
p = "model.language_model.layers.0."                 # linear attention, per-expert matrices
layer_common(p)
put(p + "linear_attn.in_proj_qkv.weight", [QKV_ROWS, N_EMBD])
put(p + "linear_attn.in_proj_z.weight", [NV * VD, N_EMBD])
put(p + "linear_attn.in_proj_a.weight", [NV, N_EMBD])
put(p + "linear_attn.in_proj_b.weight", [NV, N_EMBD], "BF16")
put(p + "linear_attn.A_log", [NV], op="alog")
put(p + "linear_attn.dt_bias", [NV], "BF16")
put(p + "linear_attn.conv1d.weight", [CONV_CH, 1, KCONV])
put(p + "linear_attn.norm.weight", [VD])
put(p + "linear_attn.out_proj.weight", [N_EMBD, NV * VD])
shared_expert(p)
for e in range(N_EXP):
    put(p + "mlp.experts.%d.gate_proj.weight" % e, [FF_EXP, N_EMBD])
    put(p + "mlp.experts.%d.up_proj.weight" % e, [FF_EXP, N_EMBD])
    put(p + "mlp.experts.%d.down_proj.weight" % e, [N_EMBD, FF_EXP])
p = "model.language_model.layers.1."                 # full attention, fused experts
layer_common(p)
full_attention(p)
shared_expert(p)
put(p + "mlp.experts.gate_up_proj", [N_EXP, 2 * FF_EXP, N_EMBD])
put(p + "mlp.experts.down_proj", [N_EXP, N_EMBD, FF_EXP], "BF16")
p = "mtp.layers.0."                                  # the MTP block: a full-attention layer
layer_common(p)
full_attention(p)
shared_expert(p)
put(p + "mlp.experts.gate_up_proj", [N_EXP, 2 * FF_EXP, N_EMBD])
put(p + "mlp.experts.down_proj", [N_EXP, N_EMBD, FF_EXP])
put("mtp.fc.weight", [N_EMBD, 2 * N_EMBD])
put("mtp.pre_fc_norm_embedding.weight", [N_EMBD])
put("mtp.pre_fc_norm_hidden.weight", [N_EMBD], "BF16")
put("mtp.norm.weight", [N_EMBD])
put("model.visual.blocks.0.attn.qkv.weight", [6, 4])  # another tower: not the text model's

CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "text_config": {
        "hidden_size": N_EMBD, "num_hidden_layers": N_LAYER, "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_KV, "head_dim": HEAD_DIM, "linear_num_key_heads": NK,
        "linear_num_value_heads": NV, "linear_key_head_dim": KD, "linear_value_head_dim": VD,
        "linear_conv_kernel_dim": KCONV, "full_attention_interval": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "num_experts": N_EXP, "num_experts_per_tok": N_EXP_USED,
        "moe_intermediate_size": FF_EXP, "shared_expert_intermediate_size": FF_SH,
        "mtp_num_hidden_layers": 1, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        "vocab_size": N_VOCAB, "tie_word_embeddings": False, "eos_token_id": 2,
    },
    "tie_word_embeddings": False,
}


def write_safetensors(path, names, overrides=None):
    overrides = overrides or {}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for n in names:
        dt, shape, vals = tensors[n]
        if dt == "BF16":
            raw = struct.pack("<%dH" % len(vals), *[bf16_bits(v) for v in vals])
        else:
            raw = struct.pack("<%df" % len(vals), *vals)
        e = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        e.update(overrides.get(n, {}))
        header[n] = e
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def write_checkpoint(d, config=CONFIG, overrides=None):
    os.makedirs(d, exist_ok=True)
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half],
              "model-00002-of-00002.safetensors": names[half:]}
    wmap = {}
    for f, ns in shards.items():
        write_safetensors(os.path.join(d, f), ns, overrides)
        wmap.update({n: f for n in ns})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    for t in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(tok_dir, t), d)


# ---- the converter's rules, as it states them --------------------------------------------------
def rows_of(vals, ncols):
    return [vals[i:i + ncols] for i in range(0, len(vals), ncols)]


def tiled(blocks):
    """_reorder_v_heads: blocks in grouped order (index g * R + v) -> reshape [NK, R, .],
    swap the first two axes, flatten: [v][g]."""
    assert len(blocks) == NK * R
    return [blocks[g * R + v] for v in range(R) for g in range(NK)]


def split(seq, size):
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def flat(xss):
    return [x for xs in xss for x in xs]


def as_read(name):
    """The tensor's values as stored (a BF16 value widened is itself)."""
    return list(tensors[name][2])


expected = {}  # gguf name -> list of floats (float32 values)


def expect(gguf, vals, op=None):
    if op == "+1":
        vals = [f32(v + 1.0) for v in vals]
    elif op == "-exp":
        vals = [f32(-math.exp(v)) for v in vals]
    expected[gguf] = [f32(v) for v in vals]


def hf(name):
    return name.replace("model.language_model.", "model.")


def layer(hf_name, blk, gguf_suffix, vals, op=None):
    expect("blk.%d.%s" % (blk, gguf_suffix), vals, op)


expect("token_embd.weight", as_read("model.language_model.embed_tokens.weight"))
expect("output.weight", as_read("lm_head.weight"))
expect("output_norm.weight", as_read("model.language_model.norm.weight"), "+1")
for blk, p in ((0, "model.language_model.layers.0."), (1, "model.language_model.layers.1."),
               (2, "mtp.layers.0.")):
    layer(p, blk, "attn_norm.weight", as_read(p + "input_layernorm.weight"), "+1")
    layer(p, blk, "post_attention_norm.weight", as_read(p + "post_attention_layernorm.weight"),
          "+1")
    layer(p, blk, "ffn_gate_inp.weight", as_read(p + "mlp.gate.weight"))
    layer(p, blk, "ffn_gate_shexp.weight", as_read(p + "mlp.shared_expert.gate_proj.weight"))
    layer(p, blk, "ffn_up_shexp.weight", as_read(p + "mlp.shared_expert.up_proj.weight"))
    layer(p, blk, "ffn_down_shexp.weight", as_read(p + "mlp.shared_expert.down_proj.weight"))
    layer(p, blk, "ffn_gate_inp_shexp.weight", as_read(p + "mlp.shared_expert_gate.weight"))
    if blk == 0:
        qkv = rows_of(as_read(p + "linear_attn.in_proj_qkv.weight"), N_EMBD)
        qk, v = qkv[:2 * NK * KD], qkv[2 * NK * KD:]
        layer(p, 0, "attn_qkv.weight", flat(qk + flat(tiled(split(v, VD)))))
        z = rows_of(as_read(p + "linear_attn.in_proj_z.weight"), N_EMBD)
        layer(p, 0, "attn_gate.weight", flat(flat(tiled(split(z, VD)))))
        for hfn, g in (("in_proj_a", "ssm_alpha"), ("in_proj_b", "ssm_beta")):
            m = rows_of(as_read(p + "linear_attn.%s.weight" % hfn), N_EMBD)
            layer(p, 0, g + ".weight", flat(flat(tiled(split(m, 1)))))
        layer(p, 0, "ssm_a", flat(tiled(split(as_read(p + "linear_attn.A_log"), 1))), "-exp")
        layer(p, 0, "ssm_dt.bias", flat(tiled(split(as_read(p + "linear_attn.dt_bias"), 1))))
        conv = rows_of(as_read(p + "linear_attn.conv1d.weight"), KCONV)  # squeezed [C, K]
        cqk, cv = conv[:2 * NK * KD], conv[2 * NK * KD:]
        layer(p, 0, "ssm_conv1d.weight", flat(cqk + flat(tiled(split(cv, VD)))))
        layer(p, 0, "ssm_norm.weight", as_read(p + "linear_attn.norm.weight"))
        out = rows_of(as_read(p + "linear_attn.out_proj.weight"), NV * VD)
        layer(p, 0, "ssm_out.weight", flat(flat(tiled(split(r, VD))) for r in out))
        for w, g in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"),
                     ("down_proj", "ffn_down_exps")):
            layer(p, 0, g + ".weight",
                  flat(as_read(p + "mlp.experts.%d.%s.weight" % (e, w)) for e in range(N_EXP)))
    else:
        for hfn, g in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                       ("o_proj", "attn_output")):
            layer(p, blk, g + ".weight", as_read(p + "self_attn.%s.weight" % hfn))
        layer(p, blk, "attn_q_norm.weight", as_read(p + "self_attn.q_norm.weight"), "+1")
        layer(p, blk, "attn_k_norm.weight", as_read(p + "self_attn.k_norm.weight"), "+1")
        gu = split(as_read(p + "mlp.experts.gate_up_proj"), 2 * FF_EXP * N_EMBD)  # per expert
        half = FF_EXP * N_EMBD
        layer(p, blk, "ffn_gate_exps.weight", flat(e[:half] for e in gu))
        layer(p, blk, "ffn_up_exps.weight", flat(e[half:] for e in gu))
        layer(p, blk, "ffn_down_exps.weight", as_read(p + "mlp.experts.down_proj"))
expect("blk.2.nextn.eh_proj.weight", as_read("mtp.fc.weight"))
expect("blk.2.nextn.enorm.weight", as_read("mtp.pre_fc_norm_embedding.weight"), "+1")
expect("blk.2.nextn.hnorm.weight", as_read("mtp.pre_fc_norm_hidden.weight"), "+1")
expect("blk.2.nextn.shared_head_norm.weight", as_read("mtp.norm.weight"), "+1")

WANT_KEYS = {"general.architecture": "qwen35moe", "qwen35moe.block_count": 3,
             "qwen35moe.nextn_predict_layers": 1, "qwen35moe.expert_count": N_EXP,
             "qwen35moe.expert_used_count": N_EXP_USED,
             "qwen35moe.expert_feed_forward_length": FF_EXP,
             "qwen35moe.expert_shared_feed_forward_length": FF_SH,
             "qwen35moe.ssm.conv_kernel": KCONV, "qwen35moe.ssm.state_size": KD,
             "qwen35moe.ssm.group_count": NK, "qwen35moe.ssm.time_step_rank": NV,
             "qwen35moe.ssm.inner_size": NV * VD, "qwen35moe.full_attention_interval": 2,
             "qwen35moe.rope.dimension_count": 1, "qwen35moe.rope.dimension_sections":
             [11, 11, 10, 0], "qwen35moe.attention.key_length": HEAD_DIM,
             "qwen35moe.embedding_length": N_EMBD, "tokenizer.ggml.eos_token_id": 2,
             "tokenizer.ggml.bos_token_id": 1}


def run(args, limit=60):
    try:
        p = subprocess.run([nsctl, *args], capture_output=True, timeout=limit, cwd=work)
    except subprocess.TimeoutExpired:
        return None, b"", "timed out after %d s" % limit
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def check_model(path, what):
    rc, out, err = run(["info", path, "--json", "--metadata", "--tensors"])
    if rc != 0:
        return fail("%s: info exit %s: %s" % (what, rc, err))
    info = json.loads(out)
    names = {t["name"] for t in info["tensors"]}
    if names != set(expected):
        return fail("%s: tensors %s missing, %s unexpected" %
                    (what, sorted(set(expected) - names), sorted(names - set(expected))))
    meta = info["metadata"]
    for k, v in WANT_KEYS.items():
        got = meta.get(k, {})
        got = got.get("value", got.get("first"))
        if got != v:
            fail("%s: %s is %r, want %r" % (what, k, got, v))
    bad = 0
    for name, want in expected.items():
        rc, out, err = run(["tensor", path, name, "-o", "-"])
        got = list(struct.unpack("<%df" % (len(out) // 4), out)) if rc == 0 else None
        if got != want:
            bad += 1
            fail("%s: %s: got %s, want %s" % (what, name, got and got[:12], want[:12]))
    rc, out, err = run(["info", path])
    mtp = [l for l in out.decode().splitlines() if l.startswith("mtp:")]
    if rc != 0 or not mtp or "blk.2" not in mtp[0] or "--draft mtp" not in mtp[0]:
        fail("%s: info prints no MTP line from blk.2 for --draft mtp: %s" %
             (what, out.decode()[-300:]))
    print("ok   %s: %d tensors as the converter writes them, %d keys; %s" %
          (what, len(expected) - bad, len(WANT_KEYS), mtp[0] if mtp else ""), flush=True)


good = os.path.join(work, "good")
write_checkpoint(good)
check_model(good, "directory")
# the tokenizer from tokenizer.json: the ids of llama.cpp's conversion of the same files
conv = os.path.join(oracle, "hf", "qwen3_5", "gguf", "qwen3_5-f32.gguf")
for text in ("Hello world, the quick brown fox.", "<|user|>\nhi <eos>", "  x\t\n\n y"):
    for flags in ([], ["--add-special", "--parse-special"]):
        a, b = run(["tokenize", good, *flags, "--", text]), run(["tokenize", conv, *flags, "--", text])
        if a[0] != 0 or a[:2] != b[:2]:
            fail("tokenize %r %s: checkpoint %s, conversion %s" % (text, flags, a[:2], b[:2]))
check_model(os.path.join(good, "model.safetensors.index.json"), "index")
check_model(os.path.join(good, "model-00002-of-00002.safetensors"), "second shard")

# ---- bad checkpoints ---------------------------------------------------------------------------
COMMANDS = [["info", "{m}"], ["tensor", "{m}", "token_embd.weight", "-o", "{w}/out.bin"],
            ["tokenize", "{m}", "hello"], ["plan", "{m}"],
            ["run", "{m}", "-p", "hello", "-n", "2", "-c", "64"],
            ["logits", "{m}", "--tokens", "1,2", "-o", "{w}/out.bin"],
            ["bench", "{m}", "-p", "2", "-n", "1", "-r", "1", "--no-disk", "-c", "64"]]
CRASH = re.compile(r"Sanitizer|runtime error:|core dumped|Segmentation|Aborted|killed by signal")


def bad_case(name, pattern, make):
    d = os.path.join(work, name)
    write_checkpoint(d)
    make(d)
    m = d
    before = fails
    for c in COMMANDS:
        args = [a.format(m=m, w=work) for a in c]
        rc, out, err = run(args)
        lines = [l for l in err.splitlines() if l.strip()]
        what = "%s: nsctl %s" % (name, c[0])
        if rc is None:
            fail("%s: %s" % (what, err))
        elif rc <= 0 or rc >= 128 or CRASH.search(err):
            fail("%s: exit %s, stderr: %s" % (what, rc, err[-500:]))
        elif len(lines) != 1 or not re.search(pattern, lines[0]):
            fail("%s: want one line matching /%s/, got: %s" % (what, pattern, err[-500:]))
    if fails == before:
        print("ok   %-20s every command: one line, e.g. %s" % (name, lines[-1][:120]), flush=True)


SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"


def rm(d, f):
    os.unlink(os.path.join(d, f))


def edit_header(d, f, fn):
    path = os.path.join(d, f)
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    h = fn(b[8:8 + n])
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b[8 + n:])


def first_tensor(d, f):
    b = open(os.path.join(d, f), "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    return sorted(k for k in json.loads(b[8:8 + n]) if k != "__metadata__")[0]


def set_entry(key, value, which=None):
    def fn(h):
        j = json.loads(h)
        name = which or sorted(k for k in j if k != "__metadata__")[0]
        j[name][key] = value
        return json.dumps(j).encode()
    return fn


def config_edit(fn):
    def make(d):
        c = json.load(open(os.path.join(d, "config.json")))
        fn(c)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    return make


bad_case("no-config", r"no config\.json", lambda d: rm(d, "config.json"))
bad_case("no-weights", r"needs model\.safetensors",
         lambda d: [rm(d, f) for f in (SHARD1, SHARD2, "model.safetensors.index.json")])
bad_case("short-file", r"too short for a safetensors header",
         lambda d: open(os.path.join(d, SHARD1), "wb").write(b"\x10\0\0"))
bad_case("header-past-end", r"header length \d+ does not fit",
         lambda d: open(os.path.join(d, SHARD2), "r+b").write(struct.pack("<Q", 1 << 40)))
bad_case("header-not-json", r"not valid JSON",
         lambda d: edit_header(d, SHARD1, lambda h: h[:len(h) // 2] + b"}" * 8))
bad_case("missing-shard", r"names shard 'model-00002-of-00002.safetensors', which is missing",
         lambda d: rm(d, SHARD2))
bad_case("index-path-escape", r"not a file beside the index",
         lambda d: json.dump({"weight_map": {"lm_head.weight": "../x.safetensors"}},
                             open(os.path.join(d, "model.safetensors.index.json"), "w")))
bad_case("index-wrong-shard", r"should be in .* which does not hold it",
         lambda d: json.dump({"weight_map": {first_tensor(d, SHARD2): SHARD1}},
                             open(os.path.join(d, "model.safetensors.index.json"), "w")))
bad_case("past-end-of-file", r"ends at byte \d+ of the data but the file holds",
         lambda d: os.truncate(os.path.join(d, SHARD2), os.path.getsize(os.path.join(d, SHARD2)) - 5))
bad_case("unknown-dtype", r"unknown dtype 'X99'",
         lambda d: edit_header(d, SHARD1, set_entry("dtype", "X99")))
bad_case("int-dtype", r"has dtype I16; neurostream reads F32, F16 and BF16",
         lambda d: edit_header(d, SHARD1, set_entry("dtype", "I16", "lm_head.weight")))
bad_case("size-mismatch", r"needs \d+ bytes but data_offsets span",
         lambda d: edit_header(d, SHARD1, set_entry("shape", [3, 3], "lm_head.weight")))
bad_case("qkv-shape", r"in_proj_qkv.weight' does not have 2 \* key dim \+ value dim rows",
         lambda d: edit_header(d, SHARD1, set_entry(
             "shape", [QKV_ROWS // 2, 2 * N_EMBD],
             "model.language_model.layers.0.linear_attn.in_proj_qkv.weight")))
bad_case("unknown-arch", r"architecture 'LlamaForCausalLM' cannot be read from safetensors",
         config_edit(lambda c: c.update(architectures=["LlamaForCausalLM"])))
bad_case("layer-types", r"layer_types\[1\] is 'linear_attention' but full_attention_interval 2",
         config_edit(lambda c: c["text_config"].update(
             layer_types=["linear_attention", "linear_attention"])))
bad_case("heads", r"impossible dimensions",
         config_edit(lambda c: c["text_config"].update(linear_num_value_heads=5)))
bad_case("unknown-tensor", r"'model.language_model.layers.0.mlp.extra.weight' has no counterpart",
         lambda d: (tensors.update({"model.language_model.layers.0.mlp.extra.weight":
                                    ("F32", [2, 2], [1.0, 2.0, 3.0, 4.0])}),
                    write_checkpoint(d),
                    tensors.pop("model.language_model.layers.0.mlp.extra.weight")))
def drop_tensor(name):
    """Remove a tensor from its shard's header and from the index."""
    def make(d):
        index = os.path.join(d, "model.safetensors.index.json")
        j = json.load(open(index))
        edit_header(d, j["weight_map"].pop(name), lambda h: json.dumps(
            {k: v for k, v in json.loads(h).items() if k != name}).encode())
        json.dump(j, open(index, "w"))
    return make


bad_case("missing-expert", r"no mlp\.experts\.2\.down_proj\.weight",
         drop_tensor("model.language_model.layers.0.mlp.experts.2.down_proj.weight"))
bad_case("bad-tokenizer", r"tokenizer\.json: line \d+: not a JSON object",
         lambda d: open(os.path.join(d, "tokenizer.json"), "w").write("{\"model\": "))

shutil.rmtree(work, True)
print("%d failures" % fails)
sys.exit(1 if fails else 0)
