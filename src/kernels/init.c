/* init.c - the kernel tables and run-time dispatch (dav1d style).
 *
 * Every level's table starts as a copy of the reference, then each ISA fill
 * upgrades it in ascending order: avx2 = ref + avx2 entries, avx512 = avx2 +
 * avx512 entries, neon = ref + neon entries. A level is offered only when it
 * is compiled in and the CPU/OS support it (cpu.c). QWENC_ISA forces a level;
 * an unknown or unavailable name is an error, never a silent fallback.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kernels/kernels_impl.h"

enum { LV_REF, LV_AVX2, LV_AVX512, LV_NEON, LV_COUNT };

static const char *const k_all_names[LV_COUNT] = {"ref", "avx2", "avx512", "neon"};
static const unsigned k_need[LV_COUNT] = {0, QW_CPU_AVX2, QW_CPU_AVX512 | QW_CPU_AVX2,
                                          QW_CPU_NEON};

static qw_kernels g_tab[LV_COUNT];
static int g_compiled[LV_COUNT];
static const char *g_names[LV_COUNT + 1]; /* compiled levels, NULL-terminated */
static const qw_kernels *g_cur;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Levels compiled into this binary: the ISA files have real bodies only on
 * their architecture (the Makefile gives *_avx2.c / *_avx512.c their flags on
 * x86-64). A fill function is called only when the CPU runs that level: the
 * compiler may use the file's ISA anywhere in it, even in the fill code. */
#if defined(__x86_64__)
enum { HAVE_AVX2 = 1, HAVE_AVX512 = 1, HAVE_NEON = 0 };
#elif defined(__aarch64__)
enum { HAVE_AVX2 = 0, HAVE_AVX512 = 0, HAVE_NEON = 1 };
#else
enum { HAVE_AVX2 = 0, HAVE_AVX512 = 0, HAVE_NEON = 0 };
#endif

static int cpu_has(int lv) { return (kernels_cpu_flags() & k_need[lv]) == k_need[lv]; }

static void build(void) {
    int n = 0;
    g_compiled[LV_REF] = 1;
    g_compiled[LV_AVX2] = HAVE_AVX2;
    g_compiled[LV_AVX512] = HAVE_AVX512;
    g_compiled[LV_NEON] = HAVE_NEON;
    kernels_fill_ref(&g_tab[LV_REF]);
    kernels_fill_attn_ref(&g_tab[LV_REF]);
    kernels_fill_qdot_ref(&g_tab[LV_REF]);
    kernels_fill_qdot_kquant_ref(&g_tab[LV_REF]);
    g_tab[LV_REF].name = "ref";

    g_tab[LV_AVX2] = g_tab[LV_REF];
    if (g_compiled[LV_AVX2] && cpu_has(LV_AVX2))
        g_compiled[LV_AVX2] = kernels_fill_avx2(&g_tab[LV_AVX2]) && kernels_fill_attn_avx2(&g_tab[LV_AVX2]) &&
                              kernels_fill_qdot_avx2(&g_tab[LV_AVX2]) &&
                              kernels_fill_qdot_kquant_avx2(&g_tab[LV_AVX2]);
    g_tab[LV_AVX2].name = "avx2";

    g_tab[LV_AVX512] = g_tab[LV_AVX2];
    if (g_compiled[LV_AVX512] && cpu_has(LV_AVX512))
        g_compiled[LV_AVX512] = kernels_fill_avx512(&g_tab[LV_AVX512]);
    /* vpdpbusd kernels only where the CPU has AVX512-VNNI (its own bit). */
    if (g_compiled[LV_AVX512] && cpu_has(LV_AVX512) && (kernels_cpu_flags() & QW_CPU_AVX512VNNI)) {
        kernels_fill_qdot_avx512vnni(&g_tab[LV_AVX512]);
        kernels_fill_qdot_kquant_avx512vnni(&g_tab[LV_AVX512]);
    }
    /* vdpbf16ps kernels only where the CPU has AVX512-BF16 (its own bit). */
    if (g_compiled[LV_AVX512] && cpu_has(LV_AVX512) && (kernels_cpu_flags() & QW_CPU_AVX512BF16))
        kernels_fill_bf16dot_avx512bf16(&g_tab[LV_AVX512]);
    g_tab[LV_AVX512].name = "avx512";

    g_tab[LV_NEON] = g_tab[LV_REF];
    if (g_compiled[LV_NEON] && cpu_has(LV_NEON))
        g_compiled[LV_NEON] = kernels_fill_neon(&g_tab[LV_NEON]) && kernels_fill_attn_neon(&g_tab[LV_NEON]) &&
                              kernels_fill_qdot_neon(&g_tab[LV_NEON]);
    g_tab[LV_NEON].name = "neon";

    for (int i = 0; i < LV_COUNT; i++)
        if (g_compiled[i]) g_names[n++] = k_all_names[i];
    g_names[n] = NULL;
    g_cur = &g_tab[LV_REF];
}

static void ensure(void) { pthread_once(&g_once, build); }

static int find(const char *name) {
    for (int i = 0; i < LV_COUNT; i++)
        if (g_compiled[i] && !strcmp(name, k_all_names[i])) return i;
    return -1;
}

static int usable(int lv) { return lv >= 0 && g_compiled[lv] && cpu_has(lv); }

static void known_list(char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; g_names[i]; i++) {
        if (i) strncat(buf, "|", cap - strlen(buf) - 1);
        strncat(buf, g_names[i], cap - strlen(buf) - 1);
    }
}

const char *const *kernels_level_names(void) {
    ensure();
    return g_names;
}

const qw_kernels *kernels_level(const char *name) {
    ensure();
    if (!name) return NULL;
    int lv = find(name);
    return usable(lv) ? &g_tab[lv] : NULL;
}

int kernels_use(const char *name, qw_err *err) {
    ensure();
    char known[64];
    int lv = name ? find(name) : -1;
    if (lv < 0) {
        known_list(known, sizeof known);
        return qw_errf(err, "kernels: unknown ISA level '%s' (this build has %s)",
                       name ? name : "(null)", known);
    }
    if (!usable(lv))
        return qw_errf(err, "kernels: ISA level '%s' is not supported by this CPU/OS (cpu: %s)",
                       name, kernels_cpu_features());
    g_cur = &g_tab[lv];
    return 0;
}

int kernels_init(qw_err *err) {
    ensure();
    const char *env = getenv("QWENC_ISA");
    if (env && *env && strcmp(env, "auto") != 0) {
        if (kernels_use(env, err) < 0) return qw_err_prefix(err, "QWENC_ISA");
    } else {
        int best = LV_REF;
        for (int i = 0; i < LV_COUNT; i++)
            if (usable(i)) best = i; /* levels are ascending per architecture */
        g_cur = &g_tab[best];
    }
    LOG_INFO("kernels: %s (cpu: %s)", g_cur->name, kernels_cpu_features());
    return 0;
}

const qw_kernels *kernels(void) {
    ensure();
    return g_cur;
}
