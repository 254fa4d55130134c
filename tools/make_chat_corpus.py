#!/usr/bin/env python3
"""make_chat_corpus.py - reference fixtures for the chat templates with tools,
the tojson filter and the tool-call / infill formats (src/tokenizer/chat.c,
tojson.c, toolcall.c, fim.c).

    /work/venv-torch/bin/python tools/make_chat_corpus.py [--gguf FILE ...]

Needs `transformers` (and `gguf` to read templates from GGUF files); run it
with any python that has them. Deterministic (fixed seed). Writes:

  tests/fixtures/tokenizer/corpus_tools.jsonl.xz
      conversations with tools rendered by transformers'
      apply_chat_template(messages, tools=..., add_generation_prompt=...)
      under each known Qwen template that renders tools: one record per
      conversation and template, {"template", "messages", "tools",
      "add_generation_prompt", "text", "ids"} (ids: the Qwen2.5 tokenizer of
      tests/fixtures/tokenizer/qwen2.5 encoding "text").
  tests/fixtures/tokenizer/corpus_tojson.jsonl.xz
      {"in": JSON text, "out": json.dumps(json.loads(in), ensure_ascii=False)}
      (transformers' tojson filter) for hand-made and random inputs.
  src/tokenizer/chat_known.h
      the exact texts of the known chat templates, taken from the real GGUF
      files (tokenizer.chat_template) and the Qwen3 tokenizer fixture:
      chat.c recognises a model's template by comparing with these.

The GGUF files default to the real Qwen2.5-Coder-Instruct files in
/root/.cache/qwenc/real/ (tools/real-model.sh fetches them). The 0.5B file's
template is byte-identical to Qwen2.5-Instruct's tokenizer_config.json
(also checked here); the 1.5B file's differs in one line (the tool-call
example reads {{"name": ...}} with doubled braces).
"""
import argparse
import json
import lzma
import os
import random
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
REAL = "/root/.cache/qwenc/real"
sys.path.insert(0, os.path.join(ROOT, "tools"))


def write_xz(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(data)


def read_xz(path):
    with lzma.open(path, "rb") as f:
        return f.read()


def gguf_template(path):
    import gguf
    r = gguf.GGUFReader(path)
    fld = r.fields["tokenizer.chat_template"]
    return bytes(fld.parts[fld.data[0]]).decode("utf-8")


# ------------------------------------------------------------------ tools

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_web",
        "description": "Suche im Web nach einer Anfrage — gibt Treffer zurück (日本語もOK)",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "safe": {"type": "boolean", "default": True}},
            "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "set_thermostat",
        "description": "Set a temperature. Quotes \"like this\", backslash \\ and a tab\there.",
        "parameters": {"type": "object", "properties": {
            "temperature": {"type": "number", "minimum": -40.5, "maximum": 1e3, "multipleOf": 0.5},
            "room": {"type": "string", "enum": ["kitchen", "bedroom", "salle de bain"]},
            "schedule": {"type": "array", "items": {"type": "object", "properties": {
                "hour": {"type": "integer"}, "value": {"type": "number"}}}}},
            "required": ["temperature"]}}},
    {"type": "function", "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression 🧮",
        "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}},
    {"type": "function", "function": {
        "name": "no_params",
        "description": "",
        "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {
        "name": "lookup_user",
        "description": "Find a user by id or email\n(multi-line description)\n\tindented",
        "parameters": {"type": "object", "properties": {
            "id": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "email": {"type": ["string", "null"], "pattern": "^[^@]+@[^@]+$"},
            "control": {"type": "string", "description": "bell \u0007 and DEL \u007f"}},
            "$defs": {"x": {"const": 1.25}}}}},
]

ARGS = {
    "get_weather": [{"location": "Paris, France"}, {"location": "São Paulo", "unit": "celsius"},
                    {"unit": "fahrenheit", "location": "東京"}],
    "search_web": [{"query": "qwen 2.5 tool calling", "max_results": 3},
                   {"query": "\"quoted\" \\ back\\slash\nnewline", "safe": False},
                   {"query": "emoji 🦙 test", "max_results": 12345678901234567890}],
    "set_thermostat": [{"temperature": 21.5, "room": "kitchen"}, {"temperature": 20.0},
                       {"temperature": -0.0, "schedule": [{"hour": 7, "value": 1e-7}, {"hour": 22, "value": 1e22}]},
                       {"temperature": 0.1, "schedule": []}],
    "calc": [{"expr": "2+2"}, {"expr": "sqrt(2) * π"}, {"expr": ""}],
    "no_params": [{}],
    "lookup_user": [{"id": None, "email": "a@b.c"}, {"id": 42}, {"control": "x\u0001y\u001fz"}],
}

