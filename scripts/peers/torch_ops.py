#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Times the operation sweeps' shapes through PyTorch, the way gpucmp's graph mode times them.

Each operation is captured `--calls` times back to back into one CUDA graph; the graph is
replayed between two events, `--repetitions` times, after warm-up; the median per call is
reported. Neither side pays launch latency, and both keep the GPU busy in the same way.
Shapes are laid out so that PyTorch makes the same cuBLAS call as gpucmp's column-major
problem (C^T = B^T A^T in row-major terms), and convolutions run channels-last with
cudnn.benchmark=True (timed algorithm search), warmed up before capture. 2:4 sparse GEMMs
(--only sparse) run through to_sparse_semi_structured on cuSPARSELt, as a PyTorch user runs
them, and through torch._cslt_sparse_mm on cuSPARSELt's own search's choice; what PyTorch
refuses is listed in meta["refused"].

Usage: torch_ops.py --out torch_ops.json [--only gemm,deepbench,conv,copy[,conv_fp32,sparse]]
Writes a list of rows: {"key", "seconds", "flops", "bytes"}; keys match compare-ops.py's.
"""
import argparse
import json
import math
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DEEPBENCH_GEMMS = [  # m, n, k, transpose_a, transpose_b (column-major, as gpucmp)
    (1760, 128, 1760, False, False), (2560, 64, 2560, False, False), (4096, 128, 4096, False, False),
    (4096, 7000, 4096, False, False), (5124, 9124, 2560, True, False), (35, 8457, 2560, False, False),
    (7680, 128, 2560, False, False), (3072, 128, 1024, True, False), (1024, 16, 500000, False, False),
    (7680, 24000, 2560, False, False), (512, 24000, 2816, False, False),
]

# The 23 distinct ResNet-50 v1.5 convolutions: (C, K, kernel, stride, padding, input size).
RESNET50_CONVS = [
    (3, 64, 7, 2, 3, 224), (64, 64, 1, 1, 0, 56), (64, 64, 3, 1, 1, 56), (64, 256, 1, 1, 0, 56),
    (256, 64, 1, 1, 0, 56), (256, 128, 1, 1, 0, 56), (128, 128, 3, 2, 1, 56), (128, 512, 1, 1, 0, 28),
    (256, 512, 1, 2, 0, 56), (512, 128, 1, 1, 0, 28), (128, 128, 3, 1, 1, 28), (512, 256, 1, 1, 0, 28),
    (256, 256, 3, 2, 1, 28), (256, 1024, 1, 1, 0, 14), (512, 1024, 1, 2, 0, 28), (1024, 256, 1, 1, 0, 14),
    (256, 256, 3, 1, 1, 14), (1024, 512, 1, 1, 0, 14), (512, 512, 3, 2, 1, 14), (512, 2048, 1, 1, 0, 7),
    (1024, 2048, 1, 2, 0, 14), (2048, 512, 1, 1, 0, 7), (512, 512, 3, 1, 1, 7),
]


def gemm_shape_name(m, n, k, ta, tb):
    name = f"{m}x{n}x{k}"
    if ta or tb:
        name += "_" + ("t" if ta else "n") + ("t" if tb else "n")
    return name


def conv_shape_name(n, c, h, k, r, pad, stride):
    return f"n{n}_c{c}_h{h}_w{h}_k{k}_r{r}_s{r}_p{pad}_u{stride}"


def capture_graph(fn, calls):
    """A CUDA graph of `calls` back-to-back fn() calls, after three warm-up calls outside the
    capture (cudnn.benchmark searches there)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def time_graph(fn, calls, repetitions, min_seconds=0.1, warmup_seconds=0.02, cooldown_seconds=0.0):
    """Median seconds per call of fn(), replayed `calls` per event pair from a CUDA graph.

    Like gpucmp's engine: `cooldown_seconds` idle once the GPU has finished everything before
    (gpucmp's --gpucmp_cooldown_s), at least `warmup_seconds` of warm-up replays (its
    --gpucmp_warmup_s), then timed replays until at least `repetitions` are taken and
    `min_seconds` of GPU time measured, and no more: with `repetitions` = gpucmp's min_samples
    (10) and `min_seconds` = its --gpucmp_window_s both sides time the same stretch of a GPU
    whose clocks fall for seconds under load (a 30 ms burst reads faster than 0.1 s of work,
    and 0.2 s faster than 2 s under the H200's power cap).
    """
    graph = capture_graph(fn, calls)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if cooldown_seconds > 0:
        torch.cuda.synchronize()
        time.sleep(cooldown_seconds)
    warmed = 0.0
    while warmed < warmup_seconds:
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        warmed += start.elapsed_time(stop) * 1e-3
    per_call = []
    total = 0.0
    while len(per_call) < repetitions or total < min_seconds:
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) * 1e-3
        total += seconds
        per_call.append(seconds / calls)
    del graph
    return statistics.median(per_call)


