// C++17 example: token-by-token decoding with ccv1d_update must reproduce the forward pass over the
// whole sequence (prefill). Runs on host memory (CPU backend), bf16-free: f32 x, f32 weight.
// Two ways of keeping the state are checked: a shifting window and a circular buffer.
// Build: c++ -std=c++17 -I include examples-c/decode.cpp -L target/release -lcausal_conv1d
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "causal_conv1d.h"

namespace {

constexpr int64_t kBatch = 3, kDim = 24, kSeqlen = 50, kWidth = 4, kStateLen = 6;

ccv1d_tensor view(float* p, int64_t s0, int64_t s1 = 0, int64_t s2 = 0) { return {p, CCV1D_DTYPE_F32, {s0, s1, s2}}; }
ccv1d_tensor view(int32_t* p, int64_t s0) { return {p, CCV1D_DTYPE_I32, {s0, 0, 0}}; }

void check(ccv1d_status s, const char* what) {
  if (s != CCV1D_OK) {
    std::fprintf(stderr, "%s failed: %s: %s\n", what, ccv1d_status_string(s), ccv1d_last_error());
    std::exit(1);
  }
}

}  // namespace

int main() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // x channel-first [B, D, L]; weight [D, W]; bias [D].
  std::vector<float> x(kBatch * kDim * kSeqlen), w(kDim * kWidth), bias(kDim), ref(x.size());
  for (auto* v : {&x, &w, &bias})
    for (float& e : *v) e = u(rng);

  ccv1d_fwd_params f{};
  f.struct_size = sizeof f;
  f.backend = CCV1D_BACKEND_CPU;
  f.activation = CCV1D_ACT_SILU;
  f.batch = kBatch, f.dim = kDim, f.seqlen = kSeqlen, f.width = kWidth;
  f.x = view(x.data(), kDim * kSeqlen, kSeqlen, 1);
  f.weight = view(w.data(), kWidth, 1);
  f.bias = view(bias.data(), 1);
  f.out = view(ref.data(), kDim * kSeqlen, kSeqlen, 1);
  check(ccv1d_fwd(&f, nullptr), "ccv1d_fwd");

  double worst = 0;
  for (int circular = 0; circular < 2; circular++) {
    std::vector<float> state(kBatch * kDim * kStateLen, 0.f), tok(kBatch * kDim), out(kBatch * kDim);
    std::vector<int32_t> cache_seqlens(kBatch, 0);
    for (int64_t t = 0; t < kSeqlen; t++) {
      for (int64_t b = 0; b < kBatch; b++)
        for (int64_t d = 0; d < kDim; d++) tok[b * kDim + d] = x[(b * kDim + d) * kSeqlen + t];
      ccv1d_update_params p{};
      p.struct_size = sizeof p;
      p.backend = CCV1D_BACKEND_CPU;
      p.activation = CCV1D_ACT_SILU;
      p.batch = kBatch, p.dim = kDim, p.seqlen = 1, p.width = kWidth, p.state_len = kStateLen;
      p.x = view(tok.data(), kDim, 1, 1);
      p.weight = f.weight;
      p.bias = f.bias;
      p.out = view(out.data(), kDim, 1, 1);
      p.conv_state = view(state.data(), kDim * kStateLen, kStateLen, 1);
      if (circular) p.cache_seqlens = view(cache_seqlens.data(), 1);
      check(ccv1d_update(&p, nullptr), "ccv1d_update");
      for (auto& c : cache_seqlens) c++;
      for (int64_t b = 0; b < kBatch; b++)
        for (int64_t d = 0; d < kDim; d++)
          worst = std::fmax(worst, std::fabs(out[b * kDim + d] - ref[(b * kDim + d) * kSeqlen + t]));
    }
  }
  bool ok = worst < 1e-5;
  std::printf("decode %lld tokens x 2 state modes vs prefill: max|diff| %.2e: %s\n", (long long)kSeqlen, worst,
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
