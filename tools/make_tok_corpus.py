#!/usr/bin/env python3
"""make_tok_corpus.py - reference fixtures for the C tokenizer (src/tokenizer/).

Two steps, both deterministic:

  python tools/make_tok_corpus.py fixtures [--src DIR]
      Writes tests/fixtures/tokenizer/{qwen2.5,qwen3}/*.xz from the Qwen
      tokenizer in DIR (default ../shared/tokenizers/qwen, Qwen3's files):
      qwen3/ as given; qwen2.5/ with the added tokens cut at id 151664 and the
      Qwen2.5-Instruct tokenizer_config.json (chat template included).

  python tools/make_tok_corpus.py corpus
      Builds >= 5000 strings (prose, code, CJK, Arabic, Hindi, Thai, emoji,
      combining marks, NFC/NFD pairs, digits, contractions, whitespace runs,
      special-token strings, long words, byte soup, ...) and writes, for both
      tokenizers, the ids the Hugging Face `tokenizers` library gives and its
      decode; plus chat conversations rendered by transformers'
      apply_chat_template with the Qwen2.5 template (string and ids).
      Output: tests/fixtures/tokenizer/corpus.jsonl.xz, corpus_chat.jsonl.xz.

Needs the `tokenizers` and `transformers` packages (PyPI); run it with any
python that has them. Byte strings that are not valid UTF-8 are stored as
hex in "bytes_hex"; the expected ids are for what Python sees after
bytes.decode("utf-8", errors="replace"), which is what the C side must do.
"""
import argparse
import json
import lzma
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
QWEN25_LAST_ADDED = 151664

# The chat template Qwen/Qwen2.5-*-Instruct ship in tokenizer_config.json.
QWEN25_CHAT_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, "
    "\\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)


def write_xz(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(data)


def cmd_fixtures(args):
    src = args.src
    with open(os.path.join(src, "tokenizer.json"), "rb") as f:
        raw = f.read()
    with open(os.path.join(src, "tokenizer_config.json"), "rb") as f:
        cfg3 = f.read()
    write_xz(os.path.join(FIX, "qwen3", "tokenizer.json.xz"), raw)
    write_xz(os.path.join(FIX, "qwen3", "tokenizer_config.json.xz"), cfg3)

    tj = json.loads(raw)
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["id"] <= QWEN25_LAST_ADDED]
    write_xz(os.path.join(FIX, "qwen2.5", "tokenizer.json.xz"),
             json.dumps(tj, ensure_ascii=False, indent=2).encode("utf-8"))

    c3 = json.loads(cfg3)
    dec = {k: v for k, v in c3["added_tokens_decoder"].items() if int(k) <= QWEN25_LAST_ADDED}
    cfg25 = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": dec,
        "additional_special_tokens": [
            "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
            "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",
            "<|video_pad|>"],
        "bos_token": None,
        "chat_template": QWEN25_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    write_xz(os.path.join(FIX, "qwen2.5", "tokenizer_config.json.xz"),
             json.dumps(cfg25, ensure_ascii=False, indent=2).encode("utf-8"))
    print("wrote", FIX)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fixtures")
    p.add_argument("--src", default=os.path.join(ROOT, "..", "shared", "tokenizers", "qwen"))
    p = sub.add_parser("corpus")
    p.add_argument("--fixdir", default=None,
                   help="decompressed fixtures (prepare.sh output); default: a temp dir")
    args = ap.parse_args()
    if args.cmd == "fixtures":
        cmd_fixtures(args)
    else:
        cmd_corpus(args)


if __name__ == "__main__":
    main()
