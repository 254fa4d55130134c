/* schema.c - JSON Schema -> GBNF (grammar.h: grammar_schema_to_gbnf).
 *
 * The subset is the one OpenAI's structured outputs (strict mode) accept,
 * see docs/grammar.md. Every schema node becomes one GBNF rule NAME-k;
 * $ref targets are memoised by their reference string, so recursive
 * schemas become recursive rules. Object properties come out in the
 * schema's order (required ones always, optional ones may be skipped), which
 * is what strict mode does too. Whitespace between tokens is allowed but
 * bounded (a newline and up to 20 blanks), numbers have at most 16 digits
 * per part: a model cannot run away with endless blanks or digits.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

typedef struct sb {
    char *buf;
    size_t len, cap;
    int oom;
} sb;

static void sb_add(sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *q = realloc(b->buf, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->buf = q;
        b->cap = nc;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void sb_printf(sb *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sb *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    sb_add(b, tmp, (size_t)n);
}

/* A GBNF literal spelling the bytes of s. */
static void sb_lit(sb *b, const char *s) {
    sb_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_add(b, e, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            sb_printf(b, "\\x%02X", *p);
        } else {
            sb_add(b, (const char *)p, 1);
        }
    }
    sb_add(b, "\"", 1);
}

typedef struct memo {
    char *ref;
    int rule;
} memo;

typedef struct conv {
    sb out;
    const char *name;
    const cJSON *root;
    qw_err *err;
    int failed;
    int n_rules;
    memo *refs;
    int n_refs, cap_refs;
    int depth;
} conv;

static int cfail(conv *c, const char *fmt, const char *a, const char *path) {
    if (!c->failed) {
        char msg[600];
        snprintf(msg, sizeof msg, fmt, a, path[0] ? path : "/");
        qw_errf(c->err, "json schema: %s", msg);
    }
    c->failed = 1;
    return -1;
}

static const char *const KNOWN[] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "prefixItems", "minItems", "maxItems", "anyOf", "allOf", "$ref", "$defs", "definitions",
    "minLength", "maxLength", "format", "title", "description", "default", "examples",
    "$schema", "$id", "$comment", NULL,
};

static int gen_rule(conv *c, const cJSON *s, const char *path);
static int gen_expr(conv *c, sb *e, const cJSON *s, const char *path);

static void rname(conv *c, sb *e, int k) { sb_printf(e, " %s-%d ", c->name, k); }

static void subpath(char *dst, size_t n, const char *path, const char *key) {
    snprintf(dst, n, "%s/%s", path, key);
}

static int is_type(const cJSON *t, const char *name) {
    return cJSON_IsString(t) && !strcmp(t->valuestring, name);
}

static int gen_ref(conv *c, sb *e, const char *ref, const char *path) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            rname(c, e, c->refs[i].rule);
            return 0;
        }
    const cJSON *target = NULL;
    if (!strcmp(ref, "#")) {
        target = c->root;
    } else if (!strncmp(ref, "#/$defs/", 8) || !strncmp(ref, "#/definitions/", 14)) {
        const char *key = ref[2] == '$' ? "$defs" : "definitions";
        const char *nm = ref + (ref[2] == '$' ? 8 : 14);
        const cJSON *defs = cJSON_GetObjectItemCaseSensitive(c->root, key);
        target = defs ? cJSON_GetObjectItemCaseSensitive(defs, nm) : NULL;
        if (!target) return cfail(c, "$ref '%s' at %s: no such definition", ref, path);
    } else {
        return cfail(c, "$ref '%s' at %s: only '#', '#/$defs/NAME' and '#/definitions/NAME' are supported", ref, path);
    }
    if (c->n_refs >= c->cap_refs) {
        int nc = c->cap_refs ? c->cap_refs * 2 : 8;
        memo *q = realloc(c->refs, (size_t)nc * sizeof(memo));
        if (!q) return cfail(c, "out of memory%s%s", "", "");
        c->refs = q;
        c->cap_refs = nc;
    }
    int k = c->n_rules++;
    c->refs[c->n_refs].ref = strdup(ref);
    if (!c->refs[c->n_refs].ref) return cfail(c, "out of memory%s%s", "", "");
    c->refs[c->n_refs++].rule = k;
    rname(c, e, k);
    /* the rule's body, written now; recursion finds the memo above */
    sb body = {0};
    char p2[512];
    snprintf(p2, sizeof p2, "%s", ref + 1);
    if (gen_expr(c, &body, target, p2)) {
        free(body.buf);
        return -1;
    }
    sb_printf(&c->out, "%s-%d ::=%s\n", c->name, k, body.buf ? body.buf : "");
    free(body.buf);
    return 0;
}

