/* The model's kernels as CUDA C text for NVRTC (kernels.c), and the shapes they are written for.
 * Every kernel is extern "C"; the fake driver runs host twins registered under the same names
 * (tools/smollm/host_twins.c). Parameters (pointers are device addresses):
 *   smol_embed(u8 *emb, int *slot_in, int *step, float *x, int dim)
 *       step = slot_in[0..1] = {token, pos}; x = Q8_0 row `token` of emb
 *   smol_qkv(float *x, float *norm, u8 *wq, u8 *wk, u8 *wv, int *step, float *q, float *kc,
 *            float *vc, float eps, float theta)
 *       xn = rmsnorm(x) * norm; q = rope(Wq xn); kc[pos] = rope(Wk xn); vc[pos] = Wv xn
 *   smol_attn(float *q, float *kc, float *vc, int *step, float *out)   grid 9: one head each
 *   smol_matvec_res(u8 *w, float *in, float *x, int k, int rows)       x += W in (Q4_1;
 *       k is 576 or 1536)
 *   smol_ffn_up(float *x, float *norm, u8 *wg, u8 *wu, float *h, float eps)
 *       xn = rmsnorm(x) * norm; h = silu(Wg xn) * (Wu xn)
 *   smol_logits(float *x, float *norm, u8 *emb, float *logits, float eps, int rows)  (Q8_0)
 *   smol_argmax(float *logits, int n, int *slot_out)     slot_out[0] = first index of the max */
#ifndef T4A_EXAMPLES_SMOLLM_KERNELS_H_
#define T4A_EXAMPLES_SMOLLM_KERNELS_H_

/* The shapes the kernels are specialised for (SmolLM2-135M). */
enum {
  SMOL_DIM = 576,
  SMOL_FF = 1536,
  SMOL_HEADS = 9,
  SMOL_KV_HEADS = 3,
  SMOL_HEAD_DIM = 64,
  SMOL_KV_DIM = SMOL_KV_HEADS * SMOL_HEAD_DIM, /* 192 */
  SMOL_THREADS = 256,                          /* embed, attention, logits */
  SMOL_MV_THREADS = 128,                       /* qkv, ffn_up, matvec_res: one row (pair) a warp */
  SMOL_ARGMAX_THREADS = 1024,
  SMOL_QKV_BLOCKS = (SMOL_DIM + 2 * SMOL_KV_DIM) / 2 / (SMOL_MV_THREADS / 32), /* 120 */
  SMOL_LOGIT_ROWS_PER_WARP = 2
};

extern const char smol_kernel_source[];

#endif /* T4A_EXAMPLES_SMOLLM_KERNELS_H_ */
