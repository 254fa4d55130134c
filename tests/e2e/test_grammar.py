"""Constrained output end to end (src/grammar, docs/grammar.md): random JSON
Schemas x seeds through the HTTP server's response_format (4 slots, requests
batched together) and through `qwenc MODEL --prompt ... --json-schema FILE`
on the tiny random-weight model; every output must parse and validate with the
`jsonschema` package (a validator written by others, so the test does not
trust the engine's own idea of the subset). Also GBNF through --grammar,
--json-object, the refusals (a keyword outside the subset is named), and the
real 0.5B model when its file is present.

The random model is the harshest user: it picks near-uniformly among the
~150k tokens the mask allows, so it visits every corner of a grammar
(escapes, multi-byte characters split over tokens, blanks, empty arrays).
Strings in the random schemas have a maxLength (or are enums / formats) so
that every output ends well before the token limit; a run that hits it is a
failure, not a skip.
"""

import json
import os
import random
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import QWENC, THREADS, run
from helpers import api_error, chat, names_field, ok_json, post, stream_chat

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (tools/venv.sh)")

N_SCHEMAS = int(os.environ.get("QWENC_GRAMMAR_SCHEMAS", "100"))  # x 3 seeds over HTTP
N_CLI_SCHEMAS = 5  # x 3 seeds through the CLI (a process each)
SEEDS = (1, 2, 3)
MAX_TOKENS = 1500
REAL = os.environ.get("QWENC_REAL_MODEL", "/root/.cache/qwenc/real/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")

NAMES = ["a", "id", "name", "x y", "é", "日本", 'q"uote', "back\\slash", "new\nline", "k"]
STRINGS = ["", "a", "hello", 'say "hi"', "tab\there", "é", "日本語", "\U0001F600", "back\\", "\u0001"]


def rand_scalar_value(rng):
    return rng.choice([rng.choice(STRINGS), rng.randint(-1000, 1000), rng.choice([True, False, None]),
                       round(rng.uniform(-10, 10), 3)])


def rand_value(rng, depth=0):
    k = rng.random()
    if depth < 2 and k < 0.15:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    if depth < 2 and k < 0.3:
        return {rng.choice(NAMES): rand_value(rng, depth + 1) for _ in range(rng.randint(0, 2))}
    return rand_scalar_value(rng)


PATTERNS = [r"^[a-z]{1,5}$", r"^\d{3}-\d{2}$", r"^(yes|no|maybe)$", r"^[A-Z][a-z]{0,4}( [A-Z][a-z]{0,4})?$",
            r'^[^"\\]{0,4}$', r"^\w{2,4}@\w{1,3}\.(com|org)$", r"^.{0,3}$", r'^a"b\\c$', r"^[\s\S]{2}$",
            r"^(?:[0-9a-f]{2}:){1,2}[0-9a-f]{2}$", r"^\u00e9+?x{0,2}$"]


def rand_string(rng):
    s = {"type": "string"}
    k = rng.random()
    if k < 0.2:
        s["pattern"] = rng.choice(PATTERNS)
    elif k < 0.35:
        s["format"] = rng.choice(["date", "date-time", "time", "uuid", "email"])
    else:
        hi = rng.randint(0, 6)
        s["maxLength"] = hi
        if rng.random() < 0.4:
            s["minLength"] = rng.randint(0, hi)
    return s


def rand_schema(rng, depth, defs):
    """A random schema of the supported subset, every string bounded."""
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "nullable"]
    if depth < 3:
        kinds += ["object", "object", "array", "array", "anyOf", "ref"]
    kind = rng.choice(kinds)
    if kind == "string":
        return rand_string(rng)
    if kind in ("integer", "number", "boolean", "null"):
        return {"type": kind, "description": "a " + kind}
    if kind == "enum":
        vals = []
        for _ in range(rng.randint(1, 4)):
            v = rand_value(rng)
            if v not in vals:
                vals.append(v)
        return {"enum": vals}
    if kind == "const":
        return {"const": rand_value(rng)}
    if kind == "nullable":
        s = rand_string(rng) if rng.random() < 0.5 else {"type": "integer"}
        s["type"] = [s["type"], "null"]
        return s
    if kind == "object":
        return rand_object(rng, depth, defs)
    if kind == "array":
        s = {"type": "array", "items": rand_schema(rng, depth + 1, defs)}
        lo = rng.randint(0, 2)
        if rng.random() < 0.6:
            s["minItems"] = lo
        s["maxItems"] = rng.randint(lo, 3)
        return s
    if kind == "anyOf":
        return {"anyOf": [rand_schema(rng, depth + 1, defs) for _ in range(rng.randint(2, 3))]}
    # ref: a definition used from here (and perhaps again elsewhere)
    name = f"d{len(defs)}"
    defs[name] = None  # reserved: refs made while generating its body get other names
    defs[name] = rand_schema(rng, depth + 1, defs)
    return {"$ref": f"#/$defs/{name}"}


