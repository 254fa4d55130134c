#!/usr/bin/env python3
"""bench_tokenizer.py - the `tokenizers` side of tools/bench_tokenizer.sh.

  bench_tokenizer.py make OUT [MB] [mixed|prose]
                                       write a corpus of about MB
                                       megabytes (default 10): prose, code,
                                       CJK, other scripts, emoji, numbers,
                                       whitespace runs; documents separated by 0x1E
  bench_tokenizer.py run TOKENIZER_DIR FILE
                                       encode each document with one
                                       Tokenizer.encode() call on one thread
"""
import os
import random
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make(out, mb, kind="mixed"):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_tok_corpus as m
    rng = random.Random(7)
    if kind == "prose":  # ordinary text: English prose and code only
        pieces = m.PROSE + m.CODE + [" ".join(rng.choice(m.WORDS) for _ in range(rng.randint(5, 60)))
                                     for _ in range(3000)]
    else:  # the whole conformance corpus: every script, long words, byte soup
        pieces = [s for s in m.gen_strings(rng) if "\x1e" not in s]
    target = int(mb * 1e6)
    docs, size = [], 0
    while size < target:
        k = rng.randint(3, 40)
        doc = "\n".join(rng.choice(pieces) for _ in range(k))
        b = doc.encode("utf-8")
        docs.append(b)
        size += len(b) + 1
    with open(out, "wb") as f:
        f.write(b"\x1e".join(docs))
    print(f"wrote {out}: {size / 1e6:.1f} MB, {len(docs)} documents")


def run(tokdir, path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
    data = open(path, "rb").read()
    docs = [d.decode("utf-8") for d in data.split(b"\x1e")]
    t0 = time.perf_counter()
    c0 = time.process_time()
    total = 0
    for d in docs:
        total += len(tok.encode(d, add_special_tokens=False).ids)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(f"tokenizers : {len(data) / cpu / 1e6:8.2f} MB/s (CPU time)  {len(data) / dt / 1e6:8.2f} MB/s (wall)  "
          f"{total} tokens, {len(docs)} docs, {len(data) / 1e6:.1f} MB")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 10,
             sys.argv[4] if len(sys.argv) > 4 else "mixed")
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
