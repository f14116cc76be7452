"""A Gemma-style tokenizer.json for the demo model, trained with `tokenizers`.

Gemma's tokenizer (the tokenizer.json of the Gemma 4 repositories) is a
byte-fallback BPE whose normalizer turns " " into "▁", with no real
pre-tokenization, a decoder that undoes both, and special tokens at fixed
names. g4's tokenizer implements exactly the step types that file uses, so the
demo tokenizer is written with the same structure:

  ids 0..16     the special tokens of SPECIALS (pad 0, eos 1, bos 2 as in Gemma)
  ids 17..272   the byte-fallback pieces <0x00>..<0xFF>
  the rest      pieces and merges learned from the training text

Training splits words at "▁" (the piece boundary SentencePiece-style vocabularies
have) and isolates runs of newlines, so no merge crosses a word start or a
newline. The shipped file keeps Gemma's no-op pre-tokenizer; since no merge can
cross those boundaries, both give the same ids (train.py checks this) and the
splitting variant (with_word_splitting) is only faster on long texts.
"""
import json

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
            "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>",
            "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
            '<|"|>']
# As in Gemma's tokenizer.json, <mask> is an added token but not a special one.
NOT_SPECIAL = {"<mask>"}
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]

NORMALIZER = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
PRE_TOKENIZER = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False}
DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"}]}
WORD_SPLITTING = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\n+"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithNext", "invert": False}]}


def gemma_style(trained):
    """Turns the JSON of a trained tokenizers BPE model into the Gemma layout:
    specials first, then the 256 byte pieces, then the learned vocabulary in
    its original order; merges unchanged."""
    model = trained["model"]
    vocab = {}
    for piece in SPECIALS + BYTE_PIECES:
        vocab[piece] = len(vocab)
    for piece, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [m if isinstance(m, list) else m.split(" ", 1) for m in model["merges"]]
    for a, b in merges:  # every merge must produce a piece of the vocabulary
        if a + b not in vocab:
            raise ValueError(f"merge {a!r} + {b!r} has no vocabulary entry")
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": s not in NOT_SPECIAL} for s in SPECIALS]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": NORMALIZER,
        "pre_tokenizer": PRE_TOKENIZER,
        "post_processor": None,
        "decoder": DECODER,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def with_word_splitting(json_text):
    """The same tokenizer with training's word splitting (same ids, faster)."""
    d = json.loads(json_text)
    d["pre_tokenizer"] = WORD_SPLITTING
    return json.dumps(d, ensure_ascii=False)


def train_gemma_style(texts, vocab_size, limit_alphabet=160):
    """Trains on `texts` and returns the tokenizer.json text (vocab_size ids in all)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n+"), behavior="isolated"),
        pre_tokenizers.Split("\u2581", behavior="merged_with_next")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(BYTE_PIECES), special_tokens=SPECIALS,
                                  limit_alphabet=limit_alphabet, min_frequency=2, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    out = gemma_style(json.loads(tok.to_str()))
    return json.dumps(out, ensure_ascii=False)