def rand_object(rng, depth, defs):
    props = {}
    for _ in range(rng.randint(0, 4)):
        props[rng.choice(NAMES)] = rand_schema(rng, depth + 1, defs)
    names = list(props)
    req = [n for n in names if rng.random() < 0.7]
    return {"type": "object", "properties": props, "required": req, "additionalProperties": False}


def make_schemas(n):
    rng = random.Random(20261203)
    out = []
    for i in range(n):
        defs = {}
        s = rand_object(rng, 0, defs) if i % 4 else rand_schema(rng, 0, defs)
        if defs:
            s = dict(s)
            s["$defs"] = defs
        out.append(s)
    return out


def constrained(model, flag, path, seed, temp="1.0", n=MAX_TOKENS, prompt="Answer in JSON.", timeout=120):
    args = [QWENC, model, "--prompt", prompt, "--temp", temp, "--seed", str(seed), "-n", str(n),
            "--threads", THREADS]
    if flag:
        args += [flag] + ([path] if path else [])
    return run(args, timeout=timeout)


def output_of(r):
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, f"exit {r.returncode}: {err[-1500:]}"
    assert "stopped at -n" not in err, f"hit the token limit: {r.stdout[-300:]!r}"
    out = r.stdout.decode()
    assert out.endswith("\n"), repr(out[-100:])
    return out[:-1]


def check_valid(schema, text):
    try:
        doc = json.loads(text)
    except ValueError as e:
        pytest.fail(f"output is not JSON ({e}): {text[:500]!r}\nschema: {json.dumps(schema)[:800]}")
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errs = list(v.iter_errors(doc))
    assert not errs, f"output {text[:500]!r} does not validate: {errs[0].message}\nschema: {json.dumps(schema)[:800]}"


def write(tmp, name, text):
    p = os.path.join(tmp, name)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


CHUNK = 25


def schema_format(s):
    return {"type": "json_schema", "json_schema": {"name": "t", "strict": True, "schema": s}}


@pytest.mark.parametrize("chunk", range((N_SCHEMAS + CHUNK - 1) // CHUNK))
def test_random_schemas_validate_http(server, chunk):
    """N_SCHEMAS random schemas x 3 seeds at temperature 1, 4 requests at a
    time (constrained rows batched with each other): all parse and validate."""
    schemas = make_schemas(N_SCHEMAS)[chunk * CHUNK:(chunk + 1) * CHUNK]
    jobs = [(s, seed) for s in schemas for seed in SEEDS]

    def one(job):
        s, seed = job
        return s, ok_json(chat(server, "Answer in JSON.", response_format=schema_format(s), temperature=1.0,
                               seed=seed, max_tokens=MAX_TOKENS))

    with ThreadPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(one, jobs))
    outputs = set()
    for s, j in results:
        c = j["choices"][0]
        assert c["finish_reason"] == "stop", f"finish {c['finish_reason']}: {c['message']['content'][-300:]!r}"
        check_valid(s, c["message"]["content"])
        outputs.add(c["message"]["content"])
    assert len(outputs) > len(schemas), f"only {len(outputs)} distinct outputs over {len(results)} runs"


def test_streamed_equals_whole(server):
    """Streaming works under a schema: the chunks join to the non-streamed answer."""
    s = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 8},
                                          "list": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
         "required": ["word", "list"], "additionalProperties": False}
    for seed in (1, 2, 3):
        j = ok_json(chat(server, "JSON please", response_format=schema_format(s), temperature=1.0, seed=seed,
                         max_tokens=400))
        whole = j["choices"][0]["message"]["content"]
        text, finish, _ = stream_chat(server, "JSON please", response_format=schema_format(s), temperature=1.0,
                                      seed=seed, max_tokens=400)
        assert finish == "stop" and text == whole, (text, whole)
        check_valid(s, text)


