#!/usr/bin/env python3
"""A Gemma 4 31B at its real width with fewer layers, random weights, and its
transformers reference. Runs ON the GPU machine (torch + transformers 5.17).

  python3 scripts/realwidth/make_checkpoint.py --out /tmp/rw --layers 6
  python3 scripts/realwidth/make_checkpoint.py --out /tmp/big --layers 36 --no-reference

Checkpoint: the text config of tests/data/gemma4-31b/config.json (explicit
global_head_dim / num_global_key_value_heads schema, every width as published)
with num_hidden_layers and layer_types cut to --layers (the [sliding x5, full]
pattern; the last layer must be global), a minimal vision tower (as in the
fixtures' tiny-random: its tensors are there to be skipped), saved by
Gemma4ForConditionalGeneration.save_pretrained in bf16 (model.language_model.*,
shards of --max-shard-size). config.json is then rewritten in the published
schema (transformers' own is kept as config.transformers.json); the reference
is computed from the checkpoint as loaded back by from_pretrained with that
config.json, so the published schema is what both sides read.

Weights (seeded): linears and the tied embedding N(0, 0.02 / 0.03); RMSNorm
weights U(0.5, 1.5); layer_scalar U(0.5, 1.5); q_norm / k_norm U(0.25, 0.45).
The last keeps attention out of a hard argmax: scores are q.k at scale 1 over
unit-rms heads, so with weights near 1 their spread is sqrt(D) = 16..23 and a
random network flips its attention winner on any rounding; at ~0.35 the
spread is ~2..3 (a trained model's q/k norms do the same job).

Reference (fp32 on the GPU, TF32 off, eager attention, no KV cache: a full
recompute per greedy step), in the fixtures' golden format
(shared/fixtures/README.md): golden.json prompts[i] {ids, greedy, margins,
min_margin, prefill_rows}; golden.safetensors prompt{i}.prefill_logits
[len(prefill_rows), vocab] and prompt{i}.step_logits [steps, vocab] fp32.
prefill_rows lists the positions stored (all for the short prompts; for the
long one every 256th, the last 64 and the window / pass edges 1023, 1025,
2047, 2049). The embedding is scaled by sqrt(H) unrounded (fp32 compute).
"""
import argparse
import json
import os
import shutil
import sys
import time

T0 = time.time()


def log(*args):
    print(f"[{time.time() - T0:7.1f}s]", *args, flush=True)


def repo_root():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def build_config_dict(layers, layer_types=None):
    with open(os.path.join(repo_root(), "tests/data/gemma4-31b/config.json")) as f:
        cfg = json.load(f)
    text = cfg["text_config"]
    types = text["layer_types"][:layers]
    if layer_types:  # e.g. "G" or "S,G": to tell the layer types apart
        names = {"S": "sliding_attention", "G": "full_attention"}
        types = [names[x.strip().upper()] for x in layer_types.split(",")]
        layers = len(types)
    if len(types) != layers or types[-1] != "full_attention":
        sys.exit(f"--layers {layers}: the cut of the 31B pattern must end with a global layer (use a multiple of 6)")
    text["num_hidden_layers"] = layers
    text["layer_types"] = types
    # A minimal vision tower, as the fixtures' tiny-random has: its tensors are
    # saved (the published layout) and must be skipped by the loader.
    cfg["vision_config"] = {"model_type": "gemma4_vision", "hidden_size": 8}
    return cfg


def init_weights(model, seed, embed_std, linear_std):
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    prefix = "model.language_model."
    counts = {}

    def uniform_(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=g, device="cuda", dtype=torch.float32) * (hi - lo) + lo)

    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith(prefix):
                continue
            short = name[len(prefix):]
            if short == "embed_tokens.weight":
                p.copy_(torch.randn(p.shape, generator=g, device="cuda", dtype=torch.float32) * embed_std)
                kind = "embed"
            elif short.endswith("_proj.weight"):
                p.copy_(torch.randn(p.shape, generator=g, device="cuda", dtype=torch.float32) * linear_std)
                kind = "linear"
            elif short.endswith("q_norm.weight") or short.endswith("k_norm.weight"):
                uniform_(p, 0.25, 0.45)
                kind = "qk_norm"
            elif short.endswith("norm.weight"):
                uniform_(p, 0.5, 1.5)
                kind = "norm"
            else:
                sys.exit(f"no init rule for {name} {tuple(p.shape)}")
            counts[kind] = counts.get(kind, 0) + 1
        for name, b in model.named_buffers():
            if name.startswith(prefix) and name.endswith("layer_scalar"):
                uniform_(b, 0.5, 1.5)
                counts["layer_scalar"] = counts.get("layer_scalar", 0) + 1
    log("init:", counts)
    if counts.get("layer_scalar", 0) == 0:
        sys.exit("no layer_scalar buffer found: this transformers keeps it elsewhere")


