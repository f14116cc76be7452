#!/usr/bin/env python3
"""Builds the demo model's training and held-out text from Debian packages.

Input: ROOT as made by training/fetch_sources.sh (packages unpacked with
dpkg -x, plus ROOT/kjv.txt). Output in OUT_DIR:

  train.jsonl.xz     one record per line: {"src", "text"} for plain documents,
                     {"src", "chat": [[user, model], ...]} for conversations
  heldout.jsonl.xz   held-out documents (same format, plain only)
  eval/heldout.txt   ~250 KB of held-out prose for `g4 perplexity`
  eval/long-*.txt    held-out texts of at least ~5k tokens, one per source,
                     for the KV-cache quality table
  stats.json         characters per source and split

Only the Python standard library is used, so this runs anywhere; the result is
deterministic for a given set of packages. Held-out documents are chosen by a
hash of their id, so adding a source does not reshuffle the others.
"""
import argparse
import gzip
import hashlib
import html.parser
import json
import lzma
import random
import re
import sys
from pathlib import Path

HELDOUT_PER_MILLE = 20

# ------------------------------------------------------------------ paragraphs
_WS = re.compile(r"\s+")


def squash(text):
    return _WS.sub(" ", text).strip()


def prose_ratio(text):
    """Share of letters, spaces and ordinary punctuation: low for code and tables."""
    if not text:
        return 0.0
    good = sum(1 for c in text if c.isalpha() or c in " ,.;:'\"?!()-")
    return good / len(text)


def is_prose(text, min_words=5):
    return (len(text) >= 30 and len(text.split()) >= min_words and prose_ratio(text) >= 0.9
            and text.count(" | ") < 2)


def is_heading(text):
    if re.search(r"\bdocumentation$", text):
        return False  # Sphinx page banners ("Django 3.2.25 documentation")
    return 0 < len(text) <= 80 and len(text.split()) <= 12 and prose_ratio(text) >= 0.85


class Doc:
    """A document: a title and blocks ("h", heading) / ("p", paragraph)."""

    def __init__(self, src, doc_id, title=""):
        self.src, self.id, self.title = src, doc_id, title
        self.blocks = []

    def heading(self, text):
        text = squash(text)
        if is_heading(text):
            self.blocks.append(("h", text))

    def para(self, text, min_words=5):
        text = squash(text)
        if is_prose(text, min_words):
            self.blocks.append(("p", text))

    def text(self):
        # Drop headings that are not followed by a paragraph (empty sections).
        out = []
        for i, (kind, t) in enumerate(self.blocks):
            if kind == "h" and (i + 1 >= len(self.blocks) or self.blocks[i + 1][0] == "h"):
                continue
            out.append(t)
        return "\n\n".join(out)

    def sections(self):
        """(heading, [paragraphs]) pairs, for question/answer pairs."""
        cur, out = None, []
        for kind, t in self.blocks:
            if kind == "h":
                cur = (t, [])
                out.append(cur)
            elif cur is not None:
                cur[1].append(t)
        return [(h, ps) for h, ps in out if ps]


