#!/usr/bin/env python3
"""Trains g4's demo model: a ~20M-parameter Gemma 4 text model and its tokenizer.

One run does everything, on one GPU, in about four minutes:
  1. trains a byte-fallback BPE tokenizer (tokenizers) on the training text and
     writes it as a Gemma-style tokenizer.json (tokenizer_json.py);
  2. tokenizes the corpus (plain documents and chat-formatted conversations);
  3. trains Gemma4ForCausalLM (transformers) from scratch with AdamW and a cosine
     schedule for a fixed wall-clock budget, the last part at a longer context;
  4. saves the bf16 checkpoint (save_pretrained), then reloads it in float32 and
     measures held-out perplexity (llama.cpp's method, as `g4 perplexity` does)
     and writes reference logits and tokenizer ids for g4's tests.
Everything lands in WORK/export (and OUT/train_log.txt); with --pack it is also
packed into OUT/*.tar.part-* pieces small enough to copy back from the GPU machine.

Usage: train.py --data training/data --out OUT [--train-seconds 160] [--smoke]
The shipped model: train.py --out $OUT --work /tmp/w2 --pack --train-seconds 160 --deadline 200
(docs/demo-model.md: longer runs overfit the ~10M-token corpus).
Needs: torch, transformers >= 5.17 (Gemma 4), tokenizers, safetensors, numpy.
"""
import argparse
import copy
import json
import lzma
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tokenizer_json  # noqa: E402

T0 = time.time()
LOG = None


def log(*args):
    msg = f"[{time.time() - T0:7.1f}s] " + " ".join(str(a) for a in args)
    print(msg, flush=True)
    if LOG:
        LOG.write(msg + "\n")
        LOG.flush()


# The model: E2B's shape at a small scale. 10 layers, 4 sliding + 1 full,
# the last 4 layers KV-shared (donors: layer 5 sliding, layer 4 full), PLE,
# double-wide MLP on the shared layers, proportional RoPE on full layers.
MODEL = dict(
    hidden_size=384, intermediate_size=768, num_hidden_layers=10,
    num_attention_heads=6, num_key_value_heads=2, head_dim=64, global_head_dim=128,
    layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 2,
    sliding_window=256, hidden_size_per_layer_input=64, num_kv_shared_layers=4,
    use_double_wide_mlp=True, final_logit_softcapping=30.0, rms_norm_eps=1e-6,
    hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
    max_position_embeddings=32768, attention_k_eq_v=False,
)


# ---------------------------------------------------------------- data
def load_records(path, fraction=1.0):
    recs = [json.loads(l) for l in lzma.open(path, "rt", encoding="utf-8")]
    if fraction < 1.0:
        recs = recs[: max(50, int(len(recs) * fraction))]
    return recs


def chat_text(turns):
    """Gemma 4's chat markup for a conversation, without the leading <bos>."""
    out = []
    for user, model in turns:
        out.append(f"<|turn>user\n{user.strip()}<turn|>\n<|turn>model\n{model.strip()}<turn|>\n")
    return "".join(out)


def tokenize_records(tok, recs, bos, eos, np):
    texts = [r["text"] if "text" in r else chat_text(r["chat"]) for r in recs]
    ids = []
    for i in range(0, len(texts), 4096):
        for enc in tok.encode_batch(texts[i:i + 4096], add_special_tokens=False):
            ids.append(bos)
            ids.extend(enc.ids)
            ids.append(eos)
    return np.asarray(ids, dtype=np.int32)


# ---------------------------------------------------------- perplexity
def perplexity(model, tokens, ctx, bos, torch, batch=8):
    """llama.cpp's perplexity: windows of ctx tokens, the first replaced by BOS,
    NLL of the second half of each window. Returns (ppl, ±, mean nll, count)."""
    n_chunk = len(tokens) // ctx
    first = ctx // 2
    nll = nll2 = 0.0
    count = 0
    dev = next(model.parameters()).device
    for c0 in range(0, n_chunk, batch):
        rows = []
        for c in range(c0, min(n_chunk, c0 + batch)):
            w = torch.tensor(tokens[c * ctx:(c + 1) * ctx], dtype=torch.long)
            w[0] = bos
            rows.append(w)
        x = torch.stack(rows).to(dev)
        with torch.no_grad():
            logits = model(input_ids=x, use_cache=False).logits.float()
        lp = torch.log_softmax(logits[:, first:ctx - 1], dim=-1)
        tgt = x[:, first + 1:ctx]
        v = -lp.gather(-1, tgt[..., None])[..., 0].double()
        nll += float(v.sum())
        nll2 += float((v * v).sum())
        count += v.numel()
    if count == 0:
        return None
    mean = nll / count
    var = nll2 / count - mean * mean
    err = math.sqrt(var / (count - 1)) if var > 0 and count > 1 else 0.0
    return math.exp(mean), math.exp(mean) * err, mean, count


