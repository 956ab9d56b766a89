/* Host twins of examples/smollm's kernels for the fake driver (see host_twins.h): the same
 * arithmetic in float, once per launch for the whole grid. */
#include "tools/smollm/host_twins.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "examples/smollm/kernels.h"

typedef uint64_t dptr;

static dptr P(void **p, int i) {
  dptr v;
  memcpy(&v, p[i], 8);
  return v;
}
static int32_t I(void **p, int i) {
  int32_t v;
  memcpy(&v, p[i], 4);
  return v;
}
static float F(void **p, int i) {
  float v;
  memcpy(&v, p[i], 4);
  return v;
}

static float h2f(uint32_t h) {
  uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u, bits;
  if (e == 0) {
    float f = (float)m * 5.9604644775390625e-8f;
    return s ? -f : f;
  }
  bits = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static float q41_dot(const uint8_t *row, const float *x, int k) {
  float acc = 0;
  for (int b = 0; b < k / 32; b++) {
    const uint8_t *blk = row + b * 20;
    float d = h2f((uint32_t)blk[0] | (uint32_t)blk[1] << 8);
    float m = h2f((uint32_t)blk[2] | (uint32_t)blk[3] << 8);
    float sq = 0, sx = 0;
    for (int j = 0; j < 16; j++) {
      float x0 = x[b * 32 + j], x1 = x[b * 32 + j + 16];
      sq += (float)(blk[4 + j] & 15) * x0 + (float)(blk[4 + j] >> 4) * x1;
      sx += x0 + x1;
    }
    acc += d * sq + m * sx;
  }
  return acc;
}

static float q80_dot(const uint8_t *row, const float *x, int k) {
  float acc = 0;
  for (int b = 0; b < k / 32; b++) {
    const uint8_t *blk = row + b * 34;
    float d = h2f((uint32_t)blk[0] | (uint32_t)blk[1] << 8), s = 0;
    for (int j = 0; j < 32; j++) s += (float)(int8_t)blk[2 + j] * x[b * 32 + j];
    acc += d * s;
  }
  return acc;
}

static void rmsnorm(const float *x, const float *w, float *out, int n, float eps) {
  float ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  float scale = 1.0f / sqrtf(ss / (float)n + eps);
  for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

#define DEREF(l, ptr, bytes, out) \
  if (((out) = t4a_fake_deref((l), (ptr), (bytes))) == NULL) return

static void k_embed(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  int dim = I(p, 4);
  const int32_t *in;
  int32_t *step;
  float *x;
  DEREF(l, P(p, 1), 8, in);
  DEREF(l, P(p, 2), 8, step);
  DEREF(l, P(p, 3), (size_t)dim * 4, x);
  step[0] = in[0];
  step[1] = in[1];
  size_t row = (size_t)dim / 32 * 34;
  const uint8_t *emb;
  DEREF(l, P(p, 0) + (uint64_t)in[0] * row, row, emb);
  for (int i = 0; i < dim; i++) {
    const uint8_t *b = emb + (i / 32) * 34;
    x[i] = h2f((uint32_t)b[0] | (uint32_t)b[1] << 8) * (float)(int8_t)b[2 + i % 32];
  }
}

static void rope(float *v, int rows, int pos, float theta) {
  for (int r = 0; r < rows; r += 2) {
    int i = (r & 63) >> 1;
    float freq = expf(-logf(theta) * (float)(2 * i) / 64.0f);
    float s = sinf((float)pos * freq), c = cosf((float)pos * freq);
    float a = v[r], b = v[r + 1];
    v[r] = a * c - b * s;
    v[r + 1] = a * s + b * c;
  }
}

static void k_qkv(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  const float *x, *nw;
  const uint8_t *wq, *wk, *wv;
  const int32_t *step;
  float *q, *kc, *vc, xs[SMOL_DIM];
  DEREF(l, P(p, 0), SMOL_DIM * 4, x);
  DEREF(l, P(p, 1), SMOL_DIM * 4, nw);
  DEREF(l, P(p, 2), (size_t)SMOL_DIM * 360, wq);
  DEREF(l, P(p, 3), (size_t)SMOL_KV_DIM * 360, wk);
  DEREF(l, P(p, 4), (size_t)SMOL_KV_DIM * 360, wv);
  DEREF(l, P(p, 5), 8, step);
  int pos = step[1];
  DEREF(l, P(p, 6), SMOL_DIM * 4, q);
  DEREF(l, P(p, 7) + (uint64_t)pos * SMOL_KV_DIM * 4, SMOL_KV_DIM * 4, kc);
  DEREF(l, P(p, 8) + (uint64_t)pos * SMOL_KV_DIM * 4, SMOL_KV_DIM * 4, vc);
  float eps = F(p, 9), theta = F(p, 10);
  rmsnorm(x, nw, xs, SMOL_DIM, eps);
  for (int r = 0; r < SMOL_DIM; r++) q[r] = q41_dot(wq + (size_t)r * 360, xs, SMOL_DIM);
  for (int r = 0; r < SMOL_KV_DIM; r++) {
    kc[r] = q41_dot(wk + (size_t)r * 360, xs, SMOL_DIM);
    vc[r] = q41_dot(wv + (size_t)r * 360, xs, SMOL_DIM);
  }
  rope(q, SMOL_DIM, pos, theta);
  rope(kc, SMOL_KV_DIM, pos, theta);
}

static void k_attn(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  const float *q, *kc, *vc;
  const int32_t *step;
  float *out;
  DEREF(l, P(p, 3), 8, step);
  int n = step[1] + 1;
  unsigned shared = 0;
  t4a_fake_launch_dims(l, NULL, NULL, &shared);
  if ((unsigned)n * 4u > shared) { /* the kernel's scores would overrun its shared memory */
    (void)t4a_fake_deref(l, 0, 1);
    return;
  }
  DEREF(l, P(p, 0), SMOL_DIM * 4, q);
  DEREF(l, P(p, 1), (size_t)n * SMOL_KV_DIM * 4, kc);
  DEREF(l, P(p, 2), (size_t)n * SMOL_KV_DIM * 4, vc);
  DEREF(l, P(p, 4), SMOL_DIM * 4, out);
  float scores[8192];
  for (int h = 0; h < SMOL_HEADS; h++) {
    int kvh = h / 3;
    float m = -3.0e38f, sum = 0;
    for (int t = 0; t < n; t++) {
      float s = 0;
      for (int d = 0; d < 64; d++) s += q[h * 64 + d] * kc[(size_t)t * SMOL_KV_DIM + kvh * 64 + d];
      scores[t] = s * 0.125f;
      if (scores[t] > m) m = scores[t];
    }
    for (int t = 0; t < n; t++) {
      scores[t] = expf(scores[t] - m);
      sum += scores[t];
    }
    for (int d = 0; d < 64; d++) {
      float acc = 0;
      for (int t = 0; t < n; t++) acc += scores[t] * vc[(size_t)t * SMOL_KV_DIM + kvh * 64 + d];
      out[h * 64 + d] = acc / sum;
    }
  }
}

static void k_matvec_res(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  int k = I(p, 3), rows = I(p, 4);
  const uint8_t *w;
  const float *in;
  float *x;
  size_t rb = (size_t)k / 32 * 20;
  DEREF(l, P(p, 0), rb * (size_t)rows, w);
  DEREF(l, P(p, 1), (size_t)k * 4, in);
  DEREF(l, P(p, 2), (size_t)rows * 4, x);
  for (int r = 0; r < rows; r++) x[r] += q41_dot(w + (size_t)r * rb, in, k);
}

static void k_ffn_up(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  const float *x, *nw;
  const uint8_t *wg, *wu;
  float *h, xs[SMOL_DIM];
  DEREF(l, P(p, 0), SMOL_DIM * 4, x);
  DEREF(l, P(p, 1), SMOL_DIM * 4, nw);
  DEREF(l, P(p, 2), (size_t)SMOL_FF * 360, wg);
  DEREF(l, P(p, 3), (size_t)SMOL_FF * 360, wu);
  DEREF(l, P(p, 4), SMOL_FF * 4, h);
  rmsnorm(x, nw, xs, SMOL_DIM, F(p, 5));
  for (int r = 0; r < SMOL_FF; r++) {
    float g = q41_dot(wg + (size_t)r * 360, xs, SMOL_DIM);
    float u = q41_dot(wu + (size_t)r * 360, xs, SMOL_DIM);
    h[r] = g / (1.0f + expf(-g)) * u;
  }
}

static void k_logits(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  int rows = I(p, 5);
  const float *x, *nw;
  const uint8_t *emb;
  float *logits, xs[SMOL_DIM];
  DEREF(l, P(p, 0), SMOL_DIM * 4, x);
  DEREF(l, P(p, 1), SMOL_DIM * 4, nw);
  DEREF(l, P(p, 2), (size_t)rows * 612, emb);
  DEREF(l, P(p, 3), (size_t)rows * 4, logits);
  rmsnorm(x, nw, xs, SMOL_DIM, F(p, 4));
  for (int r = 0; r < rows; r++) logits[r] = q80_dot(emb + (size_t)r * 612, xs, SMOL_DIM);
}

static void k_argmax(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  int n = I(p, 1);
  const float *logits;
  int32_t *out;
  DEREF(l, P(p, 0), (size_t)n * 4, logits);
  DEREF(l, P(p, 2), 4, out);
  int best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  out[0] = best;
}

void smol_host_twins_register(t4a_fake *fake) {
  static const size_t embed[] = {8, 8, 8, 8, 4},
                      qkv[] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4}, attn[] = {8, 8, 8, 8, 8},
                      matvec[] = {8, 8, 8, 4, 4}, ffn[] = {8, 8, 8, 8, 8, 4},
                      logits[] = {8, 8, 8, 8, 4, 4}, argmax[] = {8, 4, 8};
  t4a_fake_register_kernel(fake, "smol_embed", 5, embed, k_embed, NULL);
  t4a_fake_register_kernel(fake, "smol_qkv", 11, qkv, k_qkv, NULL);
  t4a_fake_register_kernel(fake, "smol_attn", 5, attn, k_attn, NULL);
  t4a_fake_register_kernel(fake, "smol_matvec_res", 5, matvec, k_matvec_res, NULL);
  t4a_fake_register_kernel(fake, "smol_ffn_up", 6, ffn, k_ffn_up, NULL);
  t4a_fake_register_kernel(fake, "smol_logits", 6, logits, k_logits, NULL);
  t4a_fake_register_kernel(fake, "smol_argmax", 3, argmax, k_argmax, NULL);
}