def time_cold(fn, repetitions, min_seconds=0.1, flush_bytes=256 << 20):
    """Median seconds of one fn() call with L2 flushed before it, as gpucmp's cold mode times it:
    each sample writes `flush_bytes` (more than any GPU's L2), then records the start event, the
    call and the stop event; the flush is still running when the call is queued, so the launch
    latency is not timed. Samples until at least `repetitions` are taken and `min_seconds` of
    GPU time measured."""
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    seconds = []
    while len(seconds) < repetitions or sum(seconds) < min_seconds:
        flush.fill_(len(seconds) & 0xFF)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        seconds.append(start.elapsed_time(stop) * 1e-3)
    del flush
    return statistics.median(seconds)


def uniform(shape, dtype):
    return (torch.rand(shape, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def gemm_operands(m, n, k, ta, tb, dtype):
    # gpucmp's column-major C(m x n) = op(A) op(B) is row-major C^T(n x m) = op(B)^T op(A)^T.
    x = uniform((n, k), dtype) if not tb else uniform((k, n), dtype).t()
    y = uniform((k, m), dtype) if not ta else uniform((m, k), dtype).t()
    return x, y


# gpucmp's measure_options::min_samples: a fixed window never has fewer samples than this.
GPUCMP_MIN_SAMPLES = 10

GEMM_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def set_matmul_flags(dtype_name):
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def gemm_call(m, n, k, ta, tb, dtype_name):
    """The call timed for gpucmp's gemm/<dtype_name>/<shape> (its operands bound)."""
    set_matmul_flags(dtype_name)
    x, y = gemm_operands(m, n, k, ta, tb, GEMM_DTYPES[dtype_name])
    out = torch.empty((n, m), device="cuda", dtype=x.dtype)
    return lambda: torch.matmul(x, y, out=out)


def gemm_rows(shapes, dtypes, calls, repetitions, **timing):
    """Rows for each dtype and shape; `timing`: time_graph's keywords (cool-down, warm-up, window)."""
    rows = []
    for dtype_name in dtypes:
        for m, n, k, ta, tb in shapes:
            fn = gemm_call(m, n, k, ta, tb, dtype_name)
            seconds = time_graph(fn, calls, repetitions, **timing)
            rows.append({"key": f"gemm/{dtype_name}/{gemm_shape_name(m, n, k, ta, tb)}", "seconds": seconds,
                         "flops": 2.0 * m * n * k})
            del fn
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def fp8_call(size, name):
    """The call timed for gpucmp's gemm/<name>/<size>^3_tn: torch._scaled_mm(mat1 row-major
    M x K, mat2 column-major K x N, BF16 out), cuBLASLt's TN layout. PyTorch hands cuBLASLt
    mat2 as A and mat1 as B (it computes the row-major result as a column-major transpose),
    so gpucmp's A = E5M2, B = E4M3 problem is mat1 E4M3, mat2 E5M2 here."""
    a_type = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e4m3fn}[name]
    b_type = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[name]
    a = uniform((size, size), torch.float32).to(a_type)
    b = uniform((size, size), torch.float32).to(b_type).t()
    scale_a = torch.tensor(0.5, device="cuda")
    scale_b = torch.tensor(2.0, device="cuda")
    return lambda: torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)


def fp8_rows(size, calls, repetitions, **timing):
    rows = []
    for name in ("fp8_e4m3", "fp8_e5m2"):
        try:
            seconds = time_graph(fp8_call(size, name), calls, repetitions, **timing)
        except RuntimeError as e:  # e.g. this operand pair not offered by this PyTorch
            print(f"torch_ops: {name}: {e}", file=sys.stderr)
            continue
        rows.append({"key": f"gemm/{name}/{size}x{size}x{size}_tn", "seconds": seconds, "flops": 2.0 * size**3})
    return rows


def int8_call(size):
    """The call timed for gpucmp's gemm/int8/<size>^3_tn: torch._int_mm(mat1 row-major M x K,
    mat2 column-major K x N), INT32 out, cuBLASLt's TN layout."""
    a = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8).t()
    return lambda: torch._int_mm(a, b)


