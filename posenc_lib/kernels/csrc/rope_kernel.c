/* RoPE on the CPU in one pass over memory: out[v] = R_m x[v] for every vector v of x.
 *
 * Eager PyTorch pays one trip through memory per operation, so x*cos - y*sin costs
 * several; this loop reads each element once, rotates it in float32 in registers and
 * writes it once. Built by posenc_lib/kernels/cpu.py; the plain form it must match
 * bit for bit is rotate_pairs() in posenc_lib/rope.py (so: no fused multiply-add, see the
 * build flags, and bfloat16 is rounded to nearest-even like torch's .to(torch.bfloat16);
 * only NaN payloads may differ, as they do between torch's own scalar and vector loops).
 *
 * x, out:   (n, seq, d) contiguous, float32 or bfloat16 (dtype 0 or 1), d even
 * cos, sin: (p, seq, d/2) contiguous float32; vector (i, m) uses table row (i / (n/p), m)
 * layout:   0 interleaved, pairs (2j, 2j+1); 1 half, pairs (j, j + d/2)
 * inverse:  1 rotates by -angle (sin negated): R_m^T, the backward pass of R_m
 */
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>
#include <string.h>

typedef struct {
    const void *x;
    void *out;
    const float *cos, *sin;
    int64_t n, seq, d, p, begin, end; /* vectors [begin, end) of the n*seq */
    int dtype, layout, inverse;
} job_t;

static inline float bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even; NaN -> 0x7FC0 */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (f != f) ? (uint16_t)0x7FC0 : (uint16_t)r;
}

/* `count` consecutive vectors of one sequence: vector k uses table row k (positions
 * m0, m0 + 1, ...), so x and out advance by d and the tables by h = d/2 per vector.
 * a and b are a pair's members; the order of operations is rotate_pairs's. */
#define ROTATE(T, LOAD, STORE, IA, IB)                                        \
    for (int64_t k = 0; k < count; ++k) {                                     \
        const T *x = x0 + k * 2 * h;                                          \
        T *o = o0 + k * 2 * h;                                                \
        const float *c = c0 + k * h, *s = s0 + k * h;                         \
        for (int64_t j = 0; j < h; ++j) {                                     \
            float a = LOAD(x[IA]), b = LOAD(x[IB]), cj = c[j];                \
            float sj = neg ? -s[j] : s[j]; /* exact: only the sign bit flips */ \
            float first = a * cj - b * sj;                                    \
            float second = a * sj + b * cj;                                   \
            o[IA] = STORE(first);                                             \
            o[IB] = STORE(second);                                            \
        }                                                                     \
    }
#define ID(v) (v)
#define ARGS(T) const T *restrict x0, T *restrict o0, const float *restrict c0, const float *restrict s0, \
                int64_t h, int64_t count, int neg

/* Each loop is compiled once per instruction set; the loader picks the best the CPU has. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), noinline))
#else
#define CLONES /* other CPUs and compilers: the compiler's default vectorisation */
#endif

CLONES static void rot_f32_interleaved(ARGS(float)) { ROTATE(float, ID, ID, 2 * j, 2 * j + 1) }
CLONES static void rot_f32_half(ARGS(float)) { ROTATE(float, ID, ID, j, j + h) }
CLONES static void rot_bf16_interleaved(ARGS(uint16_t)) { ROTATE(uint16_t, bf16_to_f32, f32_to_bf16, 2 * j, 2 * j + 1) }
CLONES static void rot_bf16_half(ARGS(uint16_t)) { ROTATE(uint16_t, bf16_to_f32, f32_to_bf16, j, j + h) }

static void run_job(const job_t *jb) {
    const int64_t h = jb->d / 2, group = jb->n / jb->p;
    int64_t v = jb->begin;
    while (v < jb->end) { /* one run of consecutive positions of sequence i per call */
        const int64_t i = v / jb->seq, m = v % jb->seq;
        const int64_t count = (jb->end - v < jb->seq - m) ? jb->end - v : jb->seq - m;
        const int64_t row = ((i / group) * jb->seq + m) * h;
        const float *c = jb->cos + row, *s = jb->sin + row;
        if (jb->dtype == 0) {
            const float *x = (const float *)jb->x + v * jb->d;
            float *o = (float *)jb->out + v * jb->d;
            if (jb->layout == 0) rot_f32_interleaved(x, o, c, s, h, count, jb->inverse);
            else rot_f32_half(x, o, c, s, h, count, jb->inverse);
        } else {
            const uint16_t *x = (const uint16_t *)jb->x + v * jb->d;
            uint16_t *o = (uint16_t *)jb->out + v * jb->d;
            if (jb->layout == 0) rot_bf16_interleaved(x, o, c, s, h, count, jb->inverse);
            else rot_bf16_half(x, o, c, s, h, count, jb->inverse);
        }
        v += count;
    }
}

/* Returns 0 on success, 1 on bad arguments. With OpenMP the vectors are split evenly over
 * `threads` threads of the process's OpenMP pool (the one torch uses, so no second pool
 * competes for the cores); without it, one thread does all. */
int posenc_rope(const void *x, void *out, const float *cos, const float *sin, int64_t n, int64_t seq, int64_t d,
                int64_t p, int dtype, int layout, int inverse, int threads) {
    if (n <= 0 || seq <= 0 || d <= 0 || d % 2 || p <= 0 || n % p || dtype < 0 || dtype > 1 || layout < 0 ||
        layout > 1 || inverse < 0 || inverse > 1)
        return 1;
    if (threads < 1) threads = 1;
    const int64_t total = n * seq;
#pragma omp parallel num_threads(threads)
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        job_t jb = {x, out, cos, sin, n, seq, d, p, total * t / nt, total * (t + 1) / nt, dtype, layout,
                    inverse};
        run_job(&jb);
    }
    return 0;
}
