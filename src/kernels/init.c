/* init.c - the kernel tables and run-time dispatch (dav1d style).
 *
 * Every level's table starts as a copy of the level below it, then that
 * level's op-family tables are laid over it: avx2 = ref + avx2 entries,
 * avx512 = avx2 + avx512 entries, neon = ref + neon entries. A level is
 * offered only when it is compiled in and the CPU/OS support it (cpu.c).
 * QWENC_ISA forces a level;
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

/* Each level's op-family tables (kernels_impl.h), laid over the level it
 * starts from (k_base) in this order; an entry with a `need` bit is laid
 * only where the CPU has that instruction family. The SIMD tables exist
 * only on their architecture, so this list is what a build compiles in. */
static const int k_base[LV_COUNT] = {-1, LV_REF, LV_AVX2, LV_REF};
static const struct family {
    int level;
    unsigned need; /* extra QW_CPU_* bits, beyond the level's own */
    const qw_kernels *tab;
} k_families[] = {
    {LV_REF, 0, &kernels_matmul_ref},
    {LV_REF, 0, &kernels_bf16act_ref},
    {LV_REF, 0, &kernels_qdot_ref},
    {LV_REF, 0, &kernels_kquant_ref},
    {LV_REF, 0, &kernels_attn_ref},
    {LV_REF, 0, &kernels_elementwise_ref},
#if defined(__x86_64__)
    {LV_AVX2, 0, &kernels_matmul_avx2},
    {LV_AVX2, 0, &kernels_qdot_avx2},
    {LV_AVX2, 0, &kernels_kquant_avx2},
    {LV_AVX2, 0, &kernels_attn_avx2},
    {LV_AVX2, 0, &kernels_elementwise_avx2},
    {LV_AVX2, 0, &kernels_qrepack_avx2},
    {LV_AVX2, QW_CPU_AVXVNNI, &kernels_qrepack_avxvnni},
    {LV_AVX512, 0, &kernels_matmul_avx512},
    {LV_AVX512, 0, &kernels_elementwise_avx512},
    {LV_AVX512, 0, &kernels_attn_avx512},
    {LV_AVX512, QW_CPU_AVX512VNNI, &kernels_qdot_avx512vnni},
    {LV_AVX512, QW_CPU_AVX512VNNI, &kernels_kquant_avx512vnni},
    {LV_AVX512, QW_CPU_AVX512VNNI, &kernels_qrepack_avx512vnni},
    {LV_AVX512, QW_CPU_AVX512BF16, &kernels_bf16act_avx512bf16},
    {LV_AVX512, QW_CPU_AMXINT8, &kernels_qrepack_amx}, /* after the VNNI tables: over them */
#elif defined(__aarch64__)
    {LV_NEON, 0, &kernels_matmul_neon},
    {LV_NEON, 0, &kernels_qdot_neon},
    {LV_NEON, 0, &kernels_kquant_neon},
    {LV_NEON, 0, &kernels_qrepack_neon},
    {LV_NEON, 0, &kernels_attn_neon},
    {LV_NEON, 0, &kernels_elementwise_neon},
#endif
};

static int cpu_has(int lv) { return (kernels_cpu_flags() & k_need[lv]) == k_need[lv]; }

/* Every entry src sets replaces dst's. */
static void lay_over(qw_kernels *dst, const qw_kernels *src) {
#define LAY(field) \
    if (src->field) dst->field = src->field
    for (int t = 0; t < QW_DTYPE_COUNT; t++) {
        LAY(matmul[t]);
        LAY(matmul_q[t]);
        LAY(matmul_qr[t]);
        LAY(matmul_bf16act[t]);
        LAY(to_f32[t]);
    }
    for (int t = 0; t < QW_KV_TYPE_COUNT; t++) {
        LAY(attn16[t]);
        LAY(kv_store16[t]);
    }
    LAY(quantize_qa8);
    LAY(to_bf16);
    LAY(quantize_q8_0);
    LAY(rmsnorm);
    LAY(silu_mul);
    LAY(add);
    LAY(attn);
#undef LAY
}

/* Levels in ascending order, each from its base: a level is compiled in
 * when this build has a table for it, and filled only where the CPU runs
 * it (its table otherwise stays its base's, never offered). */
static void build(void) {
    int n = 0;
    for (int lv = 0; lv < LV_COUNT; lv++) {
        if (k_base[lv] >= 0) g_tab[lv] = g_tab[k_base[lv]];
        g_compiled[lv] = lv == LV_REF;
        for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++) {
            const struct family *f = &k_families[i];
            if (f->level != lv) continue;
            g_compiled[lv] = 1;
            if (cpu_has(lv) && (kernels_cpu_flags() & f->need) == f->need) lay_over(&g_tab[lv], f->tab);
        }
        g_tab[lv].name = k_all_names[lv];
        if (g_compiled[lv]) g_names[n++] = k_all_names[lv];
    }
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
    if (kernels_decode_prefetch())
        LOG_INFO("kernels: %s (cpu: %s; decode prefetch %d bytes ahead)", g_cur->name, kernels_cpu_features(),
                 kernels_decode_prefetch());
    else
        LOG_INFO("kernels: %s (cpu: %s)", g_cur->name, kernels_cpu_features());
    return 0;
}

const qw_kernels *kernels(void) {
    ensure();
    return g_cur;
}