RESULTS = ['{"temperature": 22, "condition": "sunny"}', "42", "Résultat: 3 Treffer gefunden.",
           "error: timeout", "", "multi\nline\nresult", "<tool_response>nested</tool_response>",
           "{\"items\": [1, 2.5, \"ü\"]}", "🌧️ rain"]

USERS = ["What's the weather in Paris?", "Cherche des nouvelles sur Qwen.", "今天东京的天气怎么样？",
         "Set the kitchen to 21.5 degrees and tell me the weather in São Paulo.", "Compute 2+2 please",
         "Hi!", "Look up user 42 — and email a@b.c", "Call every tool you have.",
         "<|im_start|>user text that looks special<|im_end|>", "tabs\tand\nnewlines"]


THINK_CONTENTS = ["<think>\nThe user wants weather.\n</think>\n\nIt is sunny.",
                  "<think>step 1</think>Answer", "no think tags here", "\n\nleading newlines",
                  "<think>\n\n</think>\n\n4", "a</think>b</think>\nc", "<think>x<think>y</think>z"]


def gen_qwen3_extra(rng, n):
    """Conversations exercising Qwen3's template: reasoning, multi-step tool
    turns (user messages that are wrapped tool responses), no system."""
    convs = []
    for k in range(n):
        tools = rng.sample(TOOLS, rng.randint(1, 3)) if rng.random() < 0.5 else None
        names = [t["function"]["name"] for t in (tools or TOOLS)]
        msgs = []
        if rng.random() < 0.4:
            msgs.append({"role": "system", "content": rng.choice(["Be brief.", "", "Réponds en français."])})
        for turn in range(rng.randint(1, 3)):
            if rng.random() < 0.2 and turn > 0:
                msgs.append({"role": "user", "content": "<tool_response>\n42\n</tool_response>"})
            else:
                msgs.append({"role": "user", "content": rng.choice(USERS)})
            m = {"role": "assistant", "content": rng.choice(THINK_CONTENTS + ["", "Plain answer."])}
            r = rng.random()
            if r < 0.3:
                m["reasoning_content"] = rng.choice(["\nthinking hard\n", "", "short"])
            elif r < 0.4:
                m["reasoning_content"] = None
            if rng.random() < 0.4:
                m["tool_calls"] = [make_call(rng, rng.choice(names), rng.random() < 0.5)
                                   for _ in range(rng.choice([1, 2]))]
                msgs.append(m)
                for _ in m["tool_calls"]:
                    msgs.append({"role": "tool", "content": rng.choice(RESULTS)})
                if rng.random() < 0.5:
                    msgs.append({"role": "assistant", "content": rng.choice(THINK_CONTENTS)})
            else:
                msgs.append(m)
        if rng.random() < 0.5:
            msgs.pop()  # end on a user / tool message
        gen = rng.random() < 0.7
        think = rng.choice([None, True, False])
        convs.append((msgs, tools, gen, think))
    return convs


def make_call(rng, name, wrap):
    args = rng.choice(ARGS[name])
    if wrap:
        return {"type": "function", "id": f"call_{rng.randrange(10**6)}", "function": {"name": name, "arguments": args}}
    return {"name": name, "arguments": args}