def make_checkpoint(args):
    import torch
    import transformers
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    cfg_dict = build_config_dict(args.layers, args.layer_types)
    args.layers = cfg_dict["text_config"]["num_hidden_layers"]
    config = Gemma4Config.from_dict(json.loads(json.dumps(cfg_dict)))
    torch.manual_seed(args.seed)  # the vision tower's own init
    build_dtype = torch.bfloat16 if args.build_bf16 else torch.float32
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(build_dtype)
    except (TypeError, RuntimeError) as e:  # older torch: float32/64 only
        log(f"cannot build in {build_dtype} ({e}): building in float32")
        build_dtype = torch.float32
    try:
        with torch.device("cuda"):
            model = Gemma4ForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(old)
    model.eval()
    n = sum(p.numel() for p in model.parameters())
    log(f"built Gemma4ForConditionalGeneration ({build_dtype}): {n / 1e9:.3f} B parameters, transformers "
        f"{transformers.__version__}, torch {torch.__version__}")
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    if head is not None and head.weight.data_ptr() != emb.data_ptr():
        log("WARNING: lm_head is not tied to the embedding at construction: tying it")
        head.weight = emb
    init_weights(model, args.seed, args.embed_std, args.linear_std)
    model.to(torch.bfloat16)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    t = time.time()
    model.save_pretrained(args.out, max_shard_size=args.max_shard_size)
    log(f"save_pretrained: {time.time() - t:.1f} s")
    # The published config.json: the 31B's text_config (cut), explicit schema.
    shutil.move(os.path.join(args.out, "config.json"), os.path.join(args.out, "config.transformers.json"))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    shutil.copy(os.path.join(repo_root(), "tests/data/gemma4-31b/generation_config.json"), args.out)
    tok = os.path.join(repo_root(), "tests/data/tokenizers/gemma3.tokenizer.json.gz")
    if os.path.exists(tok):  # 262,144 pieces like Gemma 4's: lets the server start
        import gzip
        with gzip.open(tok, "rt", encoding="utf-8") as src:
            t = json.load(src)
        # Gemma 3's adds <image_soft_token> as id 262144, past the model's
        # vocabulary: the loaders refuse a tokenizer larger than the model.
        vocab = cfg_dict["text_config"]["vocab_size"]
        t["added_tokens"] = [a for a in t.get("added_tokens", []) if a["id"] < vocab]
        with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as dst:
            json.dump(t, dst, ensure_ascii=False)
    index = os.path.join(args.out, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            names = list(json.load(f)["weight_map"])
        groups = {}
        for k in names:
            g = ".".join(k.split(".")[:2]) if k.startswith("model.") else k.split(".")[0]
            groups[g] = groups.get(g, 0) + 1
        log("tensors by prefix:", groups)
    sizes = sorted((fn, os.path.getsize(os.path.join(args.out, fn))) for fn in os.listdir(args.out))
    log("files:", ", ".join(f"{fn} {s / 1e9:.2f} GB" for fn, s in sizes if s > 1e6))
    return model


def check_loaded(saved, ref):
    """The fp32 model from_pretrained gave must equal the saved bf16 one,
    upcast; where it does not, the saved values are put in (the reference
    must be of the checkpoint on disk) and that is reported loudly."""
    import torch

    want = dict(saved.named_parameters())
    want.update({k: v for k, v in saved.named_buffers() if k.endswith("layer_scalar")})
    got = dict(ref.named_parameters())
    got.update({k: v for k, v in ref.named_buffers() if k.endswith("layer_scalar")})
    bad, n = [], 0
    with torch.no_grad():
        for k, v in want.items():
            if not k.startswith("model.language_model."):
                continue
            n += 1
            if k not in got or got[k].shape != v.shape:
                bad.append(f"{k} missing or misshapen after load")
            elif not torch.equal(got[k].float(), v.float()):
                bad.append(f"{k} differs after load (repaired)")
                got[k].copy_(v.float())
    if bad:
        log(f"WARNING: from_pretrained did not give back {len(bad)} of {n} saved text tensors: " + "; ".join(bad[:8]))
    else:
        log(f"from_pretrained gave back all {n} text tensors exactly (fp32 upcast of the bf16 checkpoint)")


def prefill_rows(n):
    if n <= 2048:
        return list(range(n))
    rows = set(range(0, n, 256)) | set(range(n - 64, n)) | {r for r in (1023, 1025, 2047, 2049) if r < n}
    return sorted(rows)


def reference(args, saved):
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import Gemma4ForConditionalGeneration

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    t = time.time()
    ref, info = Gemma4ForConditionalGeneration.from_pretrained(
        args.out, dtype=torch.float32, attn_implementation="eager", device_map="cuda", output_loading_info=True)
    ref.eval()
    log(f"from_pretrained fp32: {time.time() - t:.1f} s; loading info:",
        {k: (list(v)[:5] if hasattr(v, "__iter__") else v) for k, v in info.items()})
    check_loaded(saved, ref)
    del saved
    torch.cuda.empty_cache()

    tc = ref.config.get_text_config()
    lm = ref.model.language_model
    glob = lm.layers[args.layers - 1].self_attn
    shapes = (tuple(glob.q_proj.weight.shape), tuple(glob.k_proj.weight.shape), getattr(glob, "v_proj", None) is None)
    scale = getattr(lm.embed_tokens, "embed_scale", None)
    log(f"reference text model: {len(lm.layers)} layers, last (global) q/k {shapes[0]} {shapes[1]} k_eq_v "
        f"{shapes[2]}, sliding_window {tc.sliding_window}, softcap {tc.final_logit_softcapping}, "
        f"embed_scale {float(scale) if scale is not None else '?'}")
    if shapes != ((32 * 512, 5376), (4 * 512, 5376), True):
        log("WARNING: the global layer does not have the 31B's shapes")
    emb = lm.embed_tokens.weight  # tied LM head, fp32
    cap = tc.final_logit_softcapping
    vocab = emb.shape[0]

    @torch.no_grad()
    def last_hidden(ids):
        out = lm(input_ids=torch.tensor([ids], device="cuda"), use_cache=False)
        return out.last_hidden_state[0]

    @torch.no_grad()
    def logits_of(h):  # [R, H] -> [R, V] fp32, chunked by the caller
        x = h.float() @ emb.t()
        return torch.tanh(x / cap) * cap if cap else x

    rng = np.random.default_rng(args.seed + 1)
    golden = {"prompts": [], "reference": {
        "what": "transformers Gemma4ForConditionalGeneration, fp32 on the GPU (TF32 off), eager attention, "
                "full recompute per greedy step; embedding scale sqrt(H) unrounded",
        "seed": args.seed, "layers": args.layers,
        "weights": f"linears N(0,{args.linear_std}), embedding N(0,{args.embed_std}), norms U(0.5,1.5), "
                   "q/k norms U(0.25,0.45), layer_scalar U(0.5,1.5); bf16 on disk",
        "prefill_rows": "positions stored in prefill_logits; all when the prompt has <= 2048 tokens, else "
                        "every 256th, the last 64 and 1023/1025/2047/2049"}}
    tensors = {}
    for i, n in enumerate(args.lengths):
        t = time.time()
        # Below 255,999: the image/audio/video marker ids sit above and a
        # multimodal forward would treat them specially.
        ids = [2] + [int(x) for x in rng.integers(10, 255000, size=n - 1)]
        rows = prefill_rows(n)
        h = last_hidden(ids)
        pre = []
        for b in range(0, len(rows), 256):
            idx = torch.tensor(rows[b:b + 256], device="cuda")
            pre.append(logits_of(h.index_select(0, idx)).cpu())
        pre = torch.cat(pre)
        if i == 0:  # the LM head here = transformers' own
            try:
                with torch.no_grad():
                    full = ref(input_ids=torch.tensor([ids], device="cuda"), logits_to_keep=1,
                               use_cache=False).logits[0, -1]
                d = (full.float().cpu() - pre[-1]).abs().max().item()
                log(f"check: LM head here vs model(...).logits at the last position: max |diff| {d:.3g}"
                    + ("" if d < 1e-3 else "  <-- WARNING: not transformers' LM head"))
            except Exception as e:  # a sanity check only
                log(f"check skipped: model(...) raised {type(e).__name__}: {e}")
        step_rows = [pre[-1].clone()]
        seq = list(ids)
        greedy, margins = [], []
        for s in range(args.steps):
            row = step_rows[-1]
            top = torch.topk(row, 2)
            greedy.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            if s + 1 == args.steps:
                break
            seq.append(greedy[-1])
            step_rows.append(logits_of(last_hidden(seq)[-1:])[0].cpu())
        tensors[f"prompt{i}.prefill_logits"] = pre.contiguous()
        tensors[f"prompt{i}.step_logits"] = torch.stack(step_rows).contiguous()
        golden["prompts"].append({"ids": ids, "greedy": greedy, "margins": margins, "min_margin": min(margins),
                                  "prefill_rows": rows})
        log(f"prompt {i}: {n} tokens, {len(rows)} prefill rows, greedy {greedy}, min margin {min(margins):.4f} "
            f"({time.time() - t:.1f} s)")
    save_file(tensors, os.path.join(args.out, "golden.safetensors"))
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f)
    log(f"golden.safetensors {os.path.getsize(os.path.join(args.out, 'golden.safetensors')) / 1e9:.2f} GB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--layer-types", help="comma list of S (sliding) / G (global), last G; overrides --layers")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--embed-std", type=float, default=0.03)
    ap.add_argument("--linear-std", type=float, default=0.02)
    ap.add_argument("--max-shard-size", default="2GB")
    ap.add_argument("--lengths", type=int, nargs="+", default=[100, 1100, 3000])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--no-reference", action="store_true", help="only the checkpoint (timing runs)")
    ap.add_argument("--build-bf16", action="store_true", help="build in bf16 (half the GPU memory; big runs)")
    args = ap.parse_args()
    saved = make_checkpoint(args)
    if args.no_reference:
        return
    reference(args, saved)
    log("done")


if __name__ == "__main__":
    main()
