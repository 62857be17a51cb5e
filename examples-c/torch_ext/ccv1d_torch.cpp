// libcausal_conv1d called from C++ on libtorch tensors, through the plain C header: no torch
// extension, no Python. Forward and backward on at::Tensor (CPU, and CUDA on torch's current
// stream), channel-first and channel-last (a transposed view), f32 and bf16, compared in float64
// with at::conv1d(padding W-1, groups D) sliced to L — outputs, and gradients from autograd.
// Prints one line per case with max |error| and relative error of out/dx/dweight/dbias, then
// "RESULT PASS" (exit 0) or "RESULT FAIL" (exit 1).
// Build: examples-c/torch_ext/build.sh (README.md next to this file).
#include <torch/torch.h>

#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "causal_conv1d.h"

namespace {

int32_t ccv1d_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return CCV1D_DTYPE_F32;
    case at::kHalf: return CCV1D_DTYPE_F16;
    case at::kBFloat16: return CCV1D_DTYPE_BF16;
    default: throw std::invalid_argument(std::string("no ccv1d dtype for ") + c10::toString(t));
  }
}

// A ccv1d_tensor over a torch tensor: data pointer and strides in elements, as torch keeps them.
ccv1d_tensor view(const at::Tensor &t) {
  ccv1d_tensor v{};
  v.data = t.data_ptr();
  v.dtype = ccv1d_dtype(t.scalar_type());
  for (int64_t i = 0; i < t.dim(); i++) v.stride[i] = t.stride(i);
  return v;
}

void check(ccv1d_status s, const char *fn) {
  if (s != CCV1D_OK)
    throw std::runtime_error(std::string(fn) + ": " + ccv1d_status_string(s) + ": " + ccv1d_last_error());
}

struct Results {
  at::Tensor out, dx, dweight, dbias;
};

// out = act(conv(x, weight) + bias) and its backward, by the library. Outputs start as NaN so an
// element the library forgets to write fails the comparison.
Results run_library(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias, const at::Tensor &dout,
                    bool silu) {
  const double nan = std::nan("");
  Results r{at::full_like(x, nan), at::full_like(x, nan), at::full_like(weight, nan, weight.options().dtype(at::kFloat)),
            at::full_like(bias, nan, bias.options().dtype(at::kFloat))};
  const bool gpu = x.is_cuda();
  // torch's current stream on x's device; the CPU backend ignores the stream.
  void *stream = gpu ? static_cast<void *>(c10::cuda::getCurrentCUDAStream(x.get_device()).stream()) : nullptr;

  ccv1d_fwd_params f{};
  f.struct_size = sizeof f;
  f.backend = gpu ? CCV1D_BACKEND_GPU : CCV1D_BACKEND_CPU;
  f.activation = silu ? CCV1D_ACT_SILU : CCV1D_ACT_NONE;
  f.batch = x.size(0), f.dim = x.size(1), f.seqlen = x.size(2), f.width = weight.size(1);
  f.x = view(x), f.weight = view(weight), f.bias = view(bias), f.out = view(r.out);
  check(ccv1d_fwd(&f, stream), "ccv1d_fwd");

  ccv1d_bwd_params g{};
  g.struct_size = sizeof g;
  g.backend = f.backend, g.activation = f.activation;
  g.batch = f.batch, g.dim = f.dim, g.seqlen = f.seqlen, g.width = f.width;
  g.x = f.x, g.weight = f.weight, g.bias = f.bias;
  g.dout = view(dout), g.dx = view(r.dx), g.dweight = view(r.dweight), g.dbias = view(r.dbias);
  check(ccv1d_bwd(&g, stream), "ccv1d_bwd");  // workspace NULL: the library's stream-ordered pool
  return r;  // later torch work on the current stream is ordered after both calls
}