def test_http_json_object_and_grammar(server):
    j = ok_json(chat(server, "x", response_format={"type": "json_object"}, temperature=0, max_tokens=30))
    text = j["choices"][0]["message"]["content"]
    assert text.startswith("{"), text  # greedy may run out of tokens inside a string: only the start is sure
    g = 'root ::= "yes" | "no" | "maybe " [0-9]'
    for seed in range(4):
        j = ok_json(chat(server, "x", grammar=g, temperature=1.0, seed=seed, max_tokens=10))
        c = j["choices"][0]
        assert c["finish_reason"] == "stop" and re.fullmatch(r"yes|no|maybe [0-9]", c["message"]["content"]), c
    # /v1/completions too
    r = ok_json(post(server, "/v1/completions", {"prompt": "x", "grammar": g, "temperature": 0, "max_tokens": 10}))
    assert re.fullmatch(r"yes|no|maybe [0-9]", r["choices"][0]["text"]), r


@pytest.mark.parametrize("fields,param,word", [
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(a)\\1"}}}},
     "response_format", "backreferences"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {
        "n": {"type": "number", "multipleOf": 2}}}}}}, "response_format", "multipleOf"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", "yaml"),
    ({"grammar": "root ::= [a-"}, "grammar", "unterminated"),
    ({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "grammar", "not both"),
])
def test_http_refusals_name_field_and_keyword(server, fields, param, word):
    msg = api_error(chat(server, "x", max_tokens=4, **fields), 400)
    assert names_field(msg, param.split(".")[0]) and word in msg, msg
    server.check_alive()


def test_openai_client_json_schema(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x")
    s = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
         "required": ["ok", "n"], "additionalProperties": False}
    r = client.chat.completions.create(model="qwenc-test", messages=[{"role": "user", "content": "hi"}],
                                       response_format=schema_format(s), temperature=1.0, seed=5, max_tokens=200)
    check_valid(s, r.choices[0].message.content)
    chunks = client.chat.completions.create(model="qwenc-test", messages=[{"role": "user", "content": "hi"}],
                                            response_format=schema_format(s), temperature=1.0, seed=5,
                                            max_tokens=200, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content


def test_random_schemas_validate_cli(model_dir):
    """The CLI path (gen_run_constrained): N_CLI_SCHEMAS x 3 seeds."""
    schemas = make_schemas(N_SCHEMAS + N_CLI_SCHEMAS)[N_SCHEMAS:]
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for i, s in enumerate(schemas):
            p = write(tmp, f"s{i}.json", json.dumps(s))
            for seed in SEEDS:
                jobs.append((s, p, seed))
        with ThreadPoolExecutor(max_workers=2) as ex:
            results = list(ex.map(lambda j: (j[0], constrained(model_dir, "--json-schema", j[1], j[2], n=MAX_TOKENS)),
                                  jobs))
    outputs = set()
    for schema, r in results:
        text = output_of(r)
        check_valid(schema, text)
        outputs.add(text)
    # the runs really differ (the mask did not collapse everything to one answer)
    assert len(outputs) > len(schemas), f"only {len(outputs)} distinct outputs over {len(results)} runs"


def test_same_seed_same_output(model_dir):
    s = {"type": "object", "properties": {"k": {"type": "string", "maxLength": 5}, "n": {"type": "integer"}},
         "required": ["k", "n"], "additionalProperties": False}
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, "s.json", json.dumps(s))
        a = output_of(constrained(model_dir, "--json-schema", p, 7))
        b = output_of(constrained(model_dir, "--json-schema", p, 7))
        c = output_of(constrained(model_dir, "--json-schema", p, 8))
    assert a == b, (a, b)
    assert a != c
    check_valid(s, a)


def test_gbnf_grammar(model_dir):
    g = 'root ::= "color: " ("red" | "green" | "blue") ", n=" [1-9] [0-9]{0,2} "."\n'
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, "g.gbnf", g)
        for seed in (1, 2, 3, 4):
            text = output_of(constrained(model_dir, "--grammar", p, seed))
            assert re.fullmatch(r"color: (red|green|blue), n=[1-9][0-9]{0,2}\.", text), repr(text)


