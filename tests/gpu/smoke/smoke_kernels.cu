// Tiny kernels for the driver-layer smoke test (examples/gpu_smoke). Not part of the library.
// Each takes one by-value struct, like the real kernels. Build (NVIDIA):
//   nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
//        -o smoke_kernels.fatbin smoke_kernels.cu
// (AMD: hipcc --genco --offload-arch=gfx942 -o smoke_kernels.hsaco smoke_kernels.cu)
#ifdef __HIPCC__
#include <hip/hip_runtime.h>
#endif

struct SmokeParams {       // 48 bytes; mirrored by `params()` in main.rs
  const float* x;
  float* out;
  float* ws;
  long long n;
  float a;
  float b;
  int k;                   // smoke_shared: rows of blockDim.x floats in dynamic shared memory
  int pad;
};

#define IDX (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x)

extern "C" __global__ void smoke_axpb(SmokeParams p) {
  long long i = IDX;
  if (i < p.n) p.out[i] = __fmul_rn(p.a, p.x[i]) + p.b;  // unfused: the host check rounds twice too
}

extern "C" __global__ void smoke_ws_write(SmokeParams p) {
  long long i = IDX;
  if (i < p.n) p.ws[i] = p.a * p.x[i];
}

extern "C" __global__ void smoke_ws_read(SmokeParams p) {
  long long i = IDX;
  if (i < p.n) p.out[i] = p.ws[i] + p.b;
}

// Uses k * blockDim.x floats of dynamic shared memory (the test asks for ~100 KiB, which needs
// the opt-in on NVIDIA); the value travels through the last row.
extern "C" __global__ void smoke_shared(SmokeParams p) {
  extern __shared__ float s[];
  long long i = IDX;
  float v = i < p.n ? p.x[i] : 0.f;
  for (int r = 0; r < p.k; ++r) s[r * blockDim.x + threadIdx.x] = v;
  __syncthreads();
  float w = s[(p.k - 1) * blockDim.x + (blockDim.x - 1 - threadIdx.x)];  // a neighbour's value
  __syncthreads();
  long long j = static_cast<long long>(blockIdx.x) * blockDim.x + (blockDim.x - 1 - threadIdx.x);
  if (i < p.n && j < p.n) p.out[i] = __fmul_rn(p.a, w) + p.b;  // = a * x[j] + b, unfused
}

// Writes through p.ws, which the test sets to an unmapped address: an illegal-address fault.
extern "C" __global__ void smoke_fault(SmokeParams p) {
  if (IDX == 0) p.ws[0] = 1.f;
}
