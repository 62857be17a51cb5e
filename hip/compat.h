// compat.h — the ONLY file that knows which GPU vendor compiles the kernels.
//
// Kernels are written in HIP spelling (threadIdx, blockIdx, __syncthreads, __global__, __shared__,
// __device__, __forceinline__, __launch_bounds__ exist under both compilers) plus the small neutral
// vocabulary below: CCV_WARP, ccv_shfl_xor, ccv_shfl (value of lane src), ccv_f16/ccv_bf16
// storage types and their fp32 conversions (round-to-nearest-even), ccv_vec16 (a 16-byte
// vector), ccv_ld16/ccv_st16 and ccv_ld8/ccv_st8 (global vector accesses), ccv_st_keep /
// ccv_ld_last (fp32 scratch held in L2 from one launch to the next), ccv_prefetch_l2,
// ccv_cp<N>/ccv_cp16/ccv_cp_commit/ccv_cp_wait (asynchronous copies into shared memory),
// ccv_warp_sync, ccv_exp_neg (the sigmoid's e^-z), ccv_wait_previous/ccv_release_dependents
// (programmatic dependent launch), CCV_EXTERN_KERNEL.
#pragma once

#include <stdint.h>

#if defined(__HIPCC__) || defined(__HIP__)
// ---------------------------------------------------------------- AMD (hipcc / clang -x hip)
#define CCV_HIP 1
#include <hip/hip_runtime.h>
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define CCV_WARP __AMDGCN_WAVEFRONT_SIZE   // 64 on CDNA (gfx9xx), 32 on RDNA
#else
#define CCV_WARP 64                        // host pass only: never used for device code
#endif
// Shared memory (LDS) of a CU that blocks can hold, and what each block costs beyond its own
// (kernels size optional staging so that it does not cost a resident block): CDNA 64 KB.
#define CCV_SMEM_PER_SM 65536
#define CCV_SMEM_RESERVE 0
__device__ __forceinline__ float ccv_shfl_xor(float v, int m) { return __shfl_xor(v, m, CCV_WARP); }
__device__ __forceinline__ float ccv_shfl(float v, int src) { return __shfl(v, src, CCV_WARP); }
__device__ __forceinline__ uint32_t ccv_f2u(float f) { return __builtin_bit_cast(uint32_t, f); }
__device__ __forceinline__ float ccv_u2f(uint32_t u) { return __builtin_bit_cast(float, u); }
__device__ __forceinline__ float ccv_h2f(uint16_t h) { return (float)__builtin_bit_cast(_Float16, h); }
__device__ __forceinline__ uint16_t ccv_f2h(float f) { return __builtin_bit_cast(uint16_t, (_Float16)f); }
__device__ __forceinline__ uint16_t ccv_f2bf(float f) {
  uint32_t u = ccv_f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                              // RNE
  return (uint16_t)(u >> 16);
}
typedef uint4 ccv_vec16;

#elif defined(__CUDACC__)
// ---------------------------------------------------------------- NVIDIA (nvcc)
#define CCV_CUDA 1
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define CCV_WARP 32
// (see the AMD branch) sm_90 228 KB, sm_80 164 KB, others taken as 100 KB (sm_86 / sm_89; less
// only makes optional staging drop out); 1 KB reserved per block
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define CCV_SMEM_PER_SM (228 * 1024)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
#define CCV_SMEM_PER_SM (164 * 1024)
#else
#define CCV_SMEM_PER_SM (100 * 1024)
#endif
#define CCV_SMEM_RESERVE 1024
__device__ __forceinline__ float ccv_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
__device__ __forceinline__ float ccv_shfl(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }
__device__ __forceinline__ uint32_t ccv_f2u(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float ccv_u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ float ccv_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t ccv_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ uint16_t ccv_f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
typedef uint4 ccv_vec16;

#else
#error "compat.h: compile the kernels with nvcc or hipcc"
#endif

#define CCV_EXTERN_KERNEL extern "C" __global__

// One 16-byte global load / store (the address is 16-byte aligned).
__device__ __forceinline__ ccv_vec16 ccv_ld16(const void* p) {
#if defined(CCV_CUDA)
  ccv_vec16 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
#else
  return *(const ccv_vec16*)p;
#endif
}
// One 8-byte global load / store (the address is 8-byte aligned).
__device__ __forceinline__ uint2 ccv_ld8(const void* p) {
#if defined(CCV_CUDA)
  uint2 r;
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
#else
  return *(const uint2*)p;
#endif
}
__device__ __forceinline__ void ccv_st8(void* p, uint2 v) {
#if defined(CCV_CUDA)
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
#else
  *(uint2*)p = v;
#endif
}
__device__ __forceinline__ void ccv_st16(void* p, ccv_vec16 v) {
#if defined(CCV_CUDA)
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
  *(ccv_vec16*)p = v;
#endif
}

// Asks for the 128-byte line at p to be brought into L2, holding no register and waiting on
// nothing (a kernel's later load of it then finds it there or on its way). AMD: nothing.
__device__ __forceinline__ void ccv_prefetch_l2(const void* p) {
#if defined(CCV_CUDA)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// fp32 scratch that the next launch reads once (the backward's dweight partials): ccv_st_keep
// stores it with an L2 evict_last policy, so the data a kernel streams past afterwards does not
// push it out to DRAM before the reduce reads it; ccv_ld_last reads it with evict_first, so it
// does not hold L2 after that read. H100 (docs/perf.md session 36): the reduce's DRAM reads at
// f32 4x5376x4096 6.3 -> 0.6 MB. NVIDIA sm_80+ (createpolicy); AMD: plain accesses.
__device__ __forceinline__ void ccv_st_keep(float* p, float v) {
#if defined(CCV_CUDA)
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(pol) : "memory");
#else
  *p = v;
#endif
}
__device__ __forceinline__ float ccv_ld_last(const float* p) {
#if defined(CCV_CUDA)
  uint64_t pol;
  float v;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(pol));
  return v;
#else
  return *p;
#endif
}

