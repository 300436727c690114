#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Exports torchvision's ResNet-50 v1.5 weights and a reference batch for gpucmp.

Writes to OUT_DIR:
  resnet50.safetensors   the model's state_dict (what gpucmp's resnet50_from_file reads)
  images.safetensors     one F32 tensor "images", N x 3 x 224 x 224 (random, normalised scale)
  reference.json         torchvision's logits for that batch in FP64 and FP32 (TF32 off), and
                         PyTorch's own FP16 / BF16 / TF32 logits, as yardsticks for gpucmp's

Without --pretrained the weights are torchvision's initialisation with a fixed seed, and the
batch norms get random statistics (running mean, variance, gamma, beta), so folding them is
really exercised; each bottleneck's last batch norm gets a small gamma, as trained networks
have, which keeps the residual stream within FP16 range. --pretrained loads a local file
(the machines here have no network access).

Usage: export_resnet50.py OUT_DIR [--batch 64] [--seed 1] [--pretrained FILE.pth]
"""
import argparse
import json
import os

import torch
import torchvision
from safetensors.torch import save_file


def randomise_batch_norms(model, generator):
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            c = module.num_features
            last_of_block = name.endswith("bn3")
            with torch.no_grad():
                low, high = (0.05, 0.3) if last_of_block else (0.5, 1.5)
                module.weight.copy_(torch.empty(c).uniform_(low, high, generator=generator))
                module.bias.copy_(torch.empty(c).uniform_(-0.2, 0.2, generator=generator))
                module.running_mean.copy_(torch.empty(c).normal_(0.0, 0.2, generator=generator))
                module.running_var.copy_(torch.empty(c).uniform_(0.5, 2.0, generator=generator))


def logits(model, images, dtype, channels_last, tf32):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    m = model.to(dtype)
    x = images.to(dtype)
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        out = m(x).double().cpu()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pretrained", help="a local torchvision ResNet-50 state_dict (.pth)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50(weights=None)
    if args.pretrained:
        model.load_state_dict(torch.load(args.pretrained, map_location="cpu"))
    else:
        randomise_batch_norms(model, torch.Generator().manual_seed(args.seed + 1))
    model.eval()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(args.out_dir, "resnet50.safetensors"))

    images = torch.randn(args.batch, 3, 224, 224, generator=torch.Generator().manual_seed(args.seed + 2))
    save_file({"images": images.contiguous()}, os.path.join(args.out_dir, "images.safetensors"))

    model = model.cuda()
    x = images.cuda()
    torch.backends.cudnn.benchmark = False
    reference = {
        "batch": args.batch,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "weights": "pretrained file" if args.pretrained else f"torchvision init, seed {args.seed}, random batch-norm statistics",
        "fp64": logits(model, x, torch.float64, False, False).tolist(),
        "fp32": logits(model, x, torch.float32, False, False).tolist(),
        "torch_tf32": logits(model, x, torch.float32, False, True).tolist(),
        "torch_fp16": logits(model, x, torch.float16, True, False).tolist(),
        "torch_bf16": logits(model, x, torch.bfloat16, True, False).tolist(),
    }
    with open(os.path.join(args.out_dir, "reference.json"), "w") as f:
        json.dump(reference, f)
    ref = torch.tensor(reference["fp64"])
    print(f"export_resnet50: {len(state)} tensors, batch {args.batch}; FP64 logits in "
          f"[{ref.min():.3f}, {ref.max():.3f}], top-1 classes used: {len(set(ref.argmax(1).tolist()))}")


if __name__ == "__main__":
    main()
