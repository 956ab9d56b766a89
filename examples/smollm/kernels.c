/* The CUDA C of the model's kernels (see kernels.h), compiled by NVRTC through the runtime's
 * artifact cache. No toolkit header is included: fp16 scales are decoded with bit operations and
 * only NVRTC's built-in device functions are used. The text is this file's SMOL_CUDA block,
 * stringised (so it holds no preprocessor lines and no comments survive). */
#include "examples/smollm/kernels.h"

#define SMOL_CUDA(...) #__VA_ARGS__

const char smol_kernel_source[] = SMOL_CUDA(
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

__device__ __forceinline__ float h2f(u32 h) {
  u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  if (e == 0u) {
    float f = (float)m * 5.9604644775390625e-8f;
    return s ? -f : f;
  }
  if (e == 31u) return __int_as_float(s | 0x7f800000u | (m << 13));
  return __int_as_float(s | ((e + 112u) << 23) | (m << 13));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float block_sum(float v, float *red) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *red) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : -3.0e38f;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ void rmsnorm_to_shared(const float *x, const float *w, float *xs, int n, float eps,
                                  float *red) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = x[i];
    xs[i] = v;
    ss += v * v;
  }
  float total = block_sum(ss, red);
  float scale = rsqrtf(total / (float)n + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = xs[i] * scale * w[i];
  __syncthreads();
}

template <int K> struct q41_regs {
  u32 dm[(K / 8 + 31) / 32], q[(K / 8 + 31) / 32];
};

template <int K> __device__ __forceinline__ void q41_load(const u8 *row, int lane, q41_regs<K> &r) {
  const u32 *w = (const u32 *)row;
  for (int it = 0; it < (K / 8 + 31) / 32; it++) {
    int i = lane + it * 32, b = i >> 2, j = i & 3;
    bool ok = i < K / 8;
    r.dm[it] = ok ? __ldg(w + b * 5) : 0u;
    r.q[it] = ok ? __ldg(w + b * 5 + 1 + j) : 0u;
  }
}

template <int K>
__device__ __forceinline__ float q41_finish(const q41_regs<K> &r, const float *xs, int lane) {
  float acc = 0.0f;
  for (int it = 0; it < (K / 8 + 31) / 32; it++) {
    int i = lane + it * 32, b = i >> 2, j = i & 3;
    if (i < K / 8) {
      u32 dm = r.dm[it], q = r.q[it];
      const float *xb = xs + b * 32 + j * 4;
      float sq = 0.0f, sx = 0.0f;
      for (int t = 0; t < 4; t++) {
        float x0 = xb[t], x1 = xb[t + 16];
        sq += (float)((q >> (8 * t)) & 15u) * x0 + (float)((q >> (8 * t + 4)) & 15u) * x1;
        sx += x0 + x1;
      }
      acc += h2f(dm & 0xffffu) * sq + h2f(dm >> 16) * sx;
    }
  }
  return warp_sum(acc);
}

struct q80_regs {
  u32 d[9], v[9];
};

__device__ __forceinline__ void q80_load(const u8 *row, int lane, q80_regs &r) {
  const u16 *w = (const u16 *)row;
  for (int it = 0; it < 9; it++) {
    int i = lane + it * 32, b = i >> 4, j = i & 15;
    r.d[it] = __ldg(w + b * 17);
    r.v[it] = __ldg(w + b * 17 + 1 + j);
  }
}

__device__ __forceinline__ float q80_finish(const q80_regs &r, const float *xs, int lane) {
  float acc = 0.0f;
  for (int it = 0; it < 9; it++) {
    int i = lane + it * 32, b = i >> 4, j = i & 15;
    u32 v = r.v[it];
    acc += h2f(r.d[it]) * ((float)(signed char)(v & 0xffu) * xs[b * 32 + 2 * j] +
                           (float)(signed char)(v >> 8) * xs[b * 32 + 2 * j + 1]);
  }
  return warp_sum(acc);
}

