#!/usr/bin/env python3
"""Tests of the demo-model training pipeline that need no GPU.

Run: python3 -m unittest discover -s training -p 'test_*.py'
The data-preparation and tokenizer-layout tests use only the standard library;
the perplexity test runs where torch is installed and is skipped elsewhere.
"""
import json
import math
import random
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prepare_data as pd  # noqa: E402
import tokenizer_json as tj  # noqa: E402

try:
    import torch
except ImportError:  # the CPU machines have no torch
    torch = None


class RstTest(unittest.TestCase):
    def test_code_literals_and_markup_are_removed(self):
        raw = "\n".join([
            "Control flow",
            "============",
            "",
            "The :keyword:`while` statement loops, and :func:`~os.path.join` joins ``paths`` for you::",
            "",
            "   >>> while True:",
            "   ...     pass",
            "",
            "After the block comes *more* prose with a `link <https://example.org>`_ in it.",
            "",
            ".. code-block:: python",
            "",
            "   print('hidden')",
            "",
            ".. note::",
            "",
            "   Notes are kept because they are written in sentences.",
        ])
        d = pd.rst_doc("test", "x", raw)
        text = d.text()
        self.assertIn("Control flow", text)
        self.assertIn("The while statement loops, and join joins paths for you:", text)
        self.assertIn("After the block comes more prose with a link in it.", text)
        self.assertIn("Notes are kept because they are written in sentences.", text)
        for code in (">>>", "print(", "pass", "::", "``", ":func:"):
            self.assertNotIn(code, text)


class PodTest(unittest.TestCase):
    def test_verbatim_paragraphs_and_format_codes(self):
        raw = ("=head1 NAME\n\nperlfoo - a test\n\n=head2 Running Perl programs\n\n"
               "To run a program, use the C<perl> command or read L<the manual|perlrun> and L<perlfunc/open>.\n\n"
               " perl progname.pl\n\n=over\n\n=item *\n\nB<Bold> statements are E<lt>fine E<gt> here, really.\n\n=back\n")
        text = pd.pod_doc("perl", "x", raw).text()
        self.assertIn("Running Perl programs", text)
        self.assertIn("To run a program, use the perl command or read the manual and open.", text)
        self.assertIn("Bold statements are <fine > here, really.", text)
        self.assertNotIn("progname", text)
        self.assertNotIn("NAME", text)


class HtmlTest(unittest.TestCase):
    def test_paragraphs_headings_and_skipped_code(self):
        page = ("<html><head><title>T</title></head><body><ul class='docnav'><li>Prev</li></ul>"
                "<h2 class='title'>6.2. The apt Commands</h2><div class='para'>APT is a vast project, "
                "whose original plans included a <code>graphical</code> interface.</div>"
                "<pre class='screen'>$ apt update</pre><p>Another paragraph with enough words in it.<br/>"
                "And a line break.</p></body></html>")
        d = pd.Doc("t", "x")
        p = pd._HtmlParser(d)
        p.feed(page)
        p.emit()
        self.assertEqual(d.blocks[0], ("h", "The apt Commands"))
        self.assertIn(("p", "APT is a vast project, whose original plans included a graphical interface."), d.blocks)
        self.assertIn(("p", "Another paragraph with enough words in it. And a line break."), d.blocks)
        self.assertNotIn("apt update", d.text())
        self.assertNotIn("Prev", d.text())


class ChatAndSplitTest(unittest.TestCase):
    def test_conversations_keep_every_pair_once(self):
        rng = random.Random(0)
        pairs = [("topic", f"question {i}?", f"answer {i}.") for i in range(50)]
        convs = pd.make_conversations(list(pairs), 5, rng)
        seen = [t for c in convs for t in c if t[0].startswith("question")]
        self.assertEqual(sorted(q for q, _ in seen), sorted(q for _, q, _ in pairs))
        self.assertTrue(all(1 <= len(c) <= 4 for c in convs))

    def test_heldout_choice_is_stable_and_about_two_percent(self):
        ids = [f"doc{i}" for i in range(20000)]
        held = [i for i in ids if pd.is_heldout("src", i)]
        self.assertEqual(held, [i for i in ids if pd.is_heldout("src", i)])
        self.assertGreater(len(held), 300)
        self.assertLess(len(held), 500)

    def test_prose_filter(self):
        self.assertTrue(pd.is_prose("This is an ordinary English sentence with words."))
        self.assertFalse(pd.is_prose("x = {'a': [1, 2, 3]}; y = f(x) + g(x) * 2 // 3"))
        self.assertFalse(pd.is_prose("Home | Table of contents | Index | Modules"))