# ------------------------------------------------------------- training
def build_model(vocab_size, ids, torch):
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    cfg = Gemma4TextConfig(vocab_size=vocab_size, vocab_size_per_layer_input=vocab_size,
                           pad_token_id=ids["<pad>"], eos_token_id=ids["<eos>"], bos_token_id=ids["<bos>"],
                           **MODEL)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(1234)
    model = Gemma4ForCausalLM(cfg)
    return model, cfg


def lr_at(progress, peak, warmup=0.03, floor=0.1):
    if progress < warmup:
        return peak * progress / warmup
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def train(model, stream, val_stream, bos, args, torch, out_dir, save_fn):
    dev = torch.device("cuda")
    model.to(dev).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    data = torch.from_numpy(stream).to(dev).long()
    val = torch.from_numpy(val_stream).to(dev).long()
    g = torch.Generator(device=dev).manual_seed(7)

    def batch_of(src, b, t, gen=None, offsets=None):
        if offsets is None:
            offsets = torch.randint(0, len(src) - t - 1, (b,), device=dev, generator=gen)
        idx = offsets[:, None] + torch.arange(t + 1, device=dev)[None]
        w = src[idx]
        x, y = w[:, :-1].clone(), w[:, 1:]
        x[:, 0] = bos  # every window starts with <bos>, as at evaluation
        return x, y

    def loss_of(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))

    vg = torch.Generator(device=dev).manual_seed(11)
    val_off = torch.randint(0, len(val) - 1025, (32,), device=dev, generator=vg)

    def val_loss():
        model.eval()
        with torch.no_grad():
            tot = 0.0
            for i in range(0, 32, 8):
                x, y = batch_of(val, 8, 1024, offsets=val_off[i:i + 8])
                tot += float(loss_of(x, y))
        model.train()
        return tot / 4

    start = time.time()
    budget = args.train_seconds
    if args.deadline:  # seconds since the script started, for the whole training
        budget = max(5.0, min(budget, args.deadline - (start - T0)))
    log(f"training for {budget:.0f}s")
    step, tokens, hist, curve = 0, 0, [], []
    last_log, last_val, saved_mid = start, start, False
    while True:
        el = time.time() - start
        if el >= budget:
            break
        progress = el / budget
        long_phase = progress >= 1 - args.long_fraction
        t, b = (args.long_seq, args.batch * args.seq // args.long_seq) if long_phase else (args.seq, args.batch)
        lr = lr_at(progress, args.lr)
        for grp in opt.param_groups:
            grp["lr"] = lr
        x, y = batch_of(data, b, t, g)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += b * t
        if step % 10 == 0 or step <= 3:
            hist.append(float(loss.detach()))
        now = time.time()
        if now - last_log >= 10 or step == 1:
            l = sum(hist) / max(1, len(hist))
            curve.append({"step": step, "seconds": round(now - start, 1), "tokens": tokens, "loss": round(l, 4),
                          "lr": lr, "seq": t})
            log(f"step {step} tokens {tokens / 1e6:.1f}M loss {l:.4f} lr {lr:.2e} gnorm {float(gn):.2f} "
                f"seq {t} {tokens / (now - start) / 1e3:.0f}k tok/s")
            hist, last_log = [], now
        if now - last_val >= 45:
            vl = val_loss()
            curve.append({"step": step, "seconds": round(now - start, 1), "tokens": tokens, "val_loss": round(vl, 4)})
            log(f"  held-out loss {vl:.4f} (ppl {math.exp(vl):.2f})")
            last_val = now
        if not saved_mid and progress >= 0.6 and save_fn:
            save_fn(model, "mid")
            saved_mid = True
    vl = val_loss()
    curve.append({"step": step, "seconds": round(time.time() - start, 1), "tokens": tokens, "val_loss": round(vl, 4)})
    log(f"done: {step} steps, {tokens / 1e6:.1f}M tokens, final held-out loss {vl:.4f}")
    return curve, step, tokens


# --------------------------------------------------------------- export
def save_checkpoint(model, cfg, tok_json, ids, out, torch):
    out.mkdir(parents=True, exist_ok=True)
    m = copy.deepcopy(model).to(torch.bfloat16).cpu()
    m.save_pretrained(out)
    del m
    conf = json.loads((out / "config.json").read_text())
    conf["eos_token_id"] = [ids["<eos>"], ids["<turn|>"]]
    (out / "config.json").write_text(json.dumps(conf, indent=2) + "\n")
    gen = {"bos_token_id": ids["<bos>"], "pad_token_id": ids["<pad>"],
           "eos_token_id": [ids["<eos>"], ids["<turn|>"]],
           "do_sample": True, "temperature": 0.7, "top_k": 40, "top_p": 0.9}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    (out / "tokenizer.json").write_text(tok_json)
    tcfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
            "pad_token": "<pad>", "unk_token": "<unk>", "model_max_length": 32768}
    (out / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2) + "\n")


