#!/usr/bin/env python3
"""The H200 comparison: transformers (with torch and gguf) loads the same GGUF in fp32 and is
compared with t4a-smollm on one GPU, in one run:
  - the last position's logits for "The capital of France is" (max |difference|, tolerance
    --tolerance, default 1e-2) and the greedy continuation of 32 tokens, token for token;
  - decode tokens/s with 128 new tokens after that prompt: t4a chain replay, descriptor fires,
    checked launches (t4a-smollm --way all), and transformers eager (attn_implementation="eager",
    a greedy loop with its KV cache, one token at a time);
  - prefill tokens/s for a prompt of about 512 tokens (t4a: one step per token);
  - the floor t4a-smollm prints (the weights read per token over the device copy rate).
Usage (on the GPU machine, with the model fetched by python3 examples/smollm/fetch_model.py):
  python3 examples/smollm/compare_transformers.py --json OUT [--t4a build/gcc/t4a-smollm]
      [--model examples/smollm/model/SmolLM2-135M-Instruct.Q4_1.gguf]
Needs: pip install torch transformers gguf numpy. Exit 0 when the logits are within tolerance and
the 32 tokens are identical, 1 otherwise."""
import argparse, json, os, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROMPT = "The capital of France is"


def run_t4a(binary, model, prompt, n, logits=None, extra=()):
    cmd = [binary, "--model", model, "--prompt", prompt, "-n", str(n), "--json"] + list(extra)
    if logits:
        cmd += ["--logits", logits]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("t4a-smollm failed (%d): %s" % (p.returncode, " ".join(cmd)))
    return json.loads(p.stdout), p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--t4a", default=os.path.join(ROOT, "build", "gcc", "t4a-smollm"))
    ap.add_argument("--model", default=os.path.join(HERE, "model", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tolerance", type=float, default=1e-2)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "t4a-smollm-cache"))
    a = ap.parse_args()
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.split(os.path.abspath(a.model))
    dev = torch.device("cuda")
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32,
                                                 attn_implementation="eager").to(dev).eval()
    ids = tok(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids.to(dev)
    out = {"prompt": PROMPT, "hf_prompt_ids": ids[0].tolist(), "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "transformers": __import__("transformers").__version__}

    def greedy(n, timed=False):
        with torch.no_grad():
            r = model(ids, use_cache=True)
            past, nxt = r.past_key_values, int(r.logits[0, -1].argmax())
            first_logits = r.logits[0, -1].float().cpu().numpy()
            toks = [nxt]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n - 1):
                r = model(torch.tensor([[nxt]], device=dev), past_key_values=past, use_cache=True)
                past, nxt = r.past_key_values, int(r.logits[0, -1].argmax())
                toks.append(nxt)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        return toks, first_logits, (n - 1) / dt if dt > 0 else 0.0

    hf32, hf_logits, _ = greedy(32)
    greedy(8)  # warm-up
    _, _, hf_tps = greedy(128, timed=True)
    out["transformers"] = {"tokens32": hf32, "decode_tok_s_eager_128": hf_tps,
                           "text32": tok.decode(hf32)}
    # t4a: a cold start fills the disk cache, then the measured runs start warm
    logits_file = os.path.join(tempfile.gettempdir(), "t4a_smollm_logits.bin")
    run_t4a(a.t4a, a.model, PROMPT, 2, extra=["--cache", a.cache, "--way", "chain"])
    j32, _ = run_t4a(a.t4a, a.model, PROMPT, 32, logits=logits_file,
                     extra=["--cache", a.cache, "--way", "chain"])
    t4a_logits = np.fromfile(logits_file, dtype="<f4")
    diff = np.abs(t4a_logits.astype(np.float64) - hf_logits.astype(np.float64))
    t4a32 = j32["ways"]["chain"]["tokens"]
    j128, _ = run_t4a(a.t4a, a.model, PROMPT, 128, extra=["--cache", a.cache, "--way", "all"])
    long_prompt = ("The history of the city is long and full of events that shaped the region. " * 40)
    long_ids = tok(long_prompt, add_special_tokens=False).input_ids[:512]
    long_text = tok.decode(long_ids)
    j512, _ = run_t4a(a.t4a, a.model, long_text, 2, extra=["--cache", a.cache, "--way", "chain"])
    out["t4a"] = {"run32": j32, "run128": j128, "prefill512": j512}
    out["correctness"] = {
        "logits_max_abs_diff": float(diff.max()), "logits_argmax_t4a": int(t4a_logits.argmax()),
        "logits_argmax_transformers": int(hf_logits.argmax()), "tolerance": a.tolerance,
        "logits_within_tolerance": bool(diff.max() <= a.tolerance),
        "tokens32_identical": t4a32 == hf32,
        "first_difference": next((i for i, (x, y) in enumerate(zip(t4a32, hf32)) if x != y), None),
        "prompt_ids_identical": j32["prompt_tokens"] == out["hf_prompt_ids"],
        "warm_start_nvrtc_calls": j32["open"]["nvrtc_calls"]}
    w = j128["ways"]
    rate = lambda r: r["decode_tokens"] / r["decode_s"] if r["decode_s"] > 0 else 0.0
    out["speed"] = {
        "decode_tok_s": {"t4a_chain": rate(w["chain"]), "t4a_descriptors": rate(w["descriptors"]),
                         "t4a_checked": rate(w["checked"]), "transformers_eager": hf_tps},
        "host_us_per_token_chain": w["chain"]["host_submit_s"] * 1e6 / w["chain"]["decode_tokens"],
        "host_waits_per_token_chain": w["chain"]["host_waits"] / w["chain"]["decode_tokens"],
        "heap_allocations_decode_chain": w["chain"]["heap_allocations"],
        "floor_us": j128["floor_us"], "step_weight_bytes": j128["step_weight_bytes"],
        "copy_rate_bytes_per_s": j128["copy_rate_bytes_per_s"],
        "prefill_tokens": j512["ways"]["chain"]["prefill_tokens"],
        "prefill_tok_s": j512["ways"]["chain"]["prefill_tokens"] / j512["ways"]["chain"]["prefill_s"],
        "reference_2026_12_01": {"transformers_eager": 41, "llama_cpp_cuda_graphs": 774,
                                 "llama_cpp_no_graphs": 328, "llama_cpp_prefill_512": 44000}}
    json.dump(out, open(a.json, "w"), indent=1)
    c, s = out["correctness"], out["speed"]
    print("logits max |t4a - transformers| = %.3g (tolerance %g): %s" % (
        c["logits_max_abs_diff"], a.tolerance, "PASS" if c["logits_within_tolerance"] else "FAIL"))
    print("32 greedy tokens identical: %s" % ("PASS" if c["tokens32_identical"] else
                                              "FAIL at %s" % c["first_difference"]))
    for k, v in s["decode_tok_s"].items():
        print("decode %-20s %9.1f tok/s" % (k, v))
    print("host %.2f us/token (chain); floor %.1f us/token; prefill %d tokens: %.0f tok/s" % (
        s["host_us_per_token_chain"], s["floor_us"], s["prefill_tokens"], s["prefill_tok_s"]))
    return 0 if c["logits_within_tolerance"] and c["tokens32_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
