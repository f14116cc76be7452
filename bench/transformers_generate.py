#!/usr/bin/env python3
"""transformers' `generate` on a g4 checkpoint in bf16, batch 1 (issue 12's
peer), on the GPU machine's PyTorch and transformers.

    python3 bench/transformers_generate.py MODEL_DIR [--prompt 512] [--gen 64] [--reps 2]

MODEL_DIR: a bf16 checkpoint (`g4 synth --quant bf16`, or a released one):
its text config builds a Gemma4ForCausalLM, whose weights are loaded from
the checkpoint's safetensors (the multimodal layout's `model.language_model.`
prefix mapped to `model.`). Prints one JSON line: prefill tok/s (one forward
over a random prompt) and decode tok/s (generate of --gen greedy tokens after
that prompt, less the prefill time), best of --reps after a warm-up.
"""
import argparse
import glob
import json
import os
import sys
import time

import torch
from safetensors.torch import load_file
from transformers import Gemma4ForCausalLM, Gemma4TextConfig


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    text = dict(cfg.get("text_config", cfg))
    for key in ("quantization", "quantization_config"):
        if key in cfg or key in text:
            sys.exit(f"transformers_generate: {model_dir} is quantized; give a bf16 checkpoint")
    text.pop("model_type", None)
    config = Gemma4TextConfig(**text)
    with torch.device("cuda"):
        model = Gemma4ForCausalLM(config).to(torch.bfloat16)
    state = {}
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        for name, t in load_file(path, device="cuda").items():
            if name.startswith("model.language_model."):
                name = "model." + name[len("model.language_model."):]
            state[name] = t
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]  # tied to the embeddings
    return model.eval(), config, len(missing), len(unexpected)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    model, config, missing, unexpected = load(a.model_dir)
    g = torch.Generator(device="cuda").manual_seed(7)
    ids = torch.randint(10, config.vocab_size - 10, (1, a.prompt), device="cuda", generator=g)
    kw = dict(do_sample=False, max_new_tokens=a.gen, min_new_tokens=a.gen, pad_token_id=0)
    with torch.inference_mode():
        model.generate(ids[:, :32], **dict(kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
        best_prefill, best_decode = 0.0, 0.0
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(ids, use_cache=True)
            torch.cuda.synchronize()
            prefill_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
            total_s = time.perf_counter() - t0
            assert out.shape[1] == a.prompt + a.gen, out.shape
            best_prefill = max(best_prefill, a.prompt / prefill_s)
            best_decode = max(best_decode, a.gen / max(total_s - prefill_s, 1e-9))
    print(json.dumps({"engine": "transformers " + __import__("transformers").__version__, "dtype": "bf16",
                      "model": os.path.basename(os.path.normpath(a.model_dir)), "prompt_tokens": a.prompt,
                      "gen_tokens": a.gen, "prefill_tok_s": round(best_prefill, 1),
                      "decode_tok_s": round(best_decode, 2), "missing_weights": missing,
                      "unexpected_weights": unexpected}))


if __name__ == "__main__":
    main()