def pack(src_dir, out_dir, name):
    """tar of src_dir split into 15 MB pieces OUT/name.tar.part-aa, -ab, ..."""
    for old in out_dir.glob(f"{name}.tar.part-*"):
        old.unlink()
    tmp = Path(f"/tmp/g4-demo-{name}.tar")
    subprocess.run(["tar", "-cf", str(tmp), "-C", str(src_dir.parent), src_dir.name], check=True)
    subprocess.run(["split", "-b", "15M", str(tmp), str(out_dir / f"{name}.tar.part-")], check=True)
    tmp.unlink()


def golden(model, tok, ids, held_texts, torch, np, path):
    """Float32 reference logits for g4's tests: 16 positions per case."""
    from safetensors.numpy import save_file
    dev = next(model.parameters()).device
    bos = ids["<bos>"]
    out = {}
    cases = {}
    prose = tok.encode(held_texts[0], add_special_tokens=False).ids[:79]
    cases["prose"] = [bos] + prose
    longt = tok.encode("\n\n".join(held_texts[1:]), add_special_tokens=False).ids[:599]
    cases["long"] = [bos] + longt
    chat = "<|turn>user\nWhat is Debian?<turn|>\n<|turn>model\n"
    cases["chat"] = [bos] + tok.encode(chat, add_special_tokens=False).ids
    for name, seq in cases.items():
        x = torch.tensor([seq], device=dev)
        with torch.no_grad():
            logits = model(input_ids=x, use_cache=False).logits[0].float()
        pos = list(range(max(0, len(seq) - 16), len(seq)))
        out[f"{name}.ids"] = np.asarray(seq, dtype=np.int32)
        out[f"{name}.positions"] = np.asarray(pos, dtype=np.int32)
        out[f"{name}.logits"] = logits[pos].cpu().numpy().astype(np.float32)
    # greedy continuation of the chat prompt, full recompute each step
    seq = list(cases["chat"])
    greedy = []
    for _ in range(24):
        with torch.no_grad():
            nxt = int(model(input_ids=torch.tensor([seq], device=dev), use_cache=False).logits[0, -1].argmax())
        greedy.append(nxt)
        seq.append(nxt)
    out["chat.greedy_ids"] = np.asarray(greedy, dtype=np.int32)
    save_file(out, str(path))
    return tok.decode(greedy, skip_special_tokens=False)