extern "C" __global__ void smol_embed(const u8 *emb, const int *slot_in, int *step, float *x,
                                      int dim) {
  __shared__ int tok;
  if (threadIdx.x == 0) {
    tok = ((volatile const int *)slot_in)[0];
    step[0] = tok;
    step[1] = ((volatile const int *)slot_in)[1];
  }
  __syncthreads();
  const u8 *row = emb + (unsigned long long)tok * (unsigned long long)(dim / 32 * 34);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const u8 *b = row + (i >> 5) * 34;
    float d = h2f((u32)b[0] | ((u32)b[1] << 8));
    x[i] = d * (float)(signed char)b[2 + (i & 31)];
  }
}

extern "C" __global__ void smol_qkv(const float *x, const float *norm_w, const u8 *wq,
                                    const u8 *wk, const u8 *wv, const int *step, float *q,
                                    float *kc, float *vc, float eps, float theta) {
  __shared__ float xs[576];
  __shared__ float red[32];
  int lane = threadIdx.x & 31;
  int unit = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const u8 *w = wq;
  int row = 0;
  if (unit < 288) {
    row = unit * 2, w = wq;
  } else if (unit < 384) {
    row = (unit - 288) * 2, w = wk;
  } else if (unit < 480) {
    row = (unit - 384) * 2, w = wv;
  }
  q41_regs<576> ra, rb;
  if (unit < 480) {
    q41_load<576>(w + (unsigned long long)row * 360, lane, ra);
    q41_load<576>(w + (unsigned long long)(row + 1) * 360, lane, rb);
  }
  int pos = step[1];
  rmsnorm_to_shared(x, norm_w, xs, 576, eps, red);
  if (unit >= 480) return;
  float *out = unit < 288 ? q : unit < 384 ? kc + (unsigned long long)pos * 192
                                           : vc + (unsigned long long)pos * 192;
  float a = q41_finish<576>(ra, xs, lane);
  float b = q41_finish<576>(rb, xs, lane);
  if (lane == 0) {
    if (unit < 384) {
      int i = (row & 63) >> 1;
      float freq = expf(-logf(theta) * (float)(2 * i) / 64.0f), s, c;
      sincosf((float)pos * freq, &s, &c);
      float a2 = a * c - b * s;
      b = a * s + b * c;
      a = a2;
    }
    out[row] = a;
    out[row + 1] = b;
  }
}

extern "C" __global__ void smol_attn(const float *q, const float *kc, const float *vc,
                                     const int *step, float *out) {
  extern __shared__ float scores[];
  __shared__ float red[32];
  __shared__ float qs[64];
  __shared__ float2 part[8][32];
  int h = blockIdx.x, kvh = h / 3, n = step[1] + 1;
  if (threadIdx.x < 64) qs[threadIdx.x] = q[h * 64 + threadIdx.x] * 0.125f;
  __syncthreads();
  float m = -3.0e38f;
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const float4 *k = (const float4 *)(kc + (unsigned long long)t * 192 + kvh * 64);
    float s = 0.0f;
    for (int i = 0; i < 16; i++) {
      float4 v = k[i];
      s += v.x * qs[4 * i] + v.y * qs[4 * i + 1] + v.z * qs[4 * i + 2] + v.w * qs[4 * i + 3];
    }
    scores[t] = s;
    m = fmaxf(m, s);
  }
  m = block_max(m, red);
  float sum = 0.0f;
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    float e = expf(scores[t] - m);
    scores[t] = e;
    sum += e;
  }
  sum = block_sum(sum, red);
  int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
  const float2 *v2 = (const float2 *)(vc + kvh * 64) + lane;
  float2 acc0 = {0.0f, 0.0f}, acc1 = {0.0f, 0.0f};
  int t = g;
  for (; t + 8 < n; t += 16) {
    float2 a = v2[(unsigned long long)t * 96], b = v2[(unsigned long long)(t + 8) * 96];
    float sa = scores[t], sb = scores[t + 8];
    acc0.x += sa * a.x, acc0.y += sa * a.y;
    acc1.x += sb * b.x, acc1.y += sb * b.y;
  }
  if (t < n) {
    float2 a = v2[(unsigned long long)t * 96];
    acc0.x += scores[t] * a.x, acc0.y += scores[t] * a.y;
  }
  float2 acc = {acc0.x + acc1.x, acc0.y + acc1.y};
  part[g][lane] = acc;
  __syncthreads();
  if (threadIdx.x < 64) {
    int d = threadIdx.x, j = d >> 1;
    float r = 0.0f;
    for (int w = 0; w < 8; w++) r += (d & 1) ? part[w][j].y : part[w][j].x;
    out[h * 64 + d] = r / sum;
  }
}

