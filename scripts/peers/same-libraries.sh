# shellcheck shell=bash
# Sourced by the peer comparison scripts.
# Same libraries on both sides: the comparison is about method (algorithm search, timing),
# not about which cuDNN/cuBLAS build is installed. Find the cuDNN and cuBLASLt that PyTorch
# loads and put their directory first for gpucmp's runs (GPUCMP_SAME_LIBRARIES=0: keep the
# system's). Both sides' versions land in the table.
if [ "${GPUCMP_SAME_LIBRARIES:-1}" = 1 ]; then
  torch_libs=$(python3 - <<'PY' 2>/dev/null
import os
import torch
import torch.nn.functional as F
a = torch.randn(64, 64, device="cuda")
(a @ a).sum().item()
F.conv2d(torch.randn(1, 8, 8, 8, device="cuda", dtype=torch.half), torch.randn(8, 8, 3, 3, device="cuda", dtype=torch.half))
torch.cuda.synchronize()
dirs = []
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if ("libcudnn.so" in path or "libcublasLt.so" in path) and os.path.dirname(path) not in dirs:
        dirs.append(os.path.dirname(path))
print(":".join(dirs))
PY
)
  if [ -n "$torch_libs" ]; then
    export LD_LIBRARY_PATH="$torch_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "same-libraries: gpucmp uses PyTorch's cuDNN/cuBLASLt from $torch_libs"
  fi
fi