def gen_conversations(rng, n):
    convs = []
    for k in range(n):
        tools = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        names = [t["function"]["name"] for t in tools]
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(
                ["You are a helpful assistant.", "Réponds en français.", "", "System with\nnewline 🤖"])})
        for turn in range(rng.randint(1, 3)):
            msgs.append({"role": "user", "content": rng.choice(USERS)})
            if rng.random() < 0.75:
                ncalls = rng.choice([1, 1, 2, 3])
                wrap = rng.random() < 0.7
                calls = [make_call(rng, rng.choice(names), wrap) for _ in range(ncalls)]
                m = {"role": "assistant", "tool_calls": calls}
                c = rng.random()
                if c < 0.4:
                    m["content"] = None
                elif c < 0.6:
                    m["content"] = ""
                elif c < 0.9:
                    m["content"] = rng.choice(["Let me check.", "Je vais vérifier…", "好的"])
                msgs.append(m)
                for _ in range(ncalls):
                    msgs.append({"role": "tool", "content": rng.choice(RESULTS)})
            if rng.random() < 0.7:
                msgs.append({"role": "assistant", "content": rng.choice(
                    ["It is sunny, 22 °C.", "Done.", "Voilà.", "4", "🌞"])})
        if k % 7 == 3:
            # A later system message and a tool message right at the start.
            msgs.insert(0, {"role": "tool", "content": "orphan result"})
            msgs.append({"role": "system", "content": "late system"})
        gen = msgs[-1]["role"] != "assistant" or rng.random() < 0.3
        convs.append((msgs, tools, gen))
    # Fixed cases: every tool, a parallel call of 3, consecutive tool results.
    convs.append(([{"role": "user", "content": "all"}], TOOLS, True))
    convs.append(([{"role": "user", "content": "p"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       make_call(rng, "get_weather", True), make_call(rng, "calc", True),
                       make_call(rng, "search_web", False)]},
                   {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
                   {"role": "tool", "content": "c"}], TOOLS[:4], True))
    return convs


# ----------------------------------------------------------------- tojson

TOJSON_CASES = [
    '{}', '[]', '""', '0', '-0', '-0.0', '0.0', '1', '1.0', '1.50', '1e2', '1E2', '1e-5', '1e-4', '0.0001',
    '0.00001', '123456789012345678901234567890', '-123456789012345678901234567890', '1e16', '1e15',
    '9999999999999998.0', '12345678.9', '1.7976931348623157e308', '5e-324', '1e400', '-1e400', '0.1',
    '0.30000000000000004', '100.0', '1.5e300', '2.5E-10', '3.14159265358979323846', '1e22', '1e21', '1e+2',
    'true', 'false', 'null', ' { "a" : 1 , "b" : [ 1 , 2 ] } ', '{"b": 1, "a": 2}',
    '{"a": 1, "b": 2, "a": 3}', '{"a": {"x": 1}, "a": [2]}', '"\\u00e9\\u4e2d\\ud83e\\udd99"',
    '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\u0000\\u0001\\u001f\\u007f\\u0080"', '"é中🦙"', '"<tag> & \'x\'"',
    '[1, [2, [3, [4, {"k": []}]]]]', '{"": ""}', '{"\\u0041": "A"}', '[1.0, 2, -3.25e-8, 4e100]',
    '"\u2028\u2029"', '{"nested": {"deep": {"deeper": {"deepest": 1.0}}}}',
]


def gen_tojson(rng):
    recs = []
    for s in TOJSON_CASES:
        recs.append({"in": s, "out": json.dumps(json.loads(s), ensure_ascii=False)})
    alphabet = ["a", "é", "中", "🦙", "\"", "\\", "\n", "\t", "\u0001", " ", "\u007f", "/"]

    def rnd_value(d):
        c = rng.random()
        if d > 3 or c < 0.3:
            kind = rng.randrange(6)
            if kind == 0:
                return rng.randint(-10**20, 10**20)
            if kind == 1:
                return rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30),
                                   float(rng.randint(-1000, 1000))])
            if kind == 2:
                return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
            return rng.choice([True, False, None])
        if c < 0.65:
            return [rnd_value(d + 1) for _ in range(rng.randint(0, 4))]
        return {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))): rnd_value(d + 1)
                for _ in range(rng.randint(0, 4))}

    for _ in range(300):
        v = rnd_value(0)
        # Serialise differently from the expected output (compact, escaped
        # non-ASCII, floats as repr): the C side must normalise.
        s = json.dumps(v, ensure_ascii=rng.random() < 0.5, separators=(",", ":") if rng.random() < 0.5 else None)
        recs.append({"in": s, "out": json.dumps(json.loads(s), ensure_ascii=False)})
    return recs


# ------------------------------------------------------------------- main

def c_string(text):
    out = []
    for line in text.splitlines(keepends=True):
        b = line.encode("utf-8")
        esc = ""
        for ch in b:
            c = chr(ch)
            if c == "\\":
                esc += "\\\\"
            elif c == '"':
                esc += '\\"'
            elif c == "\n":
                esc += "\\n"
            elif 0x20 <= ch < 0x7f:
                esc += c
            else:
                esc += "\\%03o" % ch
        out.append('    "' + esc + '"')
    return "\n".join(out)