static int gen_json_literal(conv *c, sb *e, const cJSON *v, const char *path) {
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return cfail(c, "out of memory%s%s", "", "");
    sb_add(e, " ", 1);
    sb_lit(e, txt);
    sb_add(e, " ", 1);
    free(txt);
    return 0;
}

static int gen_string(conv *c, sb *e, const cJSON *s, const char *path) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    const char *N = c->name;
    if (fmt) {
        if (!cJSON_IsString(fmt)) return cfail(c, "'format' at %s%s must be a string", "", path);
        const char *f = fmt->valuestring;
        if (mn || mx) return cfail(c, "'format' %s with minLength/maxLength at %s is not supported", f, path);
        if (!strcmp(f, "date"))
            sb_printf(e, " \"\\\"\" %s-date \"\\\"\" ", N);
        else if (!strcmp(f, "time"))
            sb_printf(e, " \"\\\"\" %s-time \"\\\"\" ", N);
        else if (!strcmp(f, "date-time"))
            sb_printf(e, " \"\\\"\" %s-date \"T\" %s-time \"\\\"\" ", N, N);
        else if (!strcmp(f, "uuid"))
            sb_printf(e, " \"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12} \"\\\"\" ");
        else if (!strcmp(f, "email"))
            sb_printf(e, " \"\\\"\" [a-zA-Z0-9_+-] [a-zA-Z0-9._+-]{0,63} \"@\" [a-zA-Z0-9-]{1,63} (\".\" [a-zA-Z0-9-]{1,63}){1,4} \"\\\"\" ");
        else
            return cfail(c, "unsupported format '%s' at %s", f, path);
        return 0;
    }
    long lo = 0, hi = -1;
    if (mn) {
        if (!cJSON_IsNumber(mn) || mn->valuedouble < 0 || mn->valuedouble > 10000)
            return cfail(c, "'minLength' at %s%s must be an integer in [0, 10000]", "", path);
        lo = (long)mn->valuedouble;
    }
    if (mx) {
        if (!cJSON_IsNumber(mx) || mx->valuedouble < 0 || mx->valuedouble > 10000)
            return cfail(c, "'maxLength' at %s%s must be an integer in [0, 10000]", "", path);
        hi = (long)mx->valuedouble;
        if (hi < lo) return cfail(c, "'maxLength' at %s%s is below minLength", "", path);
    }
    if (!mn && !mx)
        sb_printf(e, " %s-string ", N);
    else if (hi < 0)
        sb_printf(e, " \"\\\"\" %s-char{%ld,} \"\\\"\" ", N, lo);
    else
        sb_printf(e, " \"\\\"\" %s-char{%ld,%ld} \"\\\"\" ", N, lo, hi);
    return 0;
}