template <int K>
__device__ __forceinline__ void matvec_res(const u8 *w, const float *in, float *x, int rows,
                                           float *xs) {
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  q41_regs<K> r;
  if (row < rows) q41_load<K>(w + (unsigned long long)row * (K / 32 * 20), lane, r);
  for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = in[i];
  __syncthreads();
  if (row >= rows) return;
  float v = q41_finish<K>(r, xs, lane);
  if (lane == 0) x[row] += v;
}

extern "C" __global__ void smol_matvec_res(const u8 *w, const float *in, float *x, int k,
                                           int rows) {
  __shared__ float xs[1536];
  if (k == 576)
    matvec_res<576>(w, in, x, rows, xs);
  else
    matvec_res<1536>(w, in, x, rows, xs);
}

extern "C" __global__ void smol_ffn_up(const float *x, const float *norm_w, const u8 *wg,
                                       const u8 *wu, float *hbuf, float eps) {
  __shared__ float xs[576];
  __shared__ float red[32];
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  q41_regs<576> rg, ru;
  if (row < 1536) {
    q41_load<576>(wg + (unsigned long long)row * 360, lane, rg);
    q41_load<576>(wu + (unsigned long long)row * 360, lane, ru);
  }
  rmsnorm_to_shared(x, norm_w, xs, 576, eps, red);
  if (row >= 1536) return;
  float g = q41_finish<576>(rg, xs, lane);
  float u = q41_finish<576>(ru, xs, lane);
  if (lane == 0) hbuf[row] = g / (1.0f + expf(-g)) * u;
}

extern "C" __global__ void smol_logits(const float *x, const float *norm_w, const u8 *emb,
                                       float *logits, float eps, int rows) {
  __shared__ float xs[576];
  __shared__ float red[32];
  int lane = threadIdx.x & 31;
  int first = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * 2;
  q80_regs r0, r1;
  if (first < rows) q80_load(emb + (unsigned long long)first * 612, lane, r0);
  if (first + 1 < rows) q80_load(emb + (unsigned long long)(first + 1) * 612, lane, r1);
  rmsnorm_to_shared(x, norm_w, xs, 576, eps, red);
  if (first < rows) {
    float v = q80_finish(r0, xs, lane);
    if (lane == 0) logits[first] = v;
  }
  if (first + 1 < rows) {
    float v = q80_finish(r1, xs, lane);
    if (lane == 0) logits[first + 1] = v;
  }
}

extern "C" __global__ void smol_argmax(const float *logits, int n, int *slot_out) {
  __shared__ float bv[32];
  __shared__ int bi[32];
  float best = -3.0e38f;
  int idx = 0x7fffffff;
  const float4 *l4 = (const float4 *)logits;
  int n4 = n >> 2, nb = (int)blockDim.x;
  for (int base = threadIdx.x; base < n4; base += 4 * nb) {
    float4 v[4];
    for (int u = 0; u < 4; u++) {
      int i = base + u * nb;
      float4 z = {-3.0e38f, -3.0e38f, -3.0e38f, -3.0e38f};
      v[u] = i < n4 ? l4[i] : z;
    }
    for (int u = 0; u < 4; u++) {
      int i = 4 * (base + u * nb);
      if (v[u].x > best) best = v[u].x, idx = i;
      if (v[u].y > best) best = v[u].y, idx = i + 1;
      if (v[u].z > best) best = v[u].z, idx = i + 2;
      if (v[u].w > best) best = v[u].w, idx = i + 3;
    }
  }
  for (int i = 4 * n4 + (int)threadIdx.x; i < n; i += nb) {
    float v = logits[i];
    if (v > best) best = v, idx = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, best, o);
    int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > best || (ov == best && oi < idx)) best = ov, idx = oi;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) bv[warp] = best, bi[warp] = idx;
  __syncthreads();
  if (warp == 0) {
    best = lane < nw ? bv[lane] : -3.0e38f;
    idx = lane < nw ? bi[lane] : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, best, o);
      int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ov > best || (ov == best && oi < idx)) best = ov, idx = oi;
    }
    if (lane == 0) ((volatile int *)slot_out)[0] = idx;
  }
}
);
