#!/usr/bin/env python3
"""Runs the CUDA text of examples/smollm/kernels.c on the CPU, thread by thread, to check the
kernels themselves (the fake driver runs their host twins instead). The kernel text is compiled
as C++ with a small emulation of the CUDA execution model: a block's threads are coroutines,
__syncthreads a barrier over the block, __shfl_xor_sync an exchange through a per-warp barrier,
__shared__ variables one copy per block (blocks run one at a time). It then runs one decode step
per prompt token of "The capital of France is" with the launch configurations smollm.c uses and
compares the last logits with the numpy reference (reference_logits.py --dump).

Usage: python3 examples/smollm/emulate_kernels.py [--model M] [--reference LOGITS.bin]
       python3 examples/smollm/emulate_kernels.py --attention   (smol_attn alone, 1..40 positions)
(a few minutes on two cores; needs g++, gguf and numpy). Exit 0 when within 1e-3."""
import argparse, os, re, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PRELUDE = r"""
#include <ucontext.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
struct dim3u { unsigned x, y, z; };
static dim3u threadIdx, blockIdx, blockDim, gridDim;
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
/* a block's threads are coroutines on one OS thread; barriers yield to the scheduler */
enum { T_READY, T_WARP, T_BLOCK, T_DONE };
static ucontext_t g_sched, g_ctx[1024];
static int g_state[1024];
static unsigned g_cur, g_nthreads;
static float g_dyn_shared[65536 / 4];
static unsigned long long g_xchg[1024];
static void yield_as(int state) {
  g_state[g_cur] = state;
  swapcontext(&g_ctx[g_cur], &g_sched);
}
static inline void __syncthreads() { yield_as(T_BLOCK); }
static inline void warp_barrier() { yield_as(T_WARP); }
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int o) {
  unsigned t = threadIdx.x;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof v);
  warp_barrier();
  g_xchg[t] = bits;
  warp_barrier();
  unsigned long long got = g_xchg[(t ^ (unsigned)o)];
  warp_barrier();
  T r;
  memcpy(&r, &got, sizeof r);
  return r;
}
static inline float __int_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
"""