# ------------------------------------------------------------------- sources
def kjv_docs(root):
    """One document per chapter, one verse per line, references dropped."""
    docs, cur, key = [], [], None
    for line in (root / "kjv.txt").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(\w+?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        chapter = m.group(1) + m.group(2)
        if chapter != key and cur:
            docs.append((key, cur))
            cur = []
        key = chapter
        cur.append(squash(m.group(4)))
    if cur:
        docs.append((key, cur))
    out = []
    for key, verses in docs:
        d = Doc("kjv", key)
        d.blocks = [("p", "\n".join(verses))]
        d.verses = verses
        out.append(d)
    return out


_ROLE = re.compile(r":[\w:.+-]+:`([^`]*)`")
_REF = re.compile(r"`([^`<]*?)\s*<[^>]*>`_{1,2}")
_LINK = re.compile(r"`([^`]+)`_{1,2}")
_LIT = re.compile(r"``([^`]+)``")
_EMPH = re.compile(r"(\*\*|\*)(\S(?:.*?\S)?)\1")
_ADORN = re.compile(r"^([=\-~^*#\"'+`:._])\1{2,}\s*$")
_KEEP_DIRECTIVES = {"note", "warning", "seealso", "tip", "important", "versionadded",
                    "versionchanged", "deprecated", "function", "method", "class",
                    "attribute", "data", "exception", "decorator", "module",
                    "describe", "impl-detail", "admonition", "topic", "glossary",
                    "classmethod", "staticmethod", "opcode", "cmdoption", "envvar"}


def rst_inline(text):
    def role(m):
        t = m.group(1)
        inner = re.match(r"^(.*?)\s*<[^>]*>$", t)
        if inner:
            t = inner.group(1)
        t = t.lstrip("!")
        if t.startswith("~"):
            t = t[1:].split(".")[-1]
        return t
    text = _ROLE.sub(role, text)
    text = _REF.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _LIT.sub(r"\1", text)
    text = _EMPH.sub(r"\2", text)
    text = re.sub(r"\|(\w[\w -]*)\|", r"\1", text)
    text = re.sub(r"\\(.)", r"\1", text)
    return text


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def rst_doc(src, doc_id, raw):
    """reStructuredText -> Doc: code, literal blocks, tables and markup removed."""
    lines = raw.expandtabs(8).splitlines()
    d = Doc(src, doc_id)
    i, n = 0, len(lines)
    para, para_indent = [], 0

    def flush():
        nonlocal para
        if para:
            text = rst_inline(" ".join(l.strip() for l in para))
            if text.endswith("::"):
                text = text[:-2].rstrip()
                text = text + ":" if text and text[-1].isalnum() else text
            d.para(text)
        para = []

    def skip_block(base):
        """Skips the block indented deeper than `base` after line i."""
        nonlocal i
        i += 1
        while i < n and (not lines[i].strip() or indent_of(lines[i]) > base):
            i += 1

    while i < n:
        line = lines[i]
        s = line.strip()
        if not s:
            ends_literal = para and para[-1].rstrip().endswith("::")
            base = para_indent
            flush()
            if ends_literal:
                skip_block(base)
                continue
            i += 1
            continue
        if _ADORN.match(s):
            # An underline (or overline): the paragraph above is a section title.
            if para and len(para) == 1:
                d.heading(rst_inline(para[0]))
                para = []
            i += 1
            continue
        if s.startswith(".. "):
            flush()
            m = re.match(r"^\.\. ([\w:-]+)::", s)
            name = m.group(1).split(":")[-1] if m else ""
            base = indent_of(line)
            if name in _KEEP_DIRECTIVES:
                i += 1  # keep its body as ordinary text; skip :options:
                while i < n and lines[i].strip().startswith(":") and indent_of(lines[i]) > base:
                    i += 1
                continue
            skip_block(base)
            continue
        if s.startswith((">>>", "...", "+-", "|")) or re.match(r"^=+( +=+)+$", s):
            flush()
            i += 1
            continue
        if re.match(r"^([*\-+]|#\.|\d+\.|\(\d+\)) ", s):
            flush()  # a list item starts a paragraph of its own
            s = re.sub(r"^([*\-+]|#\.|\d+\.|\(\d+\)) ", "", s)
        if not para:
            para_indent = indent_of(line)
        para.append(s)
        i += 1
    flush()
    return d


def python_docs(root):
    base = root / "usr/share/doc/python3.11/html/_sources"
    out = []
    for path in sorted(base.rglob("*.rst.txt")):
        rel = str(path.relative_to(base))
        if rel.startswith(("whatsnew/changelog", "c-api/")):
            continue  # a changelog of issue numbers; C API signatures
        out.append(rst_doc("python-doc", rel, path.read_text(encoding="utf-8", errors="replace")))
    return out


_POD_CODE = re.compile(r"([A-Z])<([^<>]*)>")
_POD_CODE_WIDE = re.compile(r"([A-Z])<{2,}\s+(.*?)\s+>{2,}")
_POD_ESC = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def pod_inline(text):
    def code(m):
        kind, body = m.group(1), m.group(2)
        if kind == "E":
            return _POD_ESC.get(body, "")
        if kind in ("X", "Z"):
            return ""
        if kind == "L":
            if "|" in body:
                return body.split("|", 1)[0]
            body = body.replace('"', "")
            return body.split("/")[-1] if "/" in body and "://" not in body else body
        return body
    for _ in range(4):
        text = _POD_CODE_WIDE.sub(code, text)
        text, k = _POD_CODE.subn(code, text)
        if not k:
            break
    return text


def pod_doc(src, doc_id, raw):
    d = Doc(src, doc_id)
    skip_region = False
    for block in re.split(r"\n\s*\n", raw):
        if not block.strip():
            continue
        if block.startswith("=begin"):
            skip_region = True
            continue
        if block.startswith("=end"):
            skip_region = False
            continue
        if skip_region or block[0] in " \t":
            continue  # verbatim (code) paragraph
        if block.startswith("="):
            m = re.match(r"^=(head\d|item)\s+(.*)$", block, re.S)
            if m and m.group(1).startswith("head"):
                title = pod_inline(squash(m.group(2)))
                if title not in ("NAME", "SYNOPSIS", "AUTHOR", "AUTHORS", "SEE ALSO", "COPYRIGHT"):
                    d.heading(title.capitalize() if title.isupper() else title)
            elif m:
                d.para(pod_inline(m.group(2)))
            continue
        d.para(pod_inline(block))
    return d


def perl_docs(root):
    base = root / "usr/share/perl/5.36.0/pod"
    out = []
    for path in sorted(base.glob("*.pod")):
        name = path.stem
        if "delta" in name or name in ("perltoc", "perlmodlib", "perlapi", "perlintern", "perluniprops"):
            continue  # release notes and generated lists
        out.append(pod_doc("perl-doc", name, path.read_text(encoding="utf-8", errors="replace")))
    return out


class _HtmlParser(html.parser.HTMLParser):
    """Collects headings and paragraphs of a documentation page (DocBook,
    Sphinx or mdBook HTML); code, tables and navigation are skipped."""

    BLOCK = {"p", "h1", "h2", "h3", "h4", "li", "dd", "dt"}
    SKIP_TAGS = {"pre", "script", "style", "table", "head", "nav", "form", "button", "sup"}
    SKIP_CLASSES = {"toc", "docnav", "navheader", "navfooter", "sphinxsidebar", "related", "nav",
                    "global-nav", "highlight", "footnotes", "menu-bar", "sidebar-scrollbox", "ft",
                    "searchbox", "headerlink", "admonition-title"}

    def __init__(self, doc):
        super().__init__(convert_charrefs=True)
        self.doc, self.buf, self.skip, self.stack = doc, [], 0, []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr", "meta", "link", "input"):
            if tag == "br" and not self.skip:
                self.buf.append(" ")
            return  # void elements have no end tag
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        skip = (tag in self.SKIP_TAGS or bool(classes & self.SKIP_CLASSES)
                or a.get("id") in ("banner", "title", "sidebar"))
        if tag in self.BLOCK or (tag == "div" and "para" in classes):
            self.emit()
        self.stack.append((tag, skip))
        if skip:
            self.skip += 1

    def handle_endtag(self, tag):
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            t, skip = self.stack.pop()
            if skip:
                self.skip -= 1
            if t == tag:
                break
        if tag in self.BLOCK or tag == "div":
            self.emit(heading=tag in ("h1", "h2", "h3", "h4"))

    def handle_data(self, data):
        if not self.skip:
            self.buf.append(data)

    def emit(self, heading=False):
        text = squash("".join(self.buf)).replace("\u00b6", "").strip()
        self.buf = []
        if not text:
            return
        if heading:
            text = re.sub(r"^(Chapter |Appendix )?[A-Z]?[\d.]+\s+", "", text)
            self.doc.heading(text)
        else:
            self.doc.para(text)


def html_docs(src, base, pattern="*.html", exclude=()):
    out = []
    for path in sorted(base.glob(pattern)):
        rel = str(path.relative_to(base))
        if any(re.search(x, rel) for x in exclude):
            continue
        d = Doc(src, rel)
        p = _HtmlParser(d)
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
        p.emit()
        out.append(d)
    return out


def handbook_docs(root):
    return html_docs("debian-handbook", root / "usr/share/doc/debian-handbook/html/en-US")


def postgresql_docs(root):
    return html_docs("postgresql-doc", root / "usr/share/doc/postgresql-doc-15/html",
                     exclude=(r"^release-", r"^sql-", r"^app-", r"^catalog-", r"^errcodes", r"^bookindex",
                              r"^functions-"))


def django_docs(root):
    return html_docs("django-doc", root / "usr/share/doc/python-django-doc/html", "**/*.html",
                     exclude=(r"^releases/", r"^_", r"^genindex", r"^py-modindex", r"^search", r"^ref/"))


def rust_docs(root):
    base = root / "usr/share/doc/rust-doc/html"
    out = []
    for sub, pattern in (("book", "ch*.html"), ("nomicon", "*.html"), ("reference", "*.html")):
        out += html_docs("rust-doc", base / sub, pattern, exclude=(r"^print\.html$", r"^index\.html$"))
    return out


def reference_docs(root):
    """Debian Reference ships a plain-text rendering; one document per section."""
    raw = gzip.decompress((root / "usr/share/debian-reference/debian-reference.en.txt.gz").read_bytes())
    text = raw.decode("utf-8", errors="replace")
    out, d = [], None
    for block in re.split(r"\n\s*\n", text):
        s = block.strip()
        if not s:
            continue
        m = re.match(r"^(\d+(?:\.\d+)*)\.\s+(.+)$", s)
        if m and "\n" not in s:
            if d is None or m.group(1).count(".") <= 1:
                d = Doc("debian-reference", m.group(1))
                out.append(d)
            d.heading(m.group(2))
            continue
        if d is None or block.startswith(("  $", "  #", "   ")) or "│" in block or "─" in block:
            continue
        d.para(re.sub(r"\s*\[\d+\]", "", s))
    return out


def jargon_entries(root):
    """(term, part of speech, [paragraphs]) from the Jargon File."""
    raw = gzip.decompress((root / "usr/share/doc/jargon-text/jargon.txt.gz").read_bytes()).decode("utf-8", "replace")
    entries, cur = [], None
    for block in re.split(r"\n\s*\n", raw):
        s = block.strip()
        m = re.match(r"^:([^:]+):\s*(.*)$", s)
        if m and "\n" not in s:
            cur = (m.group(1).strip(), m.group(2).strip(), [])
            entries.append(cur)
            continue
        if cur is None:
            continue
        text = squash(re.sub(r"[{}]", "", s))
        text = re.sub(r"^\d+\.\s+", "", text)
        if is_prose(text, 3) or (text.startswith("[") and len(text) > 10):
            cur[2].append(text)
    return [e for e in entries if e[2]]


def jargon_docs(entries):
    out = []
    for term, pos, paras in entries:
        d = Doc("jargon", term)
        head = f"{term}" + (f" ({pos.rstrip('.')})" if pos else "")
        d.blocks = [("h", head)] + [("p", p) for p in paras]
        out.append(d)
    return out


_FORTUNE_SKIP = {"art", "ascii-art", "drugs", "ethnic", "men-women", "love", "knghtbrd",
                 "linuxcookie", "perl", "startrek", "zippy", "pets"}


def fortunes(root):
    base = root / "usr/share/games/fortunes"
    out = []
    for path in sorted(base.iterdir()):
        if path.suffix or path.name in _FORTUNE_SKIP or not path.is_file():
            continue
        for i, f in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n%\n")):
            lines = [l.rstrip() for l in f.strip("%\n").splitlines()]
            body = [l.strip() for l in lines if not l.strip().startswith("--")]
            attrib = [l.strip() for l in lines if l.strip().startswith("--")]
            text = squash(" ".join(body))
            if not is_prose(text, 4) or len(text) > 600:
                continue
            if attrib:
                text += "\n" + squash(" ".join(attrib)).replace("-- ", "— ", 1).replace("--", "—")
            out.append((f"{path.name}:{i}", text))
    return out


def wordnet_glosses(root):
    """(word, part of speech, definition, [examples]) from WordNet's data files."""
    out = []
    for pos_name, fname in (("noun", "data.noun"), ("verb", "data.verb"),
                            ("adjective", "data.adj"), ("adverb", "data.adv")):
        for line in (root / "usr/share/wordnet" / fname).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue
            fields, gloss = line.split("|", 1)
            parts = fields.split()
            n_words = int(parts[3], 16)
            word = parts[4].replace("_", " ")
            word = re.sub(r"\(\w+\)$", "", word)
            pieces = [p.strip() for p in gloss.strip().split(";")]
            definition = pieces[0]
            examples = [p.strip('"') for p in pieces[1:] if p.startswith('"') and p.endswith('"')]
            if len(definition) < 8 or not word.isascii():
                continue
            out.append((word, pos_name, definition, examples))
    return out


# --------------------------------------------------------------------- chats
GREETINGS = [
    (["Hello!", "Hi!", "Hello.", "Hi there.", "Hey!", "Good morning!", "Good evening.", "Hello, how are you?"],
     ["Hello! How can I help you today?", "Hi! What would you like to talk about?",
      "Hello! I am happy to help. What would you like to know?",
      "Hi there! Ask me anything, and I will do my best to answer."]),
    (["How are you?", "How are you doing today?", "How is it going?"],
     ["I am doing well, thank you for asking. What would you like to talk about?",
      "I am fine, thank you. How can I help you?"]),
    (["Who are you?", "What are you?", "Tell me about yourself.", "What is your name?"],
     ["I am a small demo language model with the Gemma 4 architecture, running on g4, "
      "an inference engine written in C++. I was trained for a few minutes on English text "
      "that Debian ships, so my answers are short and not always right.",
      "I am the g4 demo model: a tiny Gemma 4 style language model trained on Debian "
      "documentation, the King James Bible, the Jargon File and WordNet. I can chat a little, "
      "but please do not trust my facts."]),
    (["Thank you!", "Thanks.", "Thanks a lot!", "Thank you, that was helpful."],
     ["You're welcome!", "You are welcome. Is there anything else I can help with?",
      "Glad I could help!"]),
    (["Goodbye!", "Bye.", "See you later.", "Good night."],
     ["Goodbye! Have a nice day.", "Bye! It was nice talking to you.", "See you later!"]),
    (["What can you do?", "How can you help me?"],
     ["I can answer simple questions, explain words, and write a few sentences about topics "
      "such as Linux, Debian and Python. I am a very small model, so keep your expectations low.",
      "I can talk about computers, Debian, Python and Perl, explain the meaning of words, "
      "and quote old books. I am small, so I make mistakes."]),
]

TOPIC_QUESTIONS = ["Tell me about {t}.", "Can you explain {t}?", "Explain {t}.",
                   "Write a paragraph about {t}.", "What do you know about {t}?", "Tell me more about {t}."]
WORD_QUESTIONS = ['What does "{w}" mean?', "What is the meaning of the word {w}?",
                  "Define {w}.", "What does the word {w} mean?"]
JARGON_QUESTIONS = ['What does "{w}" mean in hacker slang?', "What is {w} in the Jargon File?",
                    "What does {w} mean?", "Explain the term {w}."]
QUOTE_QUESTIONS = ["Tell me a quote.", "Give me a fortune cookie.", "Say something wise.",
                   "Tell me something funny.", "Share a saying with me."]
BIBLE_QUESTIONS = ["Quote a verse from the Bible.", "Give me a Bible verse.",
                   "What does the Bible say?", "Read me something from the King James Bible."]


def first_sentence(text):
    m = re.match(r"^(.{20,200}?[.!?])\s+(?=[A-Z])", text)
    return m.group(1) if m else None


def clip(text, limit=700):
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
    return cut[: end + 1] if end > 100 else cut.rsplit(" ", 1)[0] + "…"


def topic_from_heading(h):
    """A heading as the object of a question, or None for a generic one."""
    h = h.strip().rstrip(":.")
    if not h or h.lower() in ("introduction", "overview", "description", "notes", "note", "example",
                              "examples", "arguments", "parameters", "see also", "summary", "caveats"):
        return None
    words = h.split()
    # "Data values in PL/Perl" -> "data values in PL/Perl"; keep "Debian" or "APT" as written.
    if len(words) > 1 and words[0].istitle() and all(not w[:1].isupper() for w in words[1:2]):
        return h[0].lower() + h[1:]
    return h


def question_for(topic, rng):
    if topic.split()[0] in ("How", "Why", "What", "When", "Where", "Which", "Who"):
        return topic if topic.endswith("?") else topic + "?"
    return rng.choice(TOPIC_QUESTIONS).format(t=topic)


def make_pairs(docs, jargon, words, quotes, kjv, rng):
    """Question/answer pairs from the training documents, by kind."""
    pairs = []
    for d in docs:
        if d.src == "kjv":
            continue
        for head, paras in d.sections():
            t = topic_from_heading(head)
            if t:
                answer = clip(paras[0] if len(paras[0]) > 200 or len(paras) == 1 else paras[0] + " " + paras[1])
                pairs.append(("topic", question_for(t, rng), answer))
            for p in paras[:3]:
                s = first_sentence(p)
                if s and rng.random() < 0.3 and len(p) > len(s) + 40:
                    pairs.append(("continue", s, clip(p[len(s):].strip())))
    for term, pos, paras in jargon:
        pairs.append(("jargon", rng.choice(JARGON_QUESTIONS).format(w=term), clip(" ".join(paras), 600)))
    for word, pos, definition, examples in words:
        a = f'"{word[0].upper() + word[1:]}" ({pos}) means {definition}.'
        if examples:
            a += f' For example: "{examples[0]}".'
        pairs.append(("word", rng.choice(WORD_QUESTIONS).format(w=word), a))
    for _, text in quotes:
        pairs.append(("quote", rng.choice(QUOTE_QUESTIONS), text))
    for d in kjv:
        for v in d.verses[:: 7]:
            pairs.append(("bible", rng.choice(BIBLE_QUESTIONS), v))
    return pairs


def make_conversations(pairs, n_greeting, rng):
    """Conversations of one to three turns; some open with a greeting or close with thanks."""
    def canned(k):
        qs, answers = GREETINGS[k]
        return [rng.choice(qs), rng.choice(answers)]
    rng.shuffle(pairs)
    convs = []
    i = 0
    while i < len(pairs):
        turns = []
        r = rng.random()
        if r < 0.15:
            turns.append(canned(0))
        elif r < 0.2:
            turns.append(canned(rng.choice([1, 2, 5])))
        k = 1 if rng.random() < 0.7 else 2
        for _ in range(k):
            if i < len(pairs):
                turns.append(list(pairs[i][1:]))
                i += 1
        if rng.random() < 0.1:
            turns.append(canned(rng.choice([3, 4])))
        convs.append(turns)
    for _ in range(n_greeting):  # short chit-chat on its own
        seq = [canned(0)] + [canned(rng.choice([1, 2, 5]))] + ([canned(3)] if rng.random() < 0.5 else [])
        convs.append(seq)
    rng.shuffle(convs)
    return convs


# ------------------------------------------------------------------- output
def is_heldout(src, doc_id):
    h = hashlib.sha256(f"{src}/{doc_id}".encode()).digest()
    return int.from_bytes(h[:4], "little") % 1000 < HELDOUT_PER_MILLE


def write_jsonl_xz(path, records):
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    path.write_bytes(lzma.compress(data, preset=9))
    return len(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=4)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    root = args.root

    docs = []
    for name, fn in (("kjv", kjv_docs), ("python-doc", python_docs), ("perl-doc", perl_docs),
                     ("debian-handbook", handbook_docs), ("debian-reference", reference_docs),
                     ("postgresql-doc", postgresql_docs), ("django-doc", django_docs), ("rust-doc", rust_docs)):
        got = [d for d in fn(root) if d.text()]
        print(f"{name}: {len(got)} documents, {sum(len(d.text()) for d in got)} chars", file=sys.stderr)
        docs += got
    jargon = jargon_entries(root)
    docs += jargon_docs(jargon)
    quotes = fortunes(root)
    words = wordnet_glosses(root)
    print(f"jargon: {len(jargon)} entries; fortunes: {len(quotes)}; wordnet: {len(words)} synsets",
          file=sys.stderr)

    train_docs = [d for d in docs if not is_heldout(d.src, d.id)]
    held_docs = [d for d in docs if is_heldout(d.src, d.id)]
    train_quotes = [q for q in quotes if not is_heldout("fortunes", q[0])]
    held_quotes = [q for q in quotes if is_heldout("fortunes", q[0])]
    train_jargon = [e for e in jargon if not is_heldout("jargon", e[0])]

    # Fortunes as plain text too: twenty to a document.
    def quote_docs(qs, tag):
        out = []
        for i in range(0, len(qs), 20):
            d = Doc("fortunes", f"{tag}{i}")
            d.blocks = [("p", t) for _, t in qs[i:i + 20]]
            out.append(d)
        return out
    train_docs += quote_docs(train_quotes, "t")
    held_docs += quote_docs(held_quotes, "h")

    rng_words = random.Random(args.seed + 1)
    words = rng_words.sample(words, min(len(words), 15000))
    pairs = make_pairs(train_docs, train_jargon, words, train_quotes,
                       [d for d in train_docs if d.src == "kjv"], rng)
    convs = make_conversations(pairs, 3000, rng)

    records = [{"src": d.src, "text": d.text()} for d in train_docs]
    records += [{"src": "chat", "chat": c} for c in convs]
    rng.shuffle(records)
    args.out.mkdir(parents=True, exist_ok=True)
    n_train = write_jsonl_xz(args.out / "train.jsonl.xz", records)
    n_held = write_jsonl_xz(args.out / "heldout.jsonl.xz", [{"src": d.src, "text": d.text()} for d in held_docs])

    # Evaluation files for g4 perplexity: held-out prose, interleaved across sources.
    ev = args.out / "eval"
    ev.mkdir(exist_ok=True)
    by_src = {}
    for d in held_docs:
        by_src.setdefault(d.src, []).append(d.text())
    mixed, budget = [], 250_000
    while budget > 0 and any(by_src.values()):
        for src in sorted(by_src):
            if by_src[src] and budget > 0:
                t = by_src[src].pop(0)
                mixed.append(t)
                budget -= len(t)
    (ev / "heldout.txt").write_text("\n\n".join(mixed) + "\n", encoding="utf-8")
    long_sources = {"kjv": "kjv", "python-doc": "python", "debian-handbook": "handbook", "perl-doc": "perl"}
    for src, tag in long_sources.items():
        texts = [d.text() for d in held_docs if d.src == src]
        texts.sort(key=len, reverse=True)
        out, n = [], 0
        for t in texts:  # the longest first, until ~24 KB (about 5-6k tokens)
            out.append(t)
            n += len(t)
            if n >= 24_000:
                break
        (ev / f"long-{tag}.txt").write_text("\n\n".join(out)[:40_000] + "\n", encoding="utf-8")

    stats = {"train_chars": n_train, "heldout_chars": n_held, "documents": {}, "conversations": len(convs),
             "qa_pairs": {}}
    for d in docs:
        s = stats["documents"].setdefault(d.src, {"train": 0, "heldout": 0})
        s["heldout" if is_heldout(d.src, d.id) else "train"] += len(d.text())
    for kind, _, _ in pairs:
        stats["qa_pairs"][kind] = stats["qa_pairs"].get(kind, 0) + 1
    (args.out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
