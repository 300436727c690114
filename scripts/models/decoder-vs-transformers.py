#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Checks gpucmp's decoder against transformers on the same random weights.

usage: decoder-vs-transformers.py BUILD_DIR OUT_DIR [--geometry small|llama-3.2-1b|llama-3-8b]
                                  [--dtype bf16|fp16] [--prompt N] [--steps S] [--seed K]

1. Builds transformers' LlamaForCausalLM of the geometry with its own seeded initialisation in
   DTYPE and saves it (save_pretrained: config.json and safetensors) under OUT_DIR/checkpoint.
2. Runs `BUILD_DIR/benchmarks/decoder logits` on that checkpoint: a prompt of N seeded ids, then
   S greedy steps (every operation verified before the model runs).
3. Runs transformers (sdpa attention) on the prompt followed by gpucmp's greedy tokens, one
   causal forward (teacher forcing): the logits after the prompt and after each token, in
   DTYPE and, from the same stored weights, in FP32 (TF32 off) as the reference.
4. Compares every step's logits: error = max |x - FP32| / max |FP32| for gpucmp and for
   transformers in DTYPE (the yardstick: what the same recipe costs in PyTorch), and the greedy
   tokens: each must be FP32's argmax wherever FP32's top-two margin exceeds twice the bound
   (closer calls are counted, not judged).
Bounds (docs/models.md): BF16 0.05, FP16 0.01 of the largest logit. Writes
OUT_DIR/decoder_vs_transformers.json and .md; exit status 1 when a bound is missed.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import torch

BOUNDS = {"bf16": 0.05, "fp16": 0.01}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# The geometries: Hugging Face's config.json keys. llama-3.2-1b and llama-3-8b are the presets
# of include/gpucmp/models/decoder_config.hpp.
GEOMETRIES = {
    "small": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  intermediate_size=512, vocab_size=1000, max_position_embeddings=512, rope_theta=10000.0,
                  rope_scaling=None, tie_word_embeddings=False),
    "llama-3.2-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, intermediate_size=8192, vocab_size=128256, max_position_embeddings=131072,
                         rope_theta=500000.0, tie_word_embeddings=True,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "llama-3-8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                       head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=8192,
                       rope_theta=500000.0, rope_scaling=None, tie_word_embeddings=False),
}


def llama_config(geometry):
    """A LlamaConfig of `geometry`, its RoPE in the form this transformers takes."""
    from transformers import LlamaConfig
    import transformers
    g = dict(GEOMETRIES[geometry])
    theta, scaling = g.pop("rope_theta"), g.pop("rope_scaling")
    if int(transformers.__version__.split(".")[0]) >= 5:
        g["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=theta)
    else:
        g["rope_theta"], g["rope_scaling"] = theta, scaling
    return LlamaConfig(rms_norm_eps=1e-5, **g)


def relative_error(rows, reference):
    worst = max(float((r - f).abs().max()) for r, f in zip(rows, reference))
    return worst / max(float(f.abs().max()) for f in reference)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES), default="small")
    parser.add_argument("--dtype", choices=sorted(BOUNDS), default="bf16")
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from transformers import LlamaForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, "checkpoint")
    config = llama_config(args.geometry)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).to(DTYPES[args.dtype])
    model.save_pretrained(checkpoint, safe_serialization=True)
    del model
    weights = os.path.join(checkpoint, "model.safetensors")
    if not os.path.exists(weights):
        weights = os.path.join(checkpoint, "model.safetensors.index.json")
    generator = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(0, config.vocab_size, (args.prompt,), generator=generator).tolist()
    stem = os.path.join(args.out, "gpucmp_logits")
    tool = os.path.join(args.build, "benchmarks", "decoder")
    subprocess.run([tool, "logits", os.path.join(checkpoint, "config.json"), weights, args.dtype, ",".join(map(str, prompt)),
                    str(args.steps), stem], check=True)
    with open(stem + ".json") as f:
        ours = json.load(f)
    vocab, rows = ours["vocab"], args.steps + 1
    with open(stem + ".bin", "rb") as f:
        data = f.read()
    if len(data) != 4 * vocab * rows:
        sys.exit(f"decoder-vs-transformers: {stem}.bin holds {len(data)} bytes, not {rows} x {vocab} float32")
    gpucmp_logits = torch.tensor(struct.unpack(f"<{vocab * rows}f", data)).view(rows, vocab)
    ids = torch.tensor([prompt + ours["tokens"][:-1]], device="cuda")
    last = slice(args.prompt - 1, args.prompt - 1 + rows)
    logits = {}
    for name, dtype in (("transformers", DTYPES[args.dtype]), ("fp32", torch.float32)):
        model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=dtype, attn_implementation="sdpa").cuda().eval()
        with torch.no_grad():
            logits[name] = model(ids).logits[0, last].float().cpu()
        del model
        torch.cuda.empty_cache()
    reference = logits["fp32"]
    bound = BOUNDS[args.dtype]
    ours_error = relative_error(gpucmp_logits, reference)
    theirs_error = relative_error(logits["transformers"], reference)
    judged = agreed = 0
    for step in range(rows):
        top2 = torch.topk(reference[step], 2).values
        if float(top2[0] - top2[1]) > 2 * bound * float(reference.abs().max()):
            judged += 1
            agreed += int(int(reference[step].argmax()) == ours["tokens"][step])
    passed = ours_error <= bound and agreed == judged
    result = {"geometry": args.geometry, "dtype": args.dtype, "prompt": args.prompt, "steps": args.steps,
              "bound": bound, "gpucmp_error": ours_error, "transformers_error": theirs_error,
              "greedy_judged": judged, "greedy_agreed": agreed, "greedy_disagreed": judged - agreed, "passed": passed, "tokens": ours["tokens"],
              "torch": torch.__version__, "transformers": __import__("transformers").__version__,
              "gpu": torch.cuda.get_device_name(), "algorithms": ours["algorithms"]}
    with open(os.path.join(args.out, "decoder_vs_transformers.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = ("| geometry | dtype | gpucmp error vs FP32 | transformers error vs FP32 | bound | greedy tokens agreeing "
             "(of those FP32 calls clearly) |\n|---|---|---|---|---|---|\n"
             f"| {args.geometry} | {args.dtype} | {ours_error:.4f} | {theirs_error:.4f} | {bound} | {agreed} of {judged} |\n")
    with open(os.path.join(args.out, "decoder_vs_transformers.md"), "w") as f:
        f.write(table)
    sys.stdout.write(table)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