MAIN = r"""
typedef void (*kfn)(void);
static kfn g_fn;
static char *g_stacks;
enum { STACK = 1 << 16 };
static void entry(void) {
  g_fn();
  g_state[g_cur] = T_DONE;
  swapcontext(&g_ctx[g_cur], &g_sched);
}
/* runs one block: resume every ready thread until it yields; release a warp when its 32 threads
 * wait at a warp barrier (or are done), the block when every live thread waits at __syncthreads */
static void run_block(void) {
  for (unsigned t = 0; t < g_nthreads; t++) {
    getcontext(&g_ctx[t]);
    g_ctx[t].uc_stack.ss_sp = g_stacks + (size_t)t * STACK;
    g_ctx[t].uc_stack.ss_size = STACK;
    g_ctx[t].uc_link = NULL;
    makecontext(&g_ctx[t], entry, 0);
    g_state[t] = T_READY;
  }
  for (;;) {
    int progressed = 0, live = 0, at_block = 0;
    for (unsigned t = 0; t < g_nthreads; t++) {
      if (g_state[t] != T_READY) continue;
      g_cur = t;
      threadIdx.x = t; threadIdx.y = 0; threadIdx.z = 0;
      swapcontext(&g_sched, &g_ctx[t]);
      progressed = 1;
    }
    for (unsigned w = 0; w * 32 < g_nthreads; w++) {
      int waiting = 0, done = 0;
      for (unsigned t = w * 32; t < w * 32 + 32 && t < g_nthreads; t++)
        waiting += g_state[t] == T_WARP, done += g_state[t] == T_DONE;
      if (waiting > 0 && waiting + done == 32) {
        if (done) { fprintf(stderr, "shuffle with exited lanes\n"); exit(3); }
        for (unsigned t = w * 32; t < w * 32 + 32; t++) g_state[t] = T_READY;
        progressed = 1;
      }
    }
    for (unsigned t = 0; t < g_nthreads; t++)
      live += g_state[t] != T_DONE, at_block += g_state[t] == T_BLOCK;
    if (live == 0) return;
    if (at_block == live) {
      for (unsigned t = 0; t < g_nthreads; t++)
        if (g_state[t] == T_BLOCK) g_state[t] = T_READY;
      progressed = 1;
    }
    if (!progressed) { fprintf(stderr, "deadlock in block %u\n", blockIdx.x); exit(3); }
  }
}
static void launch(unsigned grid, unsigned block, kfn fn) {
  if (g_stacks == NULL) g_stacks = (char *)malloc((size_t)1024 * STACK);
  g_nthreads = block;
  blockDim = {block, 1, 1};
  gridDim = {grid, 1, 1};
  g_fn = fn;
  for (unsigned b = 0; b < grid; b++) {
    blockIdx = {b, 0, 0};
    run_block();
  }
}
#define LAUNCH(grid, block, call) launch(grid, block, [] { call; })
static const uint8_t *W;
static float *X, *Q, *ATT, *H, *LOGITS, *KV;
static int SLOT_IN[2], SLOT_OUT[1], STEP[2];
static int POS_N;
static float EPS, THETA;
static int I_DIM = 576, I_FF = 1536, I_VOCAB = 49152;
static unsigned L_;
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDONLY);
  struct stat sb;
  fstat(fd, &sb);
  const uint8_t *file = (const uint8_t *)mmap(NULL, sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  W = file + DATA_OFFSET;
  EPS = EPS_V;
  THETA = THETA_V;
  POS_N = 8;
  X = (float *)calloc(576, 4); Q = (float *)calloc(576, 4); ATT = (float *)calloc(576, 4);
  H = (float *)calloc(1536, 4); LOGITS = (float *)calloc(49152, 4);
  KV = (float *)calloc((size_t)30 * 2 * POS_N * 192, 4);
  static const int prompt[5] = {504, 3575, 282, 4649, 314};
  int n_prompt = argc > 3 ? atoi(argv[3]) : 5;
  for (int p = 0; p < n_prompt; p++) {
    SLOT_IN[0] = prompt[p];
    SLOT_IN[1] = p;
    LAUNCH(1, 256, smol_embed(W + EMB, SLOT_IN, STEP, X, I_DIM));
    for (L_ = 0; L_ < 30; L_++) {
      LAUNCH(120, 128, smol_qkv(X, (const float *)(W + OFF[L_][0]), W + OFF[L_][1], W + OFF[L_][2],
                               W + OFF[L_][3], STEP, Q, KV + (size_t)L_ * 2 * POS_N * 192,
                               KV + ((size_t)L_ * 2 + 1) * POS_N * 192, EPS, THETA));
      LAUNCH(9, 256, { float *s = g_dyn_shared; (void)s;
                       smol_attn(Q, KV + (size_t)L_ * 2 * POS_N * 192,
                                 KV + ((size_t)L_ * 2 + 1) * POS_N * 192, STEP, ATT); });
      LAUNCH(144, 128, smol_matvec_res(W + OFF[L_][4], ATT, X, I_DIM, I_DIM));
      LAUNCH(384, 128, smol_ffn_up(X, (const float *)(W + OFF[L_][5]), W + OFF[L_][6],
                                   W + OFF[L_][7], H, EPS));
      LAUNCH(144, 128, smol_matvec_res(W + OFF[L_][8], H, X, I_FF, I_DIM));
    }
    fprintf(stderr, "position %d done\n", p);
  }
  LAUNCH(3072, 256, smol_logits(X, (const float *)(W + OUT_NORM), W + EMB, LOGITS, EPS, I_VOCAB));
  LAUNCH(1, 1024, smol_argmax(LOGITS, I_VOCAB, SLOT_OUT));
  FILE *f = fopen(argv[2], "wb");
  fwrite(LOGITS, 4, 49152, f);
  fclose(f);
  printf("%d\n", SLOT_OUT[0]);
  return 0;
}
"""

# --attention: smol_attn alone over random q, K and V for 1..40 positions (the V sum's paired
# path needs more than 8), against a float64 loop
ATTN_MAIN = r"""
static float *Qv, *K, *V, *OUT; static int STEPV[2];
int main() {
  int P = 64; srand(1);
  Qv = (float*)malloc(576*4); K = (float*)malloc(P*192*4); V = (float*)malloc(P*192*4); OUT = (float*)malloc(576*4);
  for (int i = 0; i < 576; i++) Qv[i] = (rand() / (float)RAND_MAX - 0.5f) * 4;
  for (int i = 0; i < P*192; i++) { K[i] = (rand() / (float)RAND_MAX - 0.5f) * 4; V[i] = rand() / (float)RAND_MAX - 0.5f; }
  double worst = 0;
  for (int n = 1; n <= 40; n++) {
    STEPV[1] = n - 1;
    LAUNCH(9, 256, smol_attn(Qv, K, V, STEPV, OUT));
    for (int h = 0; h < 9; h++) {
      int kvh = h / 3; double s[64], m = -1e300, sum = 0;
      for (int t = 0; t < n; t++) { double a = 0; for (int d = 0; d < 64; d++) a += (double)Qv[h*64+d] * 0.125 * K[t*192+kvh*64+d]; s[t] = a; if (a > m) m = a; }
      for (int t = 0; t < n; t++) { s[t] = exp(s[t] - m); sum += s[t]; }
      for (int d = 0; d < 64; d++) { double acc = 0; for (int t = 0; t < n; t++) acc += s[t] * V[t*192+kvh*64+d];
        double diff = fabs(acc / sum - OUT[h*64+d]); if (diff > worst) worst = diff; }
    }
  }
  printf("attention n=1..40: max |emulated - float64| = %g\n", worst);
  return worst < 1e-5 ? 0 : 1;
}
"""


