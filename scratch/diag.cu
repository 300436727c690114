#include <gpucmp/core.hpp>
#include <gpucmp/kernels/spin.cuh>
#include <cstdio>
#include <cstdlib>
__global__ void empty_kernel() {}
__global__ void spin32(unsigned long long ns) {
  unsigned long long s = gpucmp::kernels::global_timer_ns();
  while (gpucmp::kernels::global_timer_ns() - s < ns) {}
}
int main() {
  gpucmp::engine eng;
  auto show = [](const char* what, const gpucmp::measurement& m) {
    std::printf("%-40s median %8.3f us min %8.3f batch %zu samples %zu held %d\n", what, m.gpu.median * 1e6, m.gpu.min * 1e6, m.batch, m.gpu.count, m.stream_held);
  };
  std::system("nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader");
  auto spin10 = [](cudaStream_t s) { gpucmp::kernels::launch_spin(s, 10e-6); };
  for (int i = 0; i < 3; ++i) show("hot spin10 default", eng.measure(spin10, gpucmp::mode::hot));
  gpucmp::measure_options longwarm; longwarm.warmup_time_s = 1.0;
  show("hot spin10 warm 1s", eng.measure(spin10, gpucmp::mode::hot, longwarm));
  std::system("nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader");
  show("graph spin10", eng.measure(spin10, gpucmp::mode::graph));
  gpucmp::measure_options b1000; b1000.batch = 1000; b1000.max_batch = 1000;
  show("hot spin10 batch 1000", eng.measure(spin10, gpucmp::mode::hot, b1000));
  show("hot spin32 10us", eng.measure([](cudaStream_t s) { spin32<<<1, 32, 0, s>>>(10000); }, gpucmp::mode::hot));
  show("hot empty (gap)", eng.measure([](cudaStream_t s) { empty_kernel<<<1, 1, 0, s>>>(); }, gpucmp::mode::hot));
  show("hot empty batch 1000 (gap)", eng.measure([](cudaStream_t s) { empty_kernel<<<1, 1, 0, s>>>(); }, gpucmp::mode::hot, b1000));
  show("graph empty (gap)", eng.measure([](cudaStream_t s) { empty_kernel<<<1, 1, 0, s>>>(); }, gpucmp::mode::graph));
  gpucmp::measure_options nohold; nohold.hold = false;
  show("hot spin10 no hold", eng.measure(spin10, gpucmp::mode::hot, nohold));
  show("hot spin2", eng.measure([](cudaStream_t s) { gpucmp::kernels::launch_spin(s, 2e-6); }, gpucmp::mode::hot));
  std::system("nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader");
}