// Per-thread asynchronous copies global -> shared (a ring of loads in flight that holds no
// registers): ccv_cp<N> copies N = 4 or 8 bytes, or writes N zero bytes without reading when !in;
// ccv_cp_commit closes a group of copies; ccv_cp_wait<N>() returns once at most the N latest
// groups of this thread are still in flight, their data then visible to this thread. NVIDIA:
// cp.async (sm_80+). AMD: a plain load and shared store, so the copy is complete on return.
template <int N> __device__ __forceinline__ void ccv_cp(void* smem, const void* g, bool in) {
  static_assert(N == 4 || N == 8, "ccv_cp: 4 or 8 bytes");
#if defined(CCV_CUDA)
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(s), "l"(g), "n"(N), "r"(in ? N : 0) : "memory");
#else
  if constexpr (N == 8) {
    *(uint2*)smem = in ? *(const uint2*)g : make_uint2(0u, 0u);
  } else {
    *(uint32_t*)smem = in ? *(const uint32_t*)g : 0u;
  }
#endif
}
// 16 bytes (both addresses 16-byte aligned); cp.async.cg: the line is not kept in L1
__device__ __forceinline__ void ccv_cp16(void* smem, const void* g, bool in) {
#if defined(CCV_CUDA)
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "r"(in ? 16 : 0) : "memory");
#else
  *(ccv_vec16*)smem = in ? *(const ccv_vec16*)g : make_uint4(0u, 0u, 0u, 0u);
#endif
}
__device__ __forceinline__ void ccv_cp_commit() {
#if defined(CCV_CUDA)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void ccv_cp_wait() {
#if defined(CCV_CUDA)
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Threads of one warp (and 32 consecutive threads are always in one warp, 32 or 64 wide) see
// each other's shared-memory writes after this. AMD: a wavefront runs in lockstep; the fence
// orders its LDS accesses.
__device__ __forceinline__ void ccv_warp_sync() {
#if defined(CCV_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
  __builtin_amdgcn_wave_barrier();
#endif
}

// Block-size bound: on AMD it lets the compiler use more than the 1024-thread default budget of
// VGPRs; on NVIDIA ptxas reads a bare maxThreads bound as "maximise occupancy" and spills to local
// memory at 32-64 registers, so it is left out there (128-thread blocks can use up to 255).
// CCV_LAUNCH_BOUNDS_MIN(n, b) adds a minimum of b resident blocks per multiprocessor on NVIDIA
// (a register cap of 65536 / (n * b)), for kernels whose unrolled shared-memory reads would
// otherwise take most of the register file.
#if defined(CCV_CUDA)
#define CCV_LAUNCH_BOUNDS(n)
#define CCV_LAUNCH_BOUNDS_MIN(n, b) __launch_bounds__(n, b)
#else
#define CCV_LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define CCV_LAUNCH_BOUNDS_MIN(n, b) __launch_bounds__(n)
#endif

// The kernel parameter struct is passed by value and read through a const reference: on CUDA
// __grid_constant__ keeps it in the parameter bank instead of copying it to local memory.
#if defined(CCV_CUDA)
#define CCV_GRID_CONST const __grid_constant__
#else
#define CCV_GRID_CONST const
#endif

// Programmatic dependent launch (NVIDIA sm_90+): a kernel launched with the host's
// `overlap_previous` (kernels.rs; cuLaunchKernelEx's programmatic stream serialization) may start
// while the kernel before it in the stream still runs, once every block of that kernel has called
// ccv_release_dependents (or finished); it calls ccv_wait_previous before it reads anything, which
// waits for that kernel to finish and its writes to be visible. Elsewhere (AMD, older NVIDIA
// archs, launches without the attribute) both are no-ops and the stream orders the kernels.
__device__ __forceinline__ void ccv_wait_previous() {
#if defined(CCV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void ccv_release_dependents() {
#if defined(CCV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// e^-z for the activation's sigmoid. NVIDIA: ex2.approx.ftz (2 ulp) of -z*log2(e); nvcc's
// __expf adds a fix-up for results below 2^-126 (a compare, two predicated multiplies per call),
// which the sigmoid does not need: 1 + e^-z is 1 there either way. AMD: __expf (v_exp_f32).
__device__ __forceinline__ float ccv_exp_neg(float z) {
#if defined(CCV_CUDA)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(z * -1.4426950408889634f));
  return r;
#else
  return __expf(-z);
#endif
}

__device__ __forceinline__ float ccv_bf2f(uint16_t b) { return ccv_u2f((uint32_t)b << 16); }

// Storage types of the 16-bit dtypes (plain bits; arithmetic always in fp32).
struct ccv_f16 { uint16_t u; };
struct ccv_bf16 { uint16_t u; };

static_assert(sizeof(ccv_vec16) == 16, "ccv_vec16 must be 16 bytes");
static_assert(CCV_WARP == 32 || CCV_WARP == 64, "warp size");