def tokenizer_golden(tok, held_texts, path):
    texts = [held_texts[0][:400], held_texts[1][:300],
             "<bos><|turn>user\nHello, who are you?<turn|>\n<|turn>model\nI am a small model.<turn|>\n",
             "  leading spaces, trailing   \n\n\ttabs and\r\nCRLF  ",
             "Unicode: café, naïve, Ελληνικά, 日本語, emoji 🎉 and a rare ☃ snowman.",
             "<|think|>ok<|channel>thought\nhmm<channel|>answer <|tool_call>call:f{x:<|\"|>y<|\"|>}<tool_call|>",
             "def f(x):\n    return x ** 2  # squares\n",
             "Numbers 1234567890 and URLs https://www.debian.org/doc/ in text."]
    cases = []
    for t in texts:
        e = tok.encode(t, add_special_tokens=False)
        cases.append({"text": t, "ids": e.ids, "decoded": tok.decode(e.ids, skip_special_tokens=False)})
    import tokenizers
    path.write_text(json.dumps({"reference": f"tokenizers {tokenizers.__version__} (Rust), "
                                "encode(add_special_tokens=False), decode(skip_special_tokens=False)",
                                "cases": cases}, ensure_ascii=False, indent=1) + "\n")


def sample_chats(model, tok, ids, torch, prompts):
    dev = next(model.parameters()).device
    outs = []
    g = torch.Generator(device=dev).manual_seed(3)
    for p in prompts:
        seq = [ids["<bos>"]] + tok.encode(f"<|turn>user\n{p}<turn|>\n<|turn>model\n", add_special_tokens=False).ids
        gen = []
        for _ in range(80):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([seq], device=dev), use_cache=False).logits[0, -1].float()
            probs = torch.softmax(logits / 0.7, -1)
            nxt = int(torch.multinomial(probs, 1, generator=g))
            if nxt in (ids["<eos>"], ids["<turn|>"]):
                break
            gen.append(nxt)
            seq.append(nxt)
        outs.append({"prompt": p, "reply": tok.decode(gen, skip_special_tokens=False)})
    return outs