def int8_rows(size, calls, repetitions, **timing):
    try:
        seconds = time_graph(int8_call(size), calls, repetitions, **timing)
    except RuntimeError as e:
        print(f"torch_ops: int8: {e}", file=sys.stderr)
        return []
    return [{"key": f"gemm/int8/{size}x{size}x{size}_tn", "seconds": seconds, "flops": 2.0 * size**3}]


# The 2:4 sparse GEMM sweep's shapes (benchmarks/sparse_gemm_sweep.cu): m (outputs) x n
# (tokens) x k (inputs).
SPARSE_GEMMS = ([(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)] +
                [(m, tokens, k) for m, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)) for tokens in (16, 4096)] +
                [(m, n, k) for m, n, k, _, _ in DEEPBENCH_GEMMS])
SPARSE_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8, "fp8_e4m3": torch.float8_e4m3fn}


def pruned_2_4(m, k, dtype):
    """An m x k matrix with the two largest magnitudes of every four along k kept, as gpucmp's
    operation prunes its A."""
    if dtype == torch.int8:
        w = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
    else:
        w = uniform((m, k), torch.float32)
    groups = w.float().reshape(m, k // 4, 4)
    keep = groups.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return (groups * mask).reshape(m, k).to(dtype)


def sparse_call(m, n, k, dtype_name, searched):
    """The call timed for gpucmp's sparse_gemm/<dtype>/<m>x<n>x<k>: the weights W (m x k)
    2:4-pruned, to_sparse_semi_structured on cuSPARSELt, and F.linear(x, W) on n tokens of k
    (what a user of PyTorch writes; PyTorch runs cuSPARSELt's default configuration); with
    `searched`, torch._cslt_sparse_mm on cuSPARSELt's own search's choice (its alg_id)."""
    from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured
    SparseSemiStructuredTensor._FORCE_CUTLASS = False
    dtype = SPARSE_DTYPES[dtype_name]
    w = pruned_2_4(m, k, dtype)
    x = (torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8) if dtype == torch.int8
         else uniform((n, k), torch.float32).to(dtype))
    if not searched:
        sparse_w = to_sparse_semi_structured(w)
        return lambda: F.linear(x, sparse_w)
    compressed = torch._cslt_compress(w)
    found = torch._cslt_sparse_mm_search(compressed, x.t())
    alg_id = found[0] if isinstance(found, (tuple, list)) else found
    return lambda: torch._cslt_sparse_mm(compressed, x.t(), alg_id=int(alg_id))


def sparse_rows(calls, repetitions, refused, shapes=".*"):
    """PyTorch's 2:4 sparse GEMM (default and searched) and its dense GEMM of the same layout,
    at each shape; what PyTorch refuses goes to `refused` with its message."""
    rows = []
    for dtype_name in SPARSE_DTYPES:
        for m, n, k in SPARSE_GEMMS:
            shape = f"{m}x{n}x{k}"
            if not re.match(shapes, shape):
                continue
            for prefix, searched in (("sparse_gemm", False), ("sparse_gemm_searched", True)):
                key = f"{prefix}/{dtype_name}/{shape}"
                try:
                    seconds = time_graph(sparse_call(m, n, k, dtype_name, searched), calls, repetitions)
                except (RuntimeError, ValueError, NotImplementedError, AttributeError) as e:
                    refused[key] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                    continue
                rows.append({"key": key, "seconds": seconds, "flops": 2.0 * m * n * k})
            if dtype_name in GEMM_DTYPES:  # the dense baseline: cuBLASLt's TN layout, as gpucmp's
                fn = gemm_call(m, n, k, True, False, dtype_name)
                rows.append({"key": f"gemm/{dtype_name}/{shape}_tn", "seconds": time_graph(fn, calls, repetitions),
                             "flops": 2.0 * m * n * k})
            torch.cuda.empty_cache()
    return rows


def conv_rows(batches, calls, repetitions, variant="fp16_nhwc"):
    """ResNet-50's convolutions: "fp16_nhwc" (channels-last), "fp32_nchw" (PyTorch's default
    layout, that of its fastest FP32 network) or "fp32_nhwc"; FP32 without TF32."""
    torch.backends.cudnn.benchmark = True
    fp16 = variant.startswith("fp16")
    torch.backends.cudnn.allow_tf32 = fp16  # FP32 means FP32 arithmetic
    dtype = torch.float16 if fp16 else torch.float32
    layout = torch.channels_last if variant.endswith("nhwc") else torch.contiguous_format
    rows = []
    for batch in batches:
        for c, k, r, stride, pad, size in RESNET50_CONVS:
            x = uniform((batch, c, size, size), dtype).to(memory_format=layout)
            w = uniform((k, c, r, r), dtype).to(memory_format=layout)
            seconds = time_graph(lambda: F.conv2d(x, w, stride=stride, padding=pad), calls, repetitions)
            p = (size + 2 * pad - r) // stride + 1
            rows.append({"key": f"conv_fwd/{variant}/{conv_shape_name(batch, c, size, k, r, pad, stride)}",
                         "seconds": seconds, "flops": 2.0 * batch * k * p * p * c * r * r})
            del x, w
    torch.backends.cudnn.allow_tf32 = True
    return rows