class TokenizerLayoutTest(unittest.TestCase):
    def trained(self):
        # What tokenizers' BpeTrainer writes: specials first, then the alphabet and merges.
        vocab = {s: i for i, s in enumerate(tj.SPECIALS)}
        for piece in ["a", "b", "\u2581", "\n", "ab", "\u2581ab"]:
            vocab[piece] = len(vocab)
        return {"model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"], ["\u2581", "ab"]]}}

    def test_ids_follow_gemma(self):
        out = tj.gemma_style(self.trained())
        v = out["model"]["vocab"]
        self.assertEqual((v["<pad>"], v["<eos>"], v["<bos>"]), (0, 1, 2))
        self.assertEqual(v["<0x00>"], len(tj.SPECIALS))
        self.assertEqual(v["<0xFF>"], len(tj.SPECIALS) + 255)
        self.assertEqual(v["a"], len(tj.SPECIALS) + 256)
        self.assertEqual(sorted(v.values()), list(range(len(v))))
        self.assertEqual(out["model"]["merges"], [["a", "b"], ["\u2581", "ab"]])
        self.assertTrue(out["model"]["byte_fallback"])
        specials = {t["content"]: t for t in out["added_tokens"]}
        self.assertEqual(specials["<|turn>"]["id"], v["<|turn>"])
        self.assertTrue(specials["<turn|>"]["special"])
        self.assertFalse(specials["<mask>"]["special"])

    def test_same_structure_as_gemmas_file(self):
        out = tj.gemma_style(self.trained())
        self.assertEqual(out["normalizer"], {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})
        self.assertEqual(out["pre_tokenizer"]["type"], "Split")
        self.assertEqual([d["type"] for d in out["decoder"]["decoders"]], ["Replace", "ByteFallback", "Fuse"])
        json.dumps(out)  # serializable as is

    def test_merge_without_result_is_rejected(self):
        t = self.trained()
        t["model"]["merges"].append(["b", "a"])
        with self.assertRaises(ValueError):
            tj.gemma_style(t)

    def test_word_splitting_variant_only_changes_pre_tokenizer(self):
        text = json.dumps(tj.gemma_style(self.trained()))
        fast = json.loads(tj.with_word_splitting(text))
        orig = json.loads(text)
        self.assertEqual(fast["model"], orig["model"])
        self.assertNotEqual(fast["pre_tokenizer"], orig["pre_tokenizer"])


@unittest.skipIf(torch is None, "needs torch")
class PerplexityTest(unittest.TestCase):
    def test_matches_direct_computation(self):
        import train

        class Fixed(torch.nn.Module):
            """Logits depend only on the previous token: a bigram table."""
            def __init__(self, v):
                super().__init__()
                self.table = torch.nn.Parameter(torch.randn(v, v))

            def forward(self, input_ids, use_cache=False):
                return type("O", (), {"logits": self.table[input_ids]})()

        torch.manual_seed(0)
        v, ctx = 11, 8
        m = Fixed(v)
        toks = [2] + [int(t) for t in torch.randint(3, v, (40,))]
        ppl, pm, nll, count = train.perplexity(m, toks, ctx, 2, torch, batch=2)
        # direct: chunk c covers toks[c*ctx:(c+1)*ctx], first token -> BOS, score positions 4..6
        tot, n = 0.0, 0
        for c in range(len(toks) // ctx):
            w = list(toks[c * ctx:(c + 1) * ctx])
            w[0] = 2
            for p in range(ctx // 2, ctx - 1):
                lp = torch.log_softmax(m.table[w[p]], -1)
                tot -= float(lp[w[p + 1]])
                n += 1
        self.assertEqual(count, n)
        self.assertAlmostEqual(nll, tot / n, places=5)
        self.assertAlmostEqual(ppl, math.exp(tot / n), places=4)
        self.assertGreater(pm, 0)


if __name__ == "__main__":
    unittest.main()
