// An embedder's verified 2:4 sparse GEMM through the installed package's cusparselt component.
#include <gpucmp/ops/sparse_gemm.cuh>

#include <cstdio>

int main() {
  if (gpucmp::device_count() == 0) {
    std::puts("no CUDA device");
    return 0;
  }
  gpucmp::sparse_gemm op({256, 256, 256, gpucmp::numerics::fp16});
  gpucmp::choose_algorithm(op);
  const bool ok = op.verify(nullptr).passed();
  std::printf("%s: %s\n", op.name().c_str(), ok ? "verified" : "FAILED");
  return ok ? 0 : 1;
}
