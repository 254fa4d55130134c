/* stopstr.c - stop strings over streamed text (see stopstr.h). */
#include "server/stopstr.h"

#include <stdlib.h>
#include <string.h>

void stopstr_init(qw_stopstr *s, const char *const *stops, int n_stops) {
    memset(s, 0, sizeof *s);
    s->stops = stops;
    s->n_stops = stops ? n_stops : 0;
    s->hit_index = -1;
}

void stopstr_free(qw_stopstr *s) {
    free(s->held);
    free(s->out);
    s->held = s->out = NULL;
    s->out_cap = 0;
    s->held_len = s->held_cap = 0;
}

size_t stopstr_partial(const char *const *stops, int n_stops, const char *text, size_t len) {
    size_t best = 0;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        if (sl == 0) continue;
        /* Proper prefixes of stops[i] (length < sl), longest first. */
        size_t k = sl - 1 < len ? sl - 1 : len;
        for (; k > best; k--) {
            if (memcmp(text + len - k, stops[i], k) == 0) {
                best = k;
                break;
            }
        }
    }
    return best;
}

/* Earliest occurrence of any stop string in h[n]; returns its offset or -1. */
static long find_stop(const qw_stopstr *s, const char *h, size_t n, int *which) {
    long best = -1;
    for (int i = 0; i < s->n_stops; i++) {
        size_t sl = strlen(s->stops[i]);
        if (sl == 0 || sl > n) continue;
        for (size_t p = 0; p + sl <= n; p++) {
            if (best >= 0 && (long)p >= best) break;
            if (h[p] == s->stops[i][0] && memcmp(h + p, s->stops[i], sl) == 0) {
                best = (long)p;
                *which = i;
                break;
            }
        }
    }
    return best;
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

int stopstr_feed(qw_stopstr *s, const char *text, size_t len, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (s->hit) return 0;
    if (grow(&s->held, &s->held_cap, s->held_len + len + 1) != 0) return -1;
    memcpy(s->held + s->held_len, text, len);
    s->held_len += len;
    s->held[s->held_len] = '\0';

    int which = -1;
    long at = find_stop(s, s->held, s->held_len, &which);
    size_t release, keep;
    if (at >= 0) {
        s->hit = 1;
        s->hit_index = which;
        release = (size_t)at;
        keep = 0;
    } else {
        keep = stopstr_partial(s->stops, s->n_stops, s->held, s->held_len);
        release = s->held_len - keep;
    }
    if (release == 0) {
        if (s->hit) s->held_len = 0;
        return 0;
    }
    if (grow(&s->out, &s->out_cap, release + 1) != 0) return -1;
    memcpy(s->out, s->held, release);
    s->out[release] = '\0';
    memmove(s->held, s->held + s->held_len - keep, keep);
    s->held_len = keep;
    *out = s->out;
    *out_len = release;
    return 0;
}

void stopstr_flush(qw_stopstr *s, const char **out, size_t *out_len) {
    *out = s->held ? s->held : "";
    *out_len = s->hit ? 0 : s->held_len;
    s->held_len = 0;
}