def copy_rows(sizes, calls, repetitions):
    rows = []
    for size in sizes:
        src = torch.randint(0, 255, (size,), device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        seconds = time_graph(lambda: dst.copy_(src), calls, repetitions)
        rows.append({"key": f"copy/d2d_torch/{size}", "seconds": seconds, "bytes": 2.0 * size})
        del src, dst
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="gemm,deepbench,conv,copy")
    parser.add_argument("--sparse-shapes", default=".*", help="a regular expression over m x n x k: the sparse part's shapes")
    parser.add_argument("--fp32-conv-batches", default="16,32,64", help="batches of --only conv_fp32")
    parser.add_argument("--calls", type=int, default=20, help="calls per graph replay")
    parser.add_argument("--large-gemm-calls", type=int, default=10, help="calls per graph replay for 8192^3")
    parser.add_argument("--repetitions", type=int, default=20, help="timed replays")
    parser.add_argument("--large-gemm-cooldown", type=float, default=0.0,
                        help="idle seconds before each 8192^3 row's warm-up (gpucmp's --gpucmp_cooldown_s)")
    parser.add_argument("--large-gemm-warmup", type=float, default=0.0,
                        help="seconds of warm-up of each 8192^3 row (gpucmp's --gpucmp_warmup_s); 0: 20 ms")
    parser.add_argument("--large-gemm-window", type=float, default=0.0,
                        help="seconds of GPU time each 8192^3 row times, at least 10 replays (gpucmp's "
                             "--gpucmp_window_s and min_samples); 0: at least --repetitions replays and 0.1 s")
    args = parser.parse_args()
    for flag in ("large_gemm_cooldown", "large_gemm_warmup", "large_gemm_window"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and 0 <= value <= 600):
            parser.error(f"--{flag.replace('_', '-')} {value}: expected seconds, 0 to 600")
    large = {"cooldown_seconds": args.large_gemm_cooldown}
    large_repetitions = args.repetitions
    if args.large_gemm_warmup > 0:
        large["warmup_seconds"] = args.large_gemm_warmup
    if args.large_gemm_window > 0:
        large["min_seconds"] = args.large_gemm_window
        large_repetitions = GPUCMP_MIN_SAMPLES
    if not torch.cuda.is_available():
        print("torch_ops: no CUDA device", file=sys.stderr)
        return 77
    only = set(args.only.split(","))
    rows = []
    if "gemm" in only:
        rows += gemm_rows([(8192, 8192, 8192, False, False)], ["fp32", "tf32", "fp16", "bf16"], args.large_gemm_calls,
                          large_repetitions, **large)
        rows += fp8_rows(8192, args.large_gemm_calls, large_repetitions, **large)
        rows += int8_rows(8192, args.large_gemm_calls, large_repetitions, **large)
    refused = {}
    if "sparse" in only:
        rows += sparse_rows(args.calls, args.repetitions, refused, args.sparse_shapes)
    if "deepbench" in only:
        rows += gemm_rows(DEEPBENCH_GEMMS, ["fp16", "tf32"], args.calls, args.repetitions)
    if "conv" in only:
        rows += conv_rows([32, 256], args.calls, args.repetitions)
    if "conv_fp32" in only:  # not in the default set: the models issue's FP32 bound uses it
        for variant in ("fp32_nchw", "fp32_nhwc"):
            rows += conv_rows([int(b) for b in args.fp32_conv_batches.split(",")], args.calls, args.repetitions, variant)
    if "copy" in only:
        rows += copy_rows([1 << 30, 4 << 30], 5, args.repetitions)
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "gpu": torch.cuda.get_device_name(), "calls_per_replay": args.calls,
            "large_gemm_calls_per_replay": args.large_gemm_calls, "repetitions": args.repetitions,
            "large_gemm_cooldown_s": args.large_gemm_cooldown, "large_gemm_warmup_s": args.large_gemm_warmup,
            "large_gemm_window_s": args.large_gemm_window, "refused": refused}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"torch_ops: {len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