static int gen_array(conv *c, sb *e, const cJSON *s, const char *path) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    char p2[512];
    long lo = 0, hi = -1;
    if (mn) {
        if (!cJSON_IsNumber(mn) || mn->valuedouble < 0 || mn->valuedouble > 1000)
            return cfail(c, "'minItems' at %s%s must be an integer in [0, 1000]", "", path);
        lo = (long)mn->valuedouble;
    }
    if (mx) {
        if (!cJSON_IsNumber(mx) || mx->valuedouble < 0 || mx->valuedouble > 1000)
            return cfail(c, "'maxItems' at %s%s must be an integer in [0, 1000]", "", path);
        hi = (long)mx->valuedouble;
        if (hi < lo) return cfail(c, "'maxItems' at %s%s is below minItems", "", path);
    }
    const char *N = c->name;
    int item = -1;
    if (items && !cJSON_IsFalse(items)) {
        subpath(p2, sizeof p2, path, "items");
        item = gen_rule(c, items, p2);
        if (item < 0) return -1;
    }
    sb_printf(e, " \"[\" %s-ws ", N);
    if (prefix) {
        if (!cJSON_IsArray(prefix)) return cfail(c, "'prefixItems' at %s%s must be an array", "", path);
        if (mn || mx) return cfail(c, "'prefixItems' with minItems/maxItems at %s%s is not supported", "", path);
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, prefix) {
            char key[64];
            snprintf(key, sizeof key, "prefixItems/%d", i);
            subpath(p2, sizeof p2, path, key);
            int k = gen_rule(c, it, p2);
            if (k < 0) return -1;
            if (i) sb_printf(e, " \",\" %s-ws ", N);
            rname(c, e, k);
            sb_printf(e, " %s-ws ", N);
            i++;
        }
        if (item >= 0 || !items) {
            const char *sep = i ? "\",\" " : "";
            if (item >= 0)
                sb_printf(e, " ( %s%s-ws %s-%d %s-ws )* ", sep, N, N, item, N);
            else
                sb_printf(e, " ( %s%s-ws %s-value %s-ws )* ", sep, N, N, N);
            if (!i) return cfail(c, "'prefixItems' at %s%s must not be empty", "", path);
        }
        sb_add(e, " \"]\" ", 5);
        return 0;
    }
    char one[128];
    if (item >= 0)
        snprintf(one, sizeof one, "%s-%d %s-ws", N, item, N);
    else
        snprintf(one, sizeof one, "%s-value %s-ws", N, N);
    if (items && cJSON_IsFalse(items)) {
        if (lo > 0) return cfail(c, "'items' false with minItems > 0 at %s%s", "", path);
        sb_add(e, " \"]\" ", 5);
        return 0;
    }
    if (hi == 0) {
        sb_add(e, " \"]\" ", 5);
        return 0;
    }
    /* first item, then the rest: {lo-1, hi-1} more after commas */
    char rest[64];
    if (hi < 0)
        snprintf(rest, sizeof rest, "{%ld,}", lo > 1 ? lo - 1 : 0);
    else
        snprintf(rest, sizeof rest, "{%ld,%ld}", lo > 1 ? lo - 1 : 0, hi - 1);
    sb_printf(e, " ( %s ( \",\" %s-ws %s )%s )%s \"]\" ", one, N, one, rest, lo > 0 ? "" : "?");
    return 0;
}

static int in_required(const cJSON *req, const char *k) {
    const cJSON *r;
    cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, k)) return 1;
    return 0;
}