// The same in float64 with torch: depthwise conv1d padded by W-1 on both sides, first L outputs.
Results reference(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias, const at::Tensor &dout,
                  bool silu) {
  auto xd = x.to(at::kDouble).detach().requires_grad_();
  auto wd = weight.to(at::kDouble).detach().requires_grad_();
  auto bd = bias.to(at::kDouble).detach().requires_grad_();
  const int64_t D = x.size(1), L = x.size(2), W = weight.size(1);
  auto z = at::conv1d(xd, wd.unsqueeze(1), bd, /*stride=*/1, /*padding=*/W - 1, /*dilation=*/1, /*groups=*/D)
               .slice(/*dim=*/2, 0, L);
  auto out = silu ? at::silu(z) : z;
  out.backward(dout.to(at::kDouble));
  return {out.detach(), xd.grad(), wd.grad(), bd.grad()};
}

struct Err {
  double max_abs, rel;
};

Err compare(const at::Tensor &got, const at::Tensor &want) {
  auto diff = got.to(at::kDouble) - want;
  // NaN (an unwritten element) propagates into both numbers and fails the tolerance test.
  return {diff.abs().max().item<double>(), (diff.norm() / want.norm()).item<double>()};
}

double tolerance(at::ScalarType t) { return t == at::kFloat ? 1e-5 : t == at::kHalf ? 2e-3 : 1.5e-2; }

bool run_case(at::Device dev, at::ScalarType dtype, bool channel_last, bool silu, int64_t B, int64_t D, int64_t L,
              int64_t W) {
  auto opt = at::TensorOptions().device(dev).dtype(dtype);
  // Channel-last: memory [B, L, D], seen as [B, D, L] through a transpose (strides (L*D, 1, D)).
  auto make_x = [&] { return channel_last ? at::randn({B, L, D}, opt).transpose(1, 2) : at::randn({B, D, L}, opt); };
  auto x = make_x(), dout = make_x();
  // bf16 models keep the conv weight in bf16 too; dweight/dbias are asked for in f32.
  auto weight = at::randn({D, W}, opt) * 0.5;
  auto bias = at::randn({D}, opt);

  Results got = run_library(x, weight, bias, dout, silu);
  Results want = reference(x, weight, bias, dout, silu);
  const char *names[4] = {"out", "dx", "dw", "db"};
  const at::Tensor *g[4] = {&got.out, &got.dx, &got.dweight, &got.dbias};
  const at::Tensor *w[4] = {&want.out, &want.dx, &want.dweight, &want.dbias};
  const double tol = tolerance(dtype);
  bool ok = true;
  std::string detail;
  for (int i = 0; i < 4; i++) {
    Err e = compare(*g[i], *w[i]);
    ok = ok && e.rel <= tol;  // false for NaN
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s max|err| %.1e rel %.1e", names[i], e.max_abs, e.rel);
    detail += buf;
  }
  std::printf("%-4s %-8s %s %-4s %ldx%ldx%ld w%ld:%s tol %.1e: %s\n", dev.is_cuda() ? "cuda" : "cpu",
              dtype == at::kFloat ? "f32" : "bf16", channel_last ? "cl" : "cf", silu ? "silu" : "none", (long)B,
              (long)D, (long)L, (long)W, detail.c_str(), tol, ok ? "PASS" : "FAIL");
  return ok;
}

}  // namespace

int main() {
  std::printf("libcausal_conv1d %s (backends 0x%x), libtorch %s\n", ccv1d_version(), ccv1d_backends_compiled(),
              TORCH_VERSION);
  at::manual_seed(0);
  std::vector<at::Device> devices{at::kCPU};
  if (torch::cuda::is_available()) {
    devices.emplace_back(at::kCUDA, 0);
  } else {
    std::printf("no CUDA device visible to torch: CPU cases only\n");
  }
  bool ok = true;
  try {
    for (auto dev : devices)
      for (auto dtype : {at::kFloat, at::kBFloat16})
        for (bool channel_last : {false, true}) {
          ok &= run_case(dev, dtype, channel_last, /*silu=*/true, 2, 64, 300, 4);
          ok &= run_case(dev, dtype, channel_last, /*silu=*/false, 3, 40, 77, 3);
        }
  } catch (const std::exception &e) {
    std::printf("error: %s\n", e.what());
    ok = false;
  }
  std::printf("RESULT %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
