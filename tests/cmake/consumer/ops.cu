// An embedder's verified GEMM and convolution through the installed package's components.
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/gemm.cuh>

#include <cstdio>

int main() {
  if (gpucmp::device_count() == 0) {
    std::puts("no CUDA device");
    return 0;
  }
  gpucmp::gemm_problem g;
  g.m = g.n = g.k = 256;
  gpucmp::gemm gemm(g);
  gpucmp::choose_algorithm(gemm);
  gpucmp::conv_problem c;
  c.n = 2;
  c.c = c.k = 16;
  c.h = c.w = 8;
  c.r = c.s = 3;
  c.pad_h = c.pad_w = 1;
  gpucmp::conv conv(c);
  gpucmp::choose_algorithm(conv);
  const bool ok = gemm.verify(nullptr).passed() && conv.verify(nullptr).passed();
  std::printf("%s %s: %s\n", gemm.name().c_str(), conv.name().c_str(), ok ? "verified" : "FAILED");
  return ok ? 0 : 1;
}
