#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""PyTorch's training step of transformers' Llama on benchmarks/decoder train's shapes.

usage: torch_decoder_train.py OUT.json [--geometry llama-3-8b] [--scopes blocks1,whole_model]
                              [--batch 8] [--sequence 4096] [--checkpointing off,on] [--steps 10]

What a PyTorch user runs: FP32 parameters, torch.autocast to BF16, loss.backward() (or, for
blocks alone, y.backward(dy) with a fixed random dy, the input's gradient included),
torch.optim.AdamW(fused=True), zero_grad(set_to_none=True); attn_implementation="sdpa"
(causal). blocks<N>: N LlamaDecoderLayers on random FP32 hidden states, RoPE from
LlamaRotaryEmbedding; whole_model: LlamaForCausalLM on random ids with labels = ids (the model
shifts them). Checkpointing: torch.utils.checkpoint around each block (use_reentrant=False), or
gradient_checkpointing_enable() for the whole model. Each step is timed with CUDA events, the
median of --steps after 3 warm-ups; peak_bytes is torch.cuda.max_memory_allocated() over the
timed steps. A shape that does not fit is a row with "error". Writes {"torch", "transformers",
"gpu", "rows": [{"key", "seconds", "peak_bytes", "loss_first", "loss_last"}]}, keys as
benchmarks/decoder train names its rows, for scripts/peers/compare-decoder-training.py.
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
decoder_check = __import__("decoder-vs-transformers")  # its geometries and LlamaConfig builder


class Blocks(torch.nn.Module):
    """N decoder layers from hidden states to hidden states, RoPE computed once."""

    def __init__(self, config, count, checkpointing):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
        self.layers = torch.nn.ModuleList(LlamaDecoderLayer(config, layer_idx=i) for i in range(count))
        self.rotary = LlamaRotaryEmbedding(config=config)
        self.checkpointing = checkpointing

    def forward(self, x, positions):
        embeddings = self.rotary(x, positions)
        for layer in self.layers:
            kwargs = dict(attention_mask=None, position_ids=positions, position_embeddings=embeddings)
            if self.checkpointing:
                x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False, **kwargs)
            else:
                x = layer(x, **kwargs)
            x = x[0] if isinstance(x, tuple) else x  # transformers 4 returned a tuple
        return x


def time_steps(step, steps):
    """Median seconds of `steps` steps after 3 warm-ups, the peak memory, the first and last loss."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    losses, times = [], []
    for i in range(3 + steps):
        if i == 3:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start.record()
        loss = step()
        stop.record()
        stop.synchronize()
        if loss is not None:
            losses.append(float(loss))
        if i >= 3:
            times.append(start.elapsed_time(stop) * 1e-3)
    row = dict(seconds=statistics.median(times), peak_bytes=torch.cuda.max_memory_allocated())
    if losses:
        row.update(loss_first=losses[0], loss_last=losses[-1])
    return row


def measure(config, scope, batch, sequence, checkpointing, steps):
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    with torch.device("cuda"):
        if scope == "whole_model":
            model = LlamaForCausalLM(config)
            if checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model = Blocks(config, int(scope[len("blocks"):]), checkpointing)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    if scope == "whole_model":
        ids = torch.randint(0, config.vocab_size, (batch, sequence), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.detach()
    else:
        x = torch.rand(batch, sequence, config.hidden_size, device="cuda") * 2 - 1
        x.requires_grad_(True)
        positions = torch.arange(sequence, device="cuda").unsqueeze(0).expand(batch, -1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            shape = model(x, positions)
        dy = torch.rand_like(shape) * 2 - 1
        del shape

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = model(x, positions)
            y.backward(dy)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            x.grad = None
            return None
    try:
        return time_steps(step, steps)
    finally:
        del model, optimizer
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--geometry", default="llama-3-8b", choices=sorted(decoder_check.GEOMETRIES))
    parser.add_argument("--scopes", default="blocks1,whole_model")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--sequence", type=int, default=4096)
    parser.add_argument("--checkpointing", default="off,on")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import transformers
    config = decoder_check.llama_config(args.geometry)
    config._attn_implementation = "sdpa"
    rows = []
    for scope in [s for s in args.scopes.split(",") if s]:
        if scope != "whole_model" and not (scope.startswith("blocks") and scope[len("blocks"):].isdigit()):
            sys.exit(f"torch_decoder_train: --scopes takes blocks<N> or whole_model, got '{scope}'")
        for mode in [m for m in args.checkpointing.split(",") if m]:
            if mode not in ("off", "on"):
                sys.exit(f"torch_decoder_train: --checkpointing takes off and/or on, got '{mode}'")
            key = f"decoder_train/{args.geometry}/bf16/{scope}/b{args.batch}_s{args.sequence}" + \
                  ("/checkpointing" if mode == "on" else "")
            try:
                row = measure(config, scope, args.batch, args.sequence, mode == "on", args.steps)
            except torch.cuda.OutOfMemoryError as e:
                torch.cuda.empty_cache()
                row = dict(error=f"out of memory: {str(e).splitlines()[0]}")
            row["key"] = key
            print(json.dumps(row), flush=True)
            rows.append(row)
    with open(args.out, "w") as f:
        json.dump(dict(torch=torch.__version__, transformers=transformers.__version__,
                       gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