def kernel_text():
    d = tempfile.mkdtemp()
    dump = os.path.join(d, "dump.c")
    open(dump, "w").write('#include <stdio.h>\nextern const char smol_kernel_source[];\n'
                          'int main(void) { fputs(smol_kernel_source, stdout); return 0; }\n')
    exe = os.path.join(d, "dump")
    subprocess.check_call(["gcc", "-std=c11", "-I" + ROOT, "-o", exe, dump,
                           os.path.join(HERE, "kernels.c")])
    return subprocess.check_output([exe]).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "model", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--reference", default=None)
    ap.add_argument("--tokens", type=int, default=5,
                    help="how many of the prompt's 5 tokens (the reference must match)")
    ap.add_argument("--attention", action="store_true",
                    help="only smol_attn, over 1..40 positions of random data (seconds)")
    a = ap.parse_args()
    if a.attention:
        src = kernel_text().replace('extern "C"', "")
        src = src.replace("extern __shared__ float scores[];", "float *scores = g_dyn_shared;")
        runner = MAIN[:MAIN.index("static const uint8_t *W;")]
        d = tempfile.mkdtemp()
        cpp = os.path.join(d, "attn.cpp")
        open(cpp, "w").write(PRELUDE + src + "\n" + runner + ATTN_MAIN)
        exe = os.path.join(d, "attn")
        subprocess.check_call(["g++", "-std=c++17", "-O2", "-w", "-o", exe, cpp, "-lm"])
        return subprocess.call([exe])
    import numpy as np
    from gguf import GGUFReader
    r = GGUFReader(a.model)
    off = {t.name: int(t.data_offset) for t in r.tensors}
    data = min(off.values())
    rel = lambda n: off[n] - data
    names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
             "ffn_up", "ffn_down"]
    rows = ",\n".join("{%s}" % ", ".join(str(rel("blk.%d.%s.weight" % (l, n))) for n in names)
                      for l in range(30))
    src = kernel_text()
    src = src.replace('extern "C"', "")
    src = src.replace("extern __shared__ float scores[];", "float *scores = g_dyn_shared;")
    cfg = ("static const unsigned long long DATA_OFFSET = %d, EMB = %d, OUT_NORM = %d;\n"
           "static const unsigned long long OFF[30][9] = {%s};\n#define EPS_V ((float)%.9g)\n"
           "#define THETA_V ((float)%.9g)\n" % (
               data, rel("token_embd.weight"), rel("output_norm.weight"), rows,
               float(r.fields["llama.attention.layer_norm_rms_epsilon"].contents()),
               float(r.fields["llama.rope.freq_base"].contents())))
    d = tempfile.mkdtemp()
    cpp = os.path.join(d, "emu.cpp")
    open(cpp, "w").write(PRELUDE + src + "\n" + cfg + MAIN)
    exe = os.path.join(d, "emu")
    subprocess.check_call(["g++", "-std=c++17", "-O2", "-w", "-o", exe, cpp, "-lm"])
    out_logits = os.path.join(d, "logits.bin")
    tok = int(subprocess.check_output([exe, a.model, out_logits, str(a.tokens)]).decode().split()[-1])
    got = np.fromfile(out_logits, dtype="<f4")
    print("emulated CUDA kernels: next token %d, logits argmax %d" % (tok, int(got.argmax())))
    if a.reference:
        ref = np.fromfile(a.reference, dtype="<f4")
        diff = float(np.abs(got.astype(np.float64) - ref).max())
        print("max |emulated CUDA - numpy| = %.3g over %d logits" % (diff, ref.size))
        return 0 if diff <= 1e-3 and tok == int(ref.argmax()) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