static int gen_object(conv *c, sb *e, const cJSON *s, const char *path) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const char *N = c->name;
    char p2[512];
    if (props && !cJSON_IsObject(props)) return cfail(c, "'properties' at %s%s must be an object", "", path);
    if (req && !cJSON_IsArray(req)) return cfail(c, "'required' at %s%s must be an array", "", path);
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
        return cfail(c, "'additionalProperties' at %s%s must be a boolean or a schema", "", path);
    const cJSON *r;
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r)) return cfail(c, "'required' at %s%s must list strings", "", path);
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return cfail(c, "required property '%s' is not in 'properties' at %s", r->valuestring, path);
    }
    /* extra properties: only when there are no declared ones (keys of the
     * declared ones could otherwise repeat) */
    int extra = -2; /* -2 none, -1 any value, k: rule */
    if ((!add && !props) || (add && cJSON_IsTrue(add))) extra = -1;
    if (add && cJSON_IsObject(add)) {
        subpath(p2, sizeof p2, path, "additionalProperties");
        extra = gen_rule(c, add, p2);
        if (extra < 0) return -1;
    }
    if (extra != -2 && props && cJSON_GetArraySize(props) > 0)
        return cfail(c, "'additionalProperties' other than false together with 'properties' at %s%s is not supported (set it to false)", "", path);
    if (extra != -2) {
        char val[64];
        if (extra >= 0)
            snprintf(val, sizeof val, "%s-%d", N, extra);
        else
            snprintf(val, sizeof val, "%s-value", N);
        sb_printf(e, " \"{\" %s-ws ( %s-string %s-ws \":\" %s-ws %s %s-ws ( \",\" %s-ws %s-string %s-ws \":\" %s-ws %s %s-ws )* )? \"}\" ",
                  N, N, N, N, val, N, N, N, N, N, val, N);
        return 0;
    }
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n == 0) {
        sb_printf(e, " \"{\" %s-ws \"}\" ", N);
        return 0;
    }
    /* kv_i rules, then rest_i (after at least one) and first_i (none yet) */
    int *kv = malloc((size_t)n * 3 * sizeof(int));
    if (!kv) return cfail(c, "out of memory%s%s", "", "");
    int *rest = kv + n, *first = kv + 2 * n;
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        char key[300];
        snprintf(key, sizeof key, "properties/%s", p->string);
        subpath(p2, sizeof p2, path, key);
        int v = gen_rule(c, p, p2);
        if (v < 0) {
            free(kv);
            return -1;
        }
        cJSON *kj = cJSON_CreateString(p->string);
        char *ks = kj ? cJSON_PrintUnformatted(kj) : NULL;
        cJSON_Delete(kj);
        if (!ks) {
            free(kv);
            return cfail(c, "out of memory%s%s", "", "");
        }
        kv[i] = c->n_rules++;
        sb_printf(&c->out, "%s-%d ::= ", N, kv[i]);
        sb_lit(&c->out, ks);
        sb_printf(&c->out, " %s-ws \":\" %s-ws %s-%d %s-ws\n", N, N, N, v, N);
        free(ks);
        i++;
    }
    for (i = n - 1; i >= 0; i--) {
        int req_i = 0, j = 0;
        cJSON_ArrayForEach(p, props) {
            if (j++ == i) req_i = in_required(req, p->string);
        }
        rest[i] = c->n_rules++;
        first[i] = c->n_rules++;
        char nx_rest[64] = "", nx_first[64] = "\"\"";
        if (i + 1 < n) {
            snprintf(nx_rest, sizeof nx_rest, "%s-%d", N, rest[i + 1]);
            snprintf(nx_first, sizeof nx_first, "%s-%d", N, first[i + 1]);
        }
        if (req_i) {
            sb_printf(&c->out, "%s-%d ::= \",\" %s-ws %s-%d %s\n", N, rest[i], N, N, kv[i], nx_rest);
            sb_printf(&c->out, "%s-%d ::= %s-%d %s\n", N, first[i], N, kv[i], nx_rest);
        } else {
            sb_printf(&c->out, "%s-%d ::= ( \",\" %s-ws %s-%d )? %s\n", N, rest[i], N, N, kv[i], nx_rest);
            sb_printf(&c->out, "%s-%d ::= %s-%d %s | %s\n", N, first[i], N, kv[i], nx_rest, nx_first);
        }
    }
    sb_printf(e, " \"{\" %s-ws %s-%d \"}\" ", N, N, first[0]);
    free(kv);
    return 0;
}

static int gen_typed(conv *c, sb *e, const cJSON *s, const char *type, const char *path) {
    const char *N = c->name;
    if (!strcmp(type, "string")) return gen_string(c, e, s, path);
    if (!strcmp(type, "integer") || !strcmp(type, "number") || !strcmp(type, "boolean") ||
        !strcmp(type, "null")) {
        sb_printf(e, " %s-%s ", N, type);
        return 0;
    }
    if (!strcmp(type, "object")) return gen_object(c, e, s, path);
    if (!strcmp(type, "array")) return gen_array(c, e, s, path);
    return cfail(c, "unknown type '%s' at %s", type, path);
}