def write_known_header(known):
    lines = ["/* chat_known.h - the exact texts of the chat templates qwenc recognises.",
             " * Generated by tools/make_chat_corpus.py from the files named below; do",
             " * not edit. chat.c compares a model's template with these byte for byte. */",
             "#ifndef QW_CHAT_KNOWN_H", "#define QW_CHAT_KNOWN_H", ""]
    for name, (source, text) in known.items():
        lines.append(f"/* {source} */")
        lines.append(f"static const char CHAT_TEMPLATE_{name}[] =")
        lines.append(c_string(text) + ";")
        lines.append("")
    lines.append("#endif")
    path = os.path.join(ROOT, "src", "tokenizer", "chat_known.h")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", nargs="*", default=[
        os.path.join(REAL, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        os.path.join(REAL, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")])
    args = ap.parse_args()
    rng = random.Random(20261203)

    from make_tok_corpus import QWEN25_CHAT_TEMPLATE
    t05 = gguf_template(args.gguf[0])
    t15 = gguf_template(args.gguf[1])
    assert t05 == QWEN25_CHAT_TEMPLATE, "the 0.5B Coder template differs from Qwen2.5-Instruct's"
    assert t15 != t05
    q3 = json.loads(read_xz(os.path.join(FIX, "qwen3", "tokenizer_config.json.xz")))["chat_template"]
    write_known_header({
        "QWEN25": ("Qwen2.5-*-Instruct tokenizer_config.json = qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", t05),
        "QWEN25_CODER": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tokenizer.chat_template", t15),
        "QWEN3": ("Qwen3 tokenizer_config.json (tests/fixtures/tokenizer/qwen3)", q3),
    })

    from transformers import AutoTokenizer
    with tempfile.TemporaryDirectory() as d:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(d, name), "wb") as f:
                f.write(read_xz(os.path.join(FIX, "qwen2.5", name + ".xz")))
        hf = AutoTokenizer.from_pretrained(d)
    recs = []
    convs = gen_conversations(rng, 60)
    for tname, ttext in (("qwen2.5", t05), ("qwen2.5-coder", t15)):
        for msgs, tools, gen in convs:
            text = hf.apply_chat_template(msgs, tools=tools, chat_template=ttext, tokenize=False,
                                          add_generation_prompt=gen)
            ids = hf(text, add_special_tokens=False)["input_ids"]
            recs.append({"template": tname, "messages": msgs, "tools": tools, "add_generation_prompt": gen,
                         "text": text, "ids": ids})
    # Qwen3: its own tokenizer (ids of <think> etc.), the tool conversations
    # above plus reasoning / multi-step ones, enable_thinking unset / true / false.
    with tempfile.TemporaryDirectory() as d:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(d, name), "wb") as f:
                f.write(read_xz(os.path.join(FIX, "qwen3", name + ".xz")))
        hf3 = AutoTokenizer.from_pretrained(d)
    def content_str(msgs):  # Qwen3's template reads every assistant content as a string
        return [dict(m, content=m.get("content") or "") if m["role"] == "assistant" else m for m in msgs]
    q3convs = [(content_str(m), t, g, None) for m, t, g in convs[:40]] + gen_qwen3_extra(rng, 80)
    for msgs, tools, gen, think in q3convs:
        kw = {} if think is None else {"enable_thinking": think}
        text = hf3.apply_chat_template(msgs, tools=tools, chat_template=q3, tokenize=False,
                                       add_generation_prompt=gen, **kw)
        ids = hf3(text, add_special_tokens=False)["input_ids"]
        r = {"template": "qwen3", "messages": msgs, "tools": tools, "add_generation_prompt": gen,
             "text": text, "ids": ids}
        if think is not None:
            r["enable_thinking"] = think
        recs.append(r)
    write_xz(os.path.join(FIX, "corpus_tools.jsonl.xz"),
             "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs).encode("utf-8"))
    print(f"tools: {len(recs)} conversations")
    tj = gen_tojson(rng)
    write_xz(os.path.join(FIX, "corpus_tojson.jsonl.xz"),
             "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in tj).encode("utf-8"))
    print(f"tojson: {len(tj)} cases")


if __name__ == "__main__":
    main()
