// Kernels for the GPU tests. testing/gpu/kernels_ptx.h is generated from this file by
// scripts/gen_test_ptx.sh (nvcc -ptx -arch=sm_90) and committed, so no build needs nvcc.
extern "C" __global__ void slow_fill(unsigned *p, unsigned n, unsigned v, unsigned spin) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long t0 = clock64();
  while (clock64() - t0 < (unsigned long long)spin) { }
  p[i] = v + i;
}
extern "C" __global__ void add_one(unsigned *p, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1u;
}