static int gen_expr(conv *c, sb *e, const cJSON *s, const char *path) {
    char p2[512];
    if (++c->depth > 64) return cfail(c, "schema nested too deeply at %s%s", "", path);
    int rc = -1;
    if (cJSON_IsTrue(s)) {
        sb_printf(e, " %s-value ", c->name);
        rc = 0;
        goto out;
    }
    if (!cJSON_IsObject(s)) {
        cfail(c, "the schema at %s%s must be an object or true", "", path);
        goto out;
    }
    const cJSON *kw;
    cJSON_ArrayForEach(kw, s) {
        int ok = 0;
        for (int i = 0; KNOWN[i]; i++) ok |= !strcmp(kw->string, KNOWN[i]);
        if (!ok) {
            cfail(c, "unsupported keyword '%s' at %s", kw->string, path);
            goto out;
        }
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref) {
        if (!cJSON_IsString(ref)) {
            cfail(c, "'$ref' at %s%s must be a string", "", path);
            goto out;
        }
        rc = gen_ref(c, e, ref->valuestring, path);
    } else if (cn) {
        rc = gen_json_literal(c, e, cn, path);
    } else if (en) {
        if (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0) {
            cfail(c, "'enum' at %s%s must be a non-empty array", "", path);
            goto out;
        }
        const cJSON *v;
        int first = 1;
        sb_add(e, " (", 2);
        cJSON_ArrayForEach(v, en) {
            if (!first) sb_add(e, " |", 2);
            first = 0;
            if (gen_json_literal(c, e, v, path)) goto out;
        }
        sb_add(e, ") ", 2);
        rc = 0;
    } else if (any || all) {
        const cJSON *list = any ? any : all;
        const char *kwn = any ? "anyOf" : "allOf";
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) {
            cfail(c, "'%s' at %s must be a non-empty array", kwn, path);
            goto out;
        }
        if (all && cJSON_GetArraySize(list) != 1) {
            cfail(c, "'allOf' at %s%s with more than one schema is not supported", "", path);
            goto out;
        }
        if (type || cJSON_GetObjectItemCaseSensitive(s, "properties")) {
            cfail(c, "'%s' next to 'type' or 'properties' at %s is not supported (put them inside each branch)", kwn, path);
            goto out;
        }
        int i = 0;
        const cJSON *it;
        sb_add(e, " (", 2);
        cJSON_ArrayForEach(it, list) {
            char key[64];
            snprintf(key, sizeof key, "%s/%d", kwn, i);
            subpath(p2, sizeof p2, path, key);
            int k = gen_rule(c, it, p2);
            if (k < 0) goto out;
            if (i++) sb_add(e, " |", 2);
            rname(c, e, k);
        }
        sb_add(e, ") ", 2);
        rc = 0;
    } else if (type) {
        if (cJSON_IsString(type)) {
            rc = gen_typed(c, e, s, type->valuestring, path);
        } else if (cJSON_IsArray(type) && cJSON_GetArraySize(type) > 0) {
            const cJSON *t;
            int first = 1;
            sb_add(e, " (", 2);
            cJSON_ArrayForEach(t, type) {
                if (!cJSON_IsString(t)) {
                    cfail(c, "'type' at %s%s must list strings", "", path);
                    goto out;
                }
                if (!first) sb_add(e, " |", 2);
                first = 0;
                if (gen_typed(c, e, s, t->valuestring, path)) goto out;
            }
            sb_add(e, ") ", 2);
            rc = 0;
        } else {
            cfail(c, "'type' at %s%s must be a string or a list of strings", "", path);
        }
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties")) {
        rc = gen_object(c, e, s, path);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) {
        rc = gen_array(c, e, s, path);
    } else {
        sb_printf(e, " %s-value ", c->name);
        rc = 0;
    }
    (void)is_type;
