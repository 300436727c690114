#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp's decoder training step against PyTorch autograd on the same weights and batch.

usage: decoder-training-vs-pytorch.py BUILD OUT [--geometry small] [--batch 2] [--sequence 64]
                                      [--steps 20] [--lr 1e-3] [--seed 0] [--checkpointing]

transformers' LlamaForCausalLM of the geometry (decoder-vs-transformers.py's), its own random
initialisation in FP32, saved as safetensors, and one random batch whose labels are its ids (the
model shifts them; gpucmp labels each token with the next). Then, each for --steps steps of
AdamW at --lr (torch's other defaults) on that batch:
  gpucmp     BUILD/benchmarks/decoder train-check: BF16 mixed precision (FP32 master weights);
  FP32       PyTorch in FP32, TF32 off: the reference;
  AMP        PyTorch with torch.autocast to BF16 and FP32 parameters: what the same precision
             costs PyTorch, the yardstick.
Compared with FP32, per checkpoint tensor: the first step's gradient and the first step's
weight update (after - before), each as a relative L2 error; and the loss curve's largest
relative gap. gpucmp passes a measure when its worst error is within max(2 x AMP's worst, the
measure's floor: 0.01 for gradients and the loss, 0.02 for updates, whose first AdamW step is
lr x sign(g) and flips where a gradient is near zero). Writes OUT/decoder_training_vs_pytorch.json;
exit status 1 when a measure fails.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
decoder_check = __import__("decoder-vs-transformers")  # its geometries and LlamaConfig builder

FLOORS = {"gradients": 0.01, "updates": 0.02, "loss": 0.01}


def relative_error(got, want):
    got, want = got.double().flatten(), want.double().flatten()
    norm = float(want.norm())
    return float((got - want).norm()) / norm if norm > 0 else float((got - want).norm())


def train_pytorch(model, ids, steps, lr, amp):
    """Each step's loss, the first step's gradients and the weights after it, by name."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, gradients, weights = [], {}, {}
    for step in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if step == 0:
            gradients = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step == 0:
            weights = {n: p.detach().clone() for n, p in model.named_parameters()}
        losses.append(float(loss))
    return losses, gradients, weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--geometry", choices=sorted(decoder_check.GEOMETRIES), default="small")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--sequence", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpointing", action="store_true", help="gpucmp checkpoints its activations")
    args = parser.parse_args()
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, "checkpoint")
    config = decoder_check.llama_config(args.geometry)
    config._attn_implementation = "sdpa"
    torch.manual_seed(args.seed)
    LlamaForCausalLM(config).save_pretrained(checkpoint, safe_serialization=True)
    weights_file = os.path.join(checkpoint, "model.safetensors")
    if not os.path.exists(weights_file):
        weights_file = os.path.join(checkpoint, "model.safetensors.index.json")
    generator = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.sequence), generator=generator, dtype=torch.int32)
    tokens_file = os.path.join(args.out, "tokens.bin")
    ids.numpy().tofile(tokens_file)
    stem = os.path.join(args.out, "gpucmp")
    command = [os.path.join(args.build, "benchmarks", "decoder"), "train-check", os.path.join(checkpoint, "config.json"),
               weights_file, tokens_file, str(args.batch), str(args.sequence), str(args.steps), repr(args.lr), stem]
    if args.checkpointing:
        command.append("checkpointing")
    subprocess.run(command, check=True)
    with open(stem + ".json") as f:
        ours = json.load(f)
    our_gradients = load_file(stem + "_gradients.safetensors")
    our_weights = load_file(stem + "_weights.safetensors")

    ids = ids.long().cuda()
    runs = {}
    for name, amp in (("fp32", False), ("amp", True)):
        model = LlamaForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32).cuda()
        model.config._attn_implementation = "sdpa"
        model.train()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        runs[name] = train_pytorch(model, ids, args.steps, args.lr, amp) + (before,)
        del model
        torch.cuda.empty_cache()
    reference_losses, reference_gradients, reference_weights, before = runs["fp32"]
    missing = sorted(set(reference_gradients) - set(our_gradients))
    if missing:
        sys.exit(f"decoder-training-vs-pytorch: gpucmp wrote no gradient of {', '.join(missing)}")

    def errors(gradients, weights):
        out = {}
        for n in reference_gradients:
            update = weights[n].cpu() - before[n].cpu()
            out[n] = {"gradient": relative_error(gradients[n].cpu(), reference_gradients[n].cpu()),
                      "update": relative_error(update, reference_weights[n].cpu() - before[n].cpu())}
        return out

    gpucmp_errors = errors(our_gradients, our_weights)
    amp_errors = errors(runs["amp"][1], runs["amp"][2])

    def loss_gap(losses):
        return max(abs(a - b) / abs(b) for a, b in zip(losses, reference_losses))

    worst = {
        "gradients": (max(e["gradient"] for e in gpucmp_errors.values()), max(e["gradient"] for e in amp_errors.values())),
        "updates": (max(e["update"] for e in gpucmp_errors.values()), max(e["update"] for e in amp_errors.values())),
        "loss": (loss_gap(ours["losses"]), loss_gap(runs["amp"][0])),
    }
    verdicts = {}
    for measure, (ours_worst, amp_worst) in worst.items():
        bound = max(2 * amp_worst, FLOORS[measure])
        verdicts[measure] = dict(gpucmp=ours_worst, amp=amp_worst, bound=bound, passed=ours_worst <= bound)
        print(f"{measure}: gpucmp {ours_worst:.4g}, PyTorch AMP {amp_worst:.4g}, bound {bound:.4g}: "
              f"{'pass' if ours_worst <= bound else 'FAIL'}")
    result = dict(geometry=args.geometry, batch=args.batch, sequence=args.sequence, steps=args.steps, lr=args.lr,
                  checkpointing=args.checkpointing, torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                  verdicts=verdicts, losses=dict(gpucmp=ours["losses"], fp32=reference_losses, amp=runs["amp"][0]),
                  tensors={n: dict(gpucmp=gpucmp_errors[n], amp=amp_errors[n]) for n in reference_gradients})
    with open(os.path.join(args.out, "decoder_training_vs_pytorch.json"), "w") as f:
        json.dump(result, f, indent=1)
    sys.exit(0 if all(v["passed"] for v in verdicts.values()) else 1)


if __name__ == "__main__":
    main()