def test_json_object(model_dir):
    for seed in (1, 2):
        r = constrained(model_dir, "--json-object", None, seed, n=300)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0, err[-1000:]
        out = r.stdout.decode()[:-1]
        if "stopped at -n" in err:
            # unbounded strings: the random model may not close them in time;
            # what came out must still be a prefix the grammar allowed
            assert out.startswith("{"), repr(out[:100])
            continue
        assert isinstance(json.loads(out), dict), repr(out[:300])


@pytest.mark.parametrize("schema,want", [
    ({"type": "integer", "minimum": 1}, "unsupported keyword 'minimum'"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)"}}},
     "(pattern '(?=a)' at /properties/a)"),
    ({"oneOf": [{"type": "string"}]}, "unsupported keyword 'oneOf'"),
    ({"type": "string", "format": "ipv6"}, "unsupported format 'ipv6'"),
    ({"$ref": "#/$defs/nope"}, "no such definition"),
])
def test_refused_schemas(model_dir, schema, want):
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, "s.json", json.dumps(schema))
        r = constrained(model_dir, "--json-schema", p, 1)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and want in err and p in err, f"exit {r.returncode}: {err}"
    assert r.stdout == b""


def test_ref_cycle_refused(model_dir):
    """A $ref that only refers to itself has no instance: refused, not looped on."""
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, "s.json", json.dumps({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}))
        r = constrained(model_dir, "--json-schema", p, 1)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and "left recursion" in err, err


def test_bad_inputs(model_dir):
    with tempfile.TemporaryDirectory() as tmp:
        bad_json = write(tmp, "bad.json", "{not json")
        bad_gbnf = write(tmp, "bad.gbnf", 'root ::= "a" undefined-rule\n')
        missing = os.path.join(tmp, "missing.json")
        cases = [
            (["--json-schema", bad_json], "not valid JSON"),
            (["--grammar", bad_gbnf], "rule 'undefined-rule' is used but not defined"),
            (["--json-schema", missing], "missing.json"),
            (["--json-object", "--grammar", bad_gbnf], "give at most one"),
        ]
        for extra, want in cases:
            r = run([QWENC, model_dir, "--prompt", "x", "-n", "4"] + extra)
            err = r.stderr.decode(errors="replace")
            assert r.returncode == 2 and want in err, f"{extra}: exit {r.returncode}: {err}"
        r = run([QWENC, model_dir, "--tokens", "1 2", "--json-object"])
        assert r.returncode == 2 and "go with --prompt" in r.stderr.decode()


@pytest.mark.skipif(not os.path.isfile(REAL), reason=f"no real model at {REAL}")
def test_real_model_schema():
    """The real 0.5B Coder model, greedy and sampled: valid JSON that validates."""
    s = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city", "zip"], "additionalProperties": False},
        "status": {"enum": ["active", "retired"]}},
        "required": ["name", "age", "languages", "address", "status"], "additionalProperties": False}
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, "s.json", json.dumps(s))
        for temp, seed in (("0", 1), ("0.8", 2), ("0.8", 3)):
            r = constrained(REAL, "--json-schema", p, seed, temp=temp, n=400,
                            prompt="Describe a fictional software engineer as JSON.", timeout=300)
            text = output_of(r)
            check_valid(s, text)


def test_n_choices_each_constrained(server):
    """n > 1: every choice runs its own matcher over the same grammar."""
    s = {"type": "object", "properties": {"v": {"enum": ["a", "b", "c", 1, 2, None]},
                                          "w": {"type": "string", "maxLength": 4}},
         "required": ["v", "w"], "additionalProperties": False}
    j = ok_json(chat(server, "x", response_format=schema_format(s), temperature=1.0, seed=11, n=3, max_tokens=200))
    assert len(j["choices"]) == 3
    for c in j["choices"]:
        assert c["finish_reason"] == "stop", c
        check_valid(s, c["message"]["content"])


def test_forced_tool_call_with_response_format_and_grammar(server):
    """One grammar per answer (docs/grammar.md, "Which constraint applies"):
    a forced call wins over response_format (the answer is the call, as
    OpenAI answers); a GBNF grammar with tools is a 400 naming it."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    r = chat(server, "x", max_tokens=40, tools=tools, tool_choice="required", response_format={"type": "json_object"})
    ch = ok_json(r)["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["tool_calls"][0]["function"]["name"] == "f", ch
    msg = api_error(chat(server, "x", max_tokens=8, tools=tools, tool_choice="required", grammar="root ::= \"a\""),
                    400)
    assert names_field(msg, "grammar"), msg
    server.check_alive()