out:
    c->depth--;
    return rc;
}

/* Emit a rule for schema s; returns its number. */
static int gen_rule(conv *c, const cJSON *s, const char *path) {
    sb body = {0};
    if (gen_expr(c, &body, s, path)) {
        free(body.buf);
        return -1;
    }
    int k = c->n_rules++;
    sb_printf(&c->out, "%s-%d ::=%s\n", c->name, k, body.buf ? body.buf : "");
    free(body.buf);
    if (body.oom) return cfail(c, "out of memory%s%s", "", "");
    return k;
}

static void common_rules(conv *c) {
    const char *N = c->name;
    sb *o = &c->out;
    sb_printf(o, "%s-ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n", N);
    sb_printf(o, "%s-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n", N);
    sb_printf(o, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", N, N);
    sb_printf(o, "%s-integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n", N);
    sb_printf(o, "%s-number ::= %s-integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n", N, N);
    sb_printf(o, "%s-boolean ::= \"true\" | \"false\"\n", N);
    sb_printf(o, "%s-null ::= \"null\"\n", N);
    sb_printf(o, "%s-value ::= %s-object | %s-array | %s-string | %s-number | %s-boolean | %s-null\n", N, N, N, N, N,
              N, N);
    sb_printf(o, "%s-object ::= \"{\" %s-ws ( %s-string %s-ws \":\" %s-ws %s-value %s-ws ( \",\" %s-ws %s-string %s-ws \":\" %s-ws %s-value %s-ws )* )? \"}\"\n",
              N, N, N, N, N, N, N, N, N, N, N, N, N);
    sb_printf(o, "%s-array ::= \"[\" %s-ws ( %s-value %s-ws ( \",\" %s-ws %s-value %s-ws )* )? \"]\"\n", N, N, N, N,
              N, N, N);
    sb_printf(o, "%s-date ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n", N);
    sb_printf(o, "%s-time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n", N);
}

int grammar_schema_to_gbnf(const cJSON *schema, const char *name, char **gbnf, qw_err *err) {
    *gbnf = NULL;
    if (!name || !*name) name = "root";
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return qw_errf(err, "json schema: bad rule name '%s'", name);
    conv c = {.name = name, .root = schema, .err = err};
    common_rules(&c);
    /* "#" refers to the root: memoise it as rule 0 before generating */
    int rc = 0;
    sb top = {0};
    if (cJSON_IsObject(schema) || cJSON_IsTrue(schema)) {
        rc = gen_ref(&c, &top, "#", "");
    } else {
        rc = cfail(&c, "the schema at %s%s must be an object or true", "", "");
    }
    if (!rc) sb_printf(&c.out, "%s ::=%s\n", name, top.buf);
    free(top.buf);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    free(c.refs);
    if (!rc && c.out.oom) rc = qw_errf(err, "json schema: out of memory");
    if (rc) {
        free(c.out.buf);
        return -1;
    }
    *gbnf = c.out.buf;
    return 0;
}

int grammar_compile_json_schema(qw_grammar **out, const cJSON *schema, qw_err *err) {
    char *text = NULL;
    *out = NULL;
    if (grammar_schema_to_gbnf(schema, "root", &text, err)) return -1;
    int rc = grammar_compile_gbnf(out, text, strlen(text), "root", err);
    if (rc) qw_err_prefix(err, "json schema (compiled grammar)");
    free(text);
    return rc;
}

int grammar_compile_json_object(qw_grammar **out, qw_err *err) {
    cJSON *s = cJSON_CreateObject();
    if (!s || !cJSON_AddStringToObject(s, "type", "object")) {
        cJSON_Delete(s);
        return qw_errf(err, "json_object: out of memory");
    }
    int rc = grammar_compile_json_schema(out, s, err);
    cJSON_Delete(s);
    return rc;
}
