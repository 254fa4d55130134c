/* grammar_internal.h - the compiled form of a grammar, shared by compile.c,
 * match.c and vocab.c.
 *
 * Every rule is a DFA over bytes plus "call" edges: a state may move on a
 * byte to another state of the same rule, or call a rule R and continue at
 * state t once R has matched (R's DFA reached an accepting state). States of
 * all rules are numbered globally. A rule body with character classes and
 * repetitions (a JSON string's characters, a number's digits) thus runs as
 * one table lookup per byte with no stack work; only rule references push
 * and pop frames.
 */
#ifndef QW_GRAMMAR_INTERNAL_H
#define QW_GRAMMAR_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "grammar/grammar.h"

typedef struct gcall {
    int32_t rule;   /* the rule called */
    int32_t ret;    /* the state to continue at in the caller */
} gcall;

struct qw_grammar {
    atomic_int refs;
    int n_states;
    int32_t *next;      /* [n_states * 256] byte transitions, -1 = none */
    uint8_t *accept;    /* [n_states] 1: the rule may end here */
    uint8_t *has_bytes; /* [n_states] 1: some byte transition exists */
    uint8_t *simple;    /* [n_states] 1: has bytes, no calls, not accepting: a head there
                           needs no expansion (the common case inside strings) */
    int32_t *call0;     /* [n_states + 1] calls of state s: calls[call0[s] .. call0[s+1]) */
    gcall *calls;
    int n_rules;
    int32_t *rule_start; /* [n_rules] start state of each rule's DFA */
    int root;            /* start rule */
};

/* The vocabulary trie, nodes in preorder: node i's subtree is [i, skip[i]).
 * The root (the empty prefix) is implicit; depth 1 = a token's first byte. */
typedef struct gtrie_node {
    int32_t skip;   /* index of the next node outside this subtree */
    int32_t tok;    /* a token whose bytes end here, -1 = none; more in dup[] */
    uint8_t byte;
    uint8_t depth;  /* 1..255 */
    uint8_t has_dup; /* 1: dup[tok] chains more tokens with these bytes (rare: read
                        only then, dup[] is a cache miss per token) */
} gtrie_node;

struct qw_gvocab {
    int n_vocab;
    int n_nodes;
    gtrie_node *nodes;
    int32_t *dup;    /* [n_vocab] next token with the same bytes, -1 = none */
    int32_t *eos;
    int n_eos;
    int max_depth;
    /* token bytes, for gmatch_accept_token */
    uint32_t *off;   /* [n_vocab + 1] into bytes; empty = never matches */
    char *bytes;
};

#endif
