/* C11 example: forward + backward of a causal depthwise conv1d on host memory (CPU backend),
 * channel-last layout, SiLU, checked against a naive reference computed here.
 * Build: cc -std=c11 -I include examples-c/fwd_bwd.c -L target/release -lcausal_conv1d -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "causal_conv1d.h"

enum { B = 2, D = 16, L = 40, W = 4 };

static ccv1d_tensor f32_view(float *data, int64_t s0, int64_t s1, int64_t s2) {
  ccv1d_tensor t = {data, CCV1D_DTYPE_F32, {s0, s1, s2}};
  return t;
}

static double silu(double z) { return z / (1.0 + exp(-z)); }

/* x, dout: channel-last [B, L, D]; weight [D, W]. */
static double xat(const float *x, int b, int d, int t) { return t < 0 ? 0.0 : x[(b * L + t) * D + d]; }

int main(void) {
  static float x[B * L * D], out[B * L * D], dout[B * L * D], dx[B * L * D];
  static float weight[D * W], bias[D], dweight[D * W], dbias[D];
  srand(7);
  for (int i = 0; i < B * L * D; i++) x[i] = (float)rand() / RAND_MAX - 0.5f, dout[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < D * W; i++) weight[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < D; i++) bias[i] = (float)rand() / RAND_MAX - 0.5f;

  /* Logical dims are [batch, dim, seqlen]; channel-last memory means strides (L*D, 1, D). */
  ccv1d_fwd_params f;
  memset(&f, 0, sizeof f);
  f.struct_size = sizeof f;
  f.backend = CCV1D_BACKEND_CPU;
  f.activation = CCV1D_ACT_SILU;
  f.batch = B, f.dim = D, f.seqlen = L, f.width = W;
  f.x = f32_view(x, L * D, 1, D);
  f.weight = f32_view(weight, W, 1, 0);
  f.bias = f32_view(bias, 1, 0, 0);
  f.out = f32_view(out, L * D, 1, D);
  ccv1d_status s = ccv1d_fwd(&f, NULL);
  if (s != CCV1D_OK) {
    fprintf(stderr, "ccv1d_fwd failed: %s: %s\n", ccv1d_status_string(s), ccv1d_last_error());
    return 1;
  }

  ccv1d_bwd_params g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.backend = CCV1D_BACKEND_CPU;
  g.activation = CCV1D_ACT_SILU;
  g.batch = B, g.dim = D, g.seqlen = L, g.width = W;
  g.x = f.x, g.weight = f.weight, g.bias = f.bias;
  g.dout = f32_view(dout, L * D, 1, D);
  g.dx = f32_view(dx, L * D, 1, D);
  g.dweight = f32_view(dweight, W, 1, 0);
  g.dbias = f32_view(dbias, 1, 0, 0);
  s = ccv1d_bwd(&g, NULL);
  if (s != CCV1D_OK) {
    fprintf(stderr, "ccv1d_bwd failed: %s: %s\n", ccv1d_status_string(s), ccv1d_last_error());
    return 1;
  }

  /* Naive reference in double. */
  static double gr[B][L][D];
  double err_out = 0, err_dx = 0, err_dw = 0, err_db = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < L; t++)
      for (int d = 0; d < D; d++) {
        double z = bias[d];
        for (int k = 0; k < W; k++) z += weight[d * W + k] * xat(x, b, d, t - (W - 1) + k);
        double sg = 1.0 / (1.0 + exp(-z));
        gr[b][t][d] = dout[(b * L + t) * D + d] * sg * (1.0 + z * (1.0 - sg));
        err_out = fmax(err_out, fabs(silu(z) - out[(b * L + t) * D + d]));
      }
  for (int d = 0; d < D; d++) {
    double db = 0;
    for (int k = 0; k < W; k++) {
      double dw = 0;
      for (int b = 0; b < B; b++)
        for (int t = 0; t < L; t++) dw += gr[b][t][d] * xat(x, b, d, t - (W - 1) + k);
      err_dw = fmax(err_dw, fabs(dw - dweight[d * W + k]));
    }
    for (int b = 0; b < B; b++)
      for (int t = 0; t < L; t++) {
        db += gr[b][t][d];
        double v = 0;
        for (int k = 0; k < W; k++) {
          int q = t + (W - 1) - k;
          if (q < L) v += weight[d * W + k] * gr[b][q][d];
        }
        err_dx = fmax(err_dx, fabs(v - dx[(b * L + t) * D + d]));
      }
    err_db = fmax(err_db, fabs(db - dbias[d]));
  }
  int ok = err_out < 1e-5 && err_dx < 1e-5 && err_dw < 1e-4 && err_db < 1e-4;
  printf("libcausal_conv1d %s: fwd max|err| %.2e, dx %.2e, dweight %.2e, dbias %.2e: %s\n", ccv1d_version(), err_out,
         err_dx, err_dw, err_db, ok ? "PASS" : "FAIL");

  /* A bad call: width 9 is refused with a status and a message naming the field. */
  f.width = 9;
  s = ccv1d_fwd(&f, NULL);
  printf("width=9 -> %s (%s)\n", ccv1d_status_string(s), ccv1d_last_error());
  if (s != CCV1D_ERR_WIDTH) ok = 0;
  return ok ? 0 : 1;
}
