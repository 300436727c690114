#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""transformers' Llama on benchmarks/decoder's steps: prefill and decode, random weights.

usage: transformers_decoder.py OUT.json [--geometry llama-3-8b] [--dtype bf16] [--prompts 4096,...]
                               [--batches 1,16] [--contexts 2048] [--tokens 32]

LlamaForCausalLM of the geometry (scripts/models/decoder-vs-transformers.py's), random weights,
attn_implementation="sdpa", inference_mode. Prefill: one forward of batch x prompt tokens with
logits_to_keep=1, CUDA-event timed, median of 5 after 2 warm-ups. Decode at a context: greedy
generate() after a prompt of `context` tokens, with the default (dynamic) cache and with
cache_implementation="static" (the fastest working path on the H200; its torch.compile mode
crashed there), per step = (time of `tokens` + 1 new tokens - time of 1) / tokens, host clock
around a synchronised generate (a step's Python is part of its cost), median of 3. Writes
{"torch", "transformers", "gpu", "rows": [{"key", "backend", "seconds"}]}, keys as
benchmarks/decoder names its rows (decoder/<geometry>/<dtype>/prefill/b<batch>_p<prompt>,
.../decode/b<batch>_c<context>), for scripts/peers/compare-decoder.py.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
decoder_check = __import__("decoder-vs-transformers")  # its geometries and LlamaConfig builder

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def numbers(text):
    return [int(x) for x in text.split(",") if x]


def prefill_seconds(model, ids):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for repeat in range(7):
        start.record()
        model(ids, logits_to_keep=1)
        stop.record()
        stop.synchronize()
        if repeat >= 2:
            times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def generate_seconds(model, ids, new_tokens, cache):
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    if cache:
        kwargs["cache_implementation"] = cache
    torch.cuda.synchronize()
    begin = time.perf_counter()
    model.generate(ids, **kwargs)
    torch.cuda.synchronize()
    return time.perf_counter() - begin


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--geometry", default="llama-3-8b", choices=sorted(decoder_check.GEOMETRIES))
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--prompts", default="128,512,1024,2048,4096")
    parser.add_argument("--batches", default="1,4,16")
    parser.add_argument("--contexts", default="1024,2048,4095")
    parser.add_argument("--tokens", type=int, default=32, help="decode steps timed per generate")
    args = parser.parse_args()
    from transformers import LlamaForCausalLM
    config = decoder_check.llama_config(args.geometry)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(DTYPES[args.dtype])
    model.config._attn_implementation = "sdpa"
    model.generation_config.pad_token_id = 0
    model.eval()
    prefix = f"decoder/{args.geometry}/{args.dtype}"
    rows = []
    with torch.inference_mode():
        for prompt in numbers(args.prompts):
            ids = torch.randint(0, config.vocab_size, (1, prompt), device="cuda")
            seconds = prefill_seconds(model, ids)
            rows.append({"key": f"{prefix}/prefill/b1_p{prompt}", "backend": "eager", "seconds": seconds})
            print(f"prefill {prompt}: {seconds * 1e3:.1f} ms", flush=True)
        for batch in numbers(args.batches):
            for context in numbers(args.contexts):
                ids = torch.randint(0, config.vocab_size, (batch, context), device="cuda")
                for cache in ("static", None):
                    try:
                        generate_seconds(model, ids, 2, cache)  # warm-up (a static cache compiles nothing here)
                        steps = []
                        for _ in range(3):
                            longer = generate_seconds(model, ids, args.tokens + 1, cache)
                            steps.append((longer - generate_seconds(model, ids, 1, cache)) / args.tokens)
                        seconds = statistics.median(steps)
                    except (RuntimeError, ValueError) as e:  # e.g. out of memory: the row says so
                        rows.append({"key": f"{prefix}/decode/b{batch}_c{context}", "backend": cache or "default",
                                     "seconds": None, "refused": str(e).splitlines()[0][:200]})
                        torch.cuda.empty_cache()
                        continue
                    rows.append({"key": f"{prefix}/decode/b{batch}_c{context}", "backend": cache or "default",
                                 "seconds": seconds})
                    print(f"decode b{batch} c{context} {cache or 'default'}: {seconds * 1e3:.2f} ms/step", flush=True)
    import transformers
    out = {"torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(),
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
