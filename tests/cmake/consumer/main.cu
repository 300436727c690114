#include <gpucmp/bench.hpp>
__global__ void scale(float* x, size_t n) { size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; if (i < n) x[i] *= 2; }
static void bm_scale(gpucmp::state& st) {
  gpucmp::device_buffer<float> x(st.range(0));
  st.add_bytes_read(x.bytes());
  st.add_bytes_written(x.bytes());
  st.run([&](cudaStream_t s) { scale<<<(x.size() + 255) / 256, 256, 0, s>>>(x.data(), x.size()); });
}
GPUCMP_BENCHMARK(bm_scale, gpucmp::mode::cold, gpucmp::mode::hot)->Arg(1 << 24);
GPUCMP_BENCHMARK_MAIN()
