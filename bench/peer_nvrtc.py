#!/usr/bin/env python3
"""The peers of t4a's artifact cache, on a GPU machine: CuPy's RawModule and cuda.core's Program.

For three sources (the kernels of nvrtc_bench's toolkit rows: a plain kernel, a kernel that
includes cuda_fp16.h, a CUB BlockReduce kernel), each compiled to an sm_XX CUBIN for device 0:

  cupy_compile_ms       RawModule(code=...).get_function() of a source CuPy has not seen (a fresh
                        CUPY_CACHE_DIR and a unique comment per repeat): NVRTC + CuPy's disk write
                        + cuModuleLoadData
  cupy_cache_hit_ms     the same source again, a new RawModule in the same process: CuPy's disk
                        cache (read, checks) + cuModuleLoadData
  cupy_new_process_hit_ms
                        the same in a new Python process (timed inside it, after `import cupy`
                        and the CUDA context are up): what t4a's "disk hit, new process" row
                        compares with
  cuda_core_compile_ms  cuda.core Program(...).compile("cubin"): NVRTC only (cuda.core has no
                        compile cache)

Each figure: median, minimum and maximum of --repeats runs. Include roots: the toolkit's include
directory and its cccl/ subfolder (CUDA 13 keeps CUB there), from CUDA_PATH or /usr/local/cuda.
CuPy's figures include loading the module on the device (it loads at get_function); t4a's rows do
not (a t4a artifact is context-free); the JSON says so.

Usage: python3 bench/peer_nvrtc.py --json OUT [--repeats R] [--nvrtc-bench PATH]
Prints the JSON and writes it to OUT. With --nvrtc-bench (e.g. .gpu/nvrtc_bench or
build/rel/nvrtc_bench), t4a's own rows are run in the same call, after the peers, and its output
is stored under "t4a_nvrtc_bench". A peer that is not installed (or no GPU) is recorded as
"unavailable" with the reason; the exit status is 1 only if nothing at all could be measured.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

SOURCES = {
    "plain": r'''
extern "C" __global__ void saxpy(float a, const float *__restrict__ x, float *__restrict__ y,
                                 int n) {
  int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a * x[i] + y[i];
}
''',
    "fp16": r'''
#include <cuda_fp16.h>
extern "C" __global__ void hscale(__half *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __float2half(__half2float(x[i]) * a);
}
''',
    "cub": r'''
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float *in, float *out) {
  using BlockReduce = cub::BlockReduce<float, 256>;
  __shared__ typename BlockReduce::TempStorage tmp;
  float v = in[blockIdx.x * 256 + threadIdx.x];
  float s = BlockReduce(tmp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
''',
}
KERNELS = {"plain": "saxpy", "fp16": "hscale", "cub": "block_sum"}


def cuda_root():
    for var in ("T4A_CUDA_PATH", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    return "/usr/local/cuda"


def include_roots():
    inc = os.path.join(cuda_root(), "include")
    roots = [inc]
    if os.path.isdir(os.path.join(inc, "cccl")):
        roots.append(os.path.join(inc, "cccl"))
    return roots


def stats(values, scale=1.0):
    v = [x * scale for x in values]
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


# ---- CuPy -----------------------------------------------------------------------------------

CHILD = r'''
import os, sys, time
import cupy
cupy.cuda.Device(0).use()
cupy.zeros(1)  # the context is up before the clock starts
src, name, opts = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
t0 = time.perf_counter()
m = cupy.RawModule(code=open(src).read(), options=opts, backend="nvrtc")
m.get_function(name)
print(time.perf_counter() - t0)
'''


def nvrtc_version(cupy):
    # CuPy 13 has cupy.cuda.nvrtc.getVersion; CuPy 14 moved it (cupy_backends): ask both, or say so.
    for mod in ("cupy.cuda.nvrtc", "cupy_backends.cuda.libs.nvrtc"):
        try:
            m = __import__(mod, fromlist=["getVersion"])
            return ".".join(str(x) for x in m.getVersion())
        except Exception:
            pass
    return "unknown"


def measure_cupy(repeats):
    try:
        import cupy  # noqa: F401
    except Exception as e:  # not installed, or no CUDA
        return {"unavailable": "import cupy: %s" % e}
    try:
        dev = cupy.cuda.Device(0)
        dev.use()
        cupy.zeros(1)
        cc = dev.compute_capability
    except Exception as e:
        return {"unavailable": "no usable GPU: %s" % e}
    out = {
        "version": cupy.__version__,
        "nvrtc": nvrtc_version(cupy),
        "arch": "sm_%s" % cc,
        "note": "includes cuModuleLoadData (CuPy loads at get_function)",
        "kernels": {},
    }
    opts = ("-std=c++17",) + tuple("-I" + r for r in include_roots())
    for key, src in SOURCES.items():
        name = KERNELS[key]
        res = {}
        try:
            with tempfile.TemporaryDirectory() as cache_dir:
                os.environ["CUPY_CACHE_DIR"] = cache_dir
                compile_s, hit_s, child_s = [], [], []
                for r in range(repeats):
                    unique = src + "\n// t4a peer run %d %d\n" % (os.getpid(), r)
                    t0 = time.perf_counter()
                    cupy.RawModule(code=unique, options=opts, backend="nvrtc").get_function(name)
                    compile_s.append(time.perf_counter() - t0)
                # one warm entry, then hits through new RawModule objects
                cupy.RawModule(code=src, options=opts, backend="nvrtc").get_function(name)
                for r in range(repeats):
                    t0 = time.perf_counter()
                    cupy.RawModule(code=src, options=opts, backend="nvrtc").get_function(name)
                    hit_s.append(time.perf_counter() - t0)
                src_file = os.path.join(cache_dir, "peer_%s.cu" % key)
                with open(src_file, "w") as f:
                    f.write(src)
                env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
                for r in range(repeats):
                    p = subprocess.run([sys.executable, "-c", CHILD, src_file, name] + list(opts),
                                       env=env, capture_output=True, text=True, timeout=600)
                    if p.returncode != 0:
                        raise RuntimeError("child: " + p.stderr.strip()[-400:])
                    child_s.append(float(p.stdout.strip().splitlines()[-1]))
            res["cupy_compile_ms"] = stats(compile_s, 1e3)
            res["cupy_cache_hit_ms"] = stats(hit_s, 1e3)
            res["cupy_new_process_hit_ms"] = stats(child_s, 1e3)
        except Exception as e:
            res["error"] = str(e)[-600:]
        out["kernels"][key] = res
    return out


# ---- cuda.core ------------------------------------------------------------------------------

def measure_cuda_core(repeats):
    try:
        try:
            from cuda.core import Device, Program, ProgramOptions
        except ImportError:
            from cuda.core.experimental import Device, Program, ProgramOptions
        import cuda.core as cc_mod
    except Exception as e:
        return {"unavailable": "import cuda.core: %s" % e}
    try:
        dev = Device(0)
        dev.set_current()
        arch = "sm_" + "".join(str(x) for x in dev.compute_capability)
    except Exception as e:
        return {"unavailable": "no usable GPU: %s" % e}
    out = {"version": getattr(cc_mod, "__version__", "?"), "arch": arch,
           "note": "compile only (no cache, no module load)", "kernels": {}}
    for key, src in SOURCES.items():
        res = {}
        try:
            opts = ProgramOptions(std="c++17", arch=arch, include_path=include_roots())
            Program(src, code_type="c++", options=opts).compile("cubin")  # warm-up
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                Program(src, code_type="c++", options=opts).compile("cubin")
                times.append(time.perf_counter() - t0)
            res["cuda_core_compile_ms"] = stats(times, 1e3)
        except Exception as e:
            res["error"] = str(e)[-600:]
        out["kernels"][key] = res
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True, help="where to write the JSON")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--nvrtc-bench", help="t4a's nvrtc_bench binary, run in the same call")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be positive")
    result = {
        "tool": "bench/peer_nvrtc.py",
        "host": platform.node(),
        "python": platform.python_version(),
        "cuda_root": cuda_root(),
        "include_roots": include_roots(),
        "repeats": a.repeats,
        "sources": SOURCES,
        "cupy": measure_cupy(a.repeats),
        "cuda_core": measure_cuda_core(a.repeats),
    }
    if a.nvrtc_bench:
        try:
            p = subprocess.run([a.nvrtc_bench, "--repeats", str(a.repeats)], capture_output=True,
                               text=True, timeout=1800)
            result["t4a_nvrtc_bench"] = {"rc": p.returncode, "stdout": p.stdout,
                                         "stderr": p.stderr[-2000:]}
        except Exception as e:
            result["t4a_nvrtc_bench"] = {"error": str(e)}
    text = json.dumps(result, indent=2)
    with open(a.json, "w") as f:
        f.write(text + "\n")
    print(text)
    measured = any(
        any(k.endswith("_ms") for k in kern)
        for peer in ("cupy", "cuda_core")
        for kern in result[peer].get("kernels", {}).values())
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