# ------------------------------------------------------------------ main
def main():
    global LOG
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data")
    ap.add_argument("--out", type=Path, required=True, help="the log and, with --pack, the packed pieces")
    ap.add_argument("--work", type=Path, default=None, help="where the export folder goes (default OUT)")
    ap.add_argument("--train-seconds", type=float, default=160)
    ap.add_argument("--deadline", type=float, default=None,
                    help="end training this many seconds after the script started, at the latest")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--long-seq", type=int, default=2048)
    ap.add_argument("--long-fraction", type=float, default=0.15)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--fraction", type=float, default=1.0, help="use this share of the training records")
    ap.add_argument("--smoke", action="store_true", help="tiny run of every phase (seconds)")
    ap.add_argument("--pack", action="store_true", help="also write OUT/*.tar.part-* pieces")
    args = ap.parse_args()
    if args.smoke:
        args.fraction, args.train_seconds, args.batch = min(args.fraction, 0.03), min(args.train_seconds, 12), 8
    args.out.mkdir(parents=True, exist_ok=True)
    LOG = open(args.out / "train_log.txt", "a")
    log("args", vars(args))

    import numpy as np
    import torch
    import tokenizers
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"gpu {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    # 1. tokenizer
    recs = load_records(args.data / "train.jsonl.xz", args.fraction)
    held = load_records(args.data / "heldout.jsonl.xz")
    plain = [r["text"] for r in recs if "text" in r]
    log(f"{len(recs)} training records ({len(plain)} plain), {len(held)} held-out")
    tok_json_text = tokenizer_json.train_gemma_style(plain, args.vocab)
    tok = tokenizers.Tokenizer.from_str(tok_json_text)
    fast = tokenizers.Tokenizer.from_str(tokenizer_json.with_word_splitting(tok_json_text))
    ids = {s: tok.token_to_id(s) for s in tokenizer_json.SPECIALS}
    log(f"tokenizer: {tok.get_vocab_size()} ids; specials {ids}")
    # The word-splitting variant is only faster; it must give the same ids.
    rng = random.Random(5)
    probe = rng.sample(plain, min(200, len(plain))) + [chat_text(r["chat"]) for r in recs[:200] if "chat" in r]
    probe = [t[:20000] for t in probe]
    bad = sum(tok.encode(t).ids != fast.encode(t).ids for t in probe)
    log(f"tokenizer self-check: {bad} of {len(probe)} texts differ between the two variants")
    tok_use = fast if bad == 0 else tok

    # 2. data
    stream = tokenize_records(tok_use, recs, ids["<bos>"], ids["<eos>"], np)
    val_stream = tokenize_records(tok_use, held, ids["<bos>"], ids["<eos>"], np)
    chars = sum(len(r.get("text", "")) for r in recs)
    log(f"training stream {len(stream) / 1e6:.2f}M tokens, held-out {len(val_stream) / 1e6:.2f}M tokens; "
        f"{chars / 1e6:.1f}M characters of plain text")

    # 3. model + training
    model, cfg = build_model(tok.get_vocab_size(), ids, torch)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters")
    export = (args.work or args.out) / "export"
    bf16_dir = export / "demo-bf16"

    def save_mid(m, tag):
        t = time.time()
        save_checkpoint(m, cfg, tok_json_text, ids, bf16_dir, torch)
        if args.pack:
            pack(export, args.out, tag)
        log(f"saved {tag} checkpoint in {time.time() - t:.1f}s")

    curve, steps, tokens = train(model, stream, val_stream, ids["<bos>"], args, torch, args.out, save_mid)
    save_checkpoint(model, cfg, tok_json_text, ids, bf16_dir, torch)
    log("saved final bf16 checkpoint")
    metrics = {"parameters": n_params, "steps": steps, "tokens": tokens, "train_seconds": curve[-1]["seconds"],
               "stream_tokens": int(len(stream)), "epochs": tokens / max(1, len(stream)), "curve": curve,
               "vocab": tok.get_vocab_size(), "specials": ids, "config": MODEL,
               "batch": args.batch, "seq": args.seq, "long_seq": args.long_seq, "lr": args.lr}
    (export / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")

    # 4. evaluation of the saved checkpoint, float32, eager attention
    try:
        from transformers import Gemma4ForCausalLM
        del model
        torch.cuda.empty_cache()
        ref = Gemma4ForCausalLM.from_pretrained(str(bf16_dir), dtype=torch.float32,
                                                attn_implementation="eager").cuda().eval()
        eval_dir = args.data / "eval"
        ppl = {}
        files = sorted(eval_dir.glob("*.txt"))
        for f in files:
            text = f.read_text(encoding="utf-8")
            if args.smoke:
                text = text[:20000]
            toks = [ids["<bos>"]] + tok_use.encode(text, add_special_tokens=False).ids
            ctxs = [512, 1024] if f.name == "heldout.txt" else [4096]
            if args.smoke:
                ctxs = [512]
            for ctx in ctxs:
                r = perplexity(ref, toks, ctx, ids["<bos>"], torch, batch=4 if ctx > 1024 else 16)
                if r:
                    ppl[f"{f.name}@{ctx}"] = {"ppl": r[0], "pm": r[1], "nll": r[2], "count": r[3],
                                              "tokens": len(toks)}
                    log(f"perplexity {f.name} ctx {ctx}: {r[0]:.4f} +/- {r[1]:.4f} ({r[3]} scored, {len(toks)} tokens)")
        metrics["perplexity_fp32"] = ppl
        held_texts = [r["text"] for r in held if len(r["text"]) > 2000][:6]
        greedy = golden(ref, tok, ids, held_texts, torch, np, export / "golden.safetensors")
        log("golden chat greedy:", repr(greedy))
        tokenizer_golden(tok, held_texts, export / "tokenizer_golden.json")
        samples = sample_chats(ref, tok, ids, torch,
                               ["Hello!", "What is Debian?", "Tell me about Python.", "What does \"hacker\" mean?",
                                "Who are you?"])
        for s in samples:
            log("sample:", json.dumps(s, ensure_ascii=False))
        metrics["samples"] = samples
        metrics["golden_chat_greedy"] = greedy
    except Exception as e:  # keep the trained model even if evaluation breaks
        import traceback
        log("EVALUATION FAILED:", repr(e))
        log(traceback.format_exc())
        metrics["evaluation_error"] = repr(e)
        if args.smoke:
            raise
    (export / "metrics.json").write_text(json.dumps(metrics, indent=1, ensure_ascii=False) + "\n")
    shutil.copy(args.out / "train_log.txt", export / "train_log.txt")
    if args.pack:
        pack(export, args.out, "final")
        for old in args.out.glob("mid.tar.part-*"):
            old.unlink()
    log("all done")


if __name__ == "__main__":
    main()
