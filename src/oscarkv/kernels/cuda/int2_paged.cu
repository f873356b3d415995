// INT2 paged decode attention and page-wise append for the "tile16" GPU pool layout (oscarkv.kernels).
//
// Built at first use by oscarkv/kernels/cuda_build.py (nvcc -> shared library, called through ctypes with
// raw device pointers and the current torch stream), so it needs no torch headers.
//
// Tile16 layout (pure function of the logical format; torch transform both ways in kernels/layout.py):
// one (int2 block, KV head) = 16 tokens x head_dim codes. The block's k_codes bytes hold, for lane l of a
// warp, words [l*NW, (l+1)*NW) (NW = head_dim / 32), so one 128-bit (D=128) or 64-bit (D=64) load is
// exactly lane l's mma.m16n8k16 A fragments for the whole tile. Word w, 2-bit field j (bits 2j, 2j+1):
//   i = j & 7, half = j >> 3, step = 2w + (i >> 2), r = i & 3, g = l >> 2, t = l & 3
//   row = g + 8 * (r & 1), col = 2t + 8 * (r >> 1) + half
//   K: token = row, dim = 16 * step + col        (A = K codes, tokens on M, head_dim on K)
//   V: token = col, dim = 16 * step + row        (A = V^T codes, head_dim on M, tokens on K)
// Scale / zero of the block are stored in token order 0,8,1,9,...,7,15, so lane (g, t) reads the pair
// (token g, token g + 8) with one 32-bit load.
//
// Decode (one launch): grid (n_hp_splits + n_int2_splits, batch * num_kv_heads); each CTA takes one
// token range of one tier for one KV head and all its query heads (GQA group <= 8 on the MMA's N).
//   scores  S[tok, head]  = K codes (A, fp16 from a LOP3 + one HFMA2 per two codes) x q (B)
//   logits                = s_tok * S + z_tok * sum(q)                  (scale / zero by algebra, fp32)
//   O^T[dim, head]       += V^T codes (A) x P'[tok, head],  P' = p * s_tok moved from the C to the B
//                           fragment with movmatrix; sum_tok p * z_tok kept as one extra accumulator.
// The BF16 sink / recent tier runs as extra splits of the same launch with bf16 (or fp16) MMAs. The
// split results are merged by the last CTA of each (batch, KV head) (atomic counter, reset by that CTA),
// so the whole call is one kernel, with no host sync or allocation: CUDA-graph capturable.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// Parameter blocks: outside the anonymous namespace so the extern "C" entry points keep external linkage.
struct DecodeParams {
  const void* q;  // [B, HQ, D] T
  int64_t q_sb, q_sh;
  const uint8_t* k_codes;  // [nb, HKV, 16, D/4] tile16
  const uint8_t* v_codes;
  int64_t c_sblk, c_sh;  // bytes
  const __half* k_scale;  // [nb, HKV, 16, 1] tile16 token order
  const __half* k_zero;
  const __half* v_scale;
  const __half* v_zero;
  int64_t s_sblk, s_sh;  // elements
  const void* k_hp;  // [nb, HKV, 16, D] T
  const void* v_hp;
  int64_t h_sblk, h_sh, h_srow;  // elements
  const int32_t* hp_table;
  int64_t hp_table_s;
  const int32_t* hp_lens;
  const int32_t* int2_table;
  int64_t int2_table_s;
  const int32_t* int2_lens;
  float* o_part;    // [B * HKV, NS, G, D]
  float* lse_part;  // [B * HKV, NS, G]
  int32_t* counters;  // [B * HKV], zero between calls
  void* out;          // [B, HQ, D] T
  int64_t o_sb, o_sh;
  int hkv, group, n_hp, n_int2;
  float scale_log2;
  int probe;  // 0 = normal; 1 = INT2 tier loads only (bandwidth probe for BENCHMARKS.md, output is garbage)
};

struct AppendParams {
  const void* k;  // new rows [R, HKV, D] T
  const void* v;
  int64_t k_sr, k_sh, v_sr, v_sh;
  const int64_t* hp_slots;   // [R] (-1 = none)
  int n_rows;
  const int64_t* page_dst;   // [P] int2 block ids
  const int64_t* page_src;   // [P, 16]: >= 0 hp slot, < 0: new row -(x + 1)
  int n_pages;
  uint8_t* k_codes;
  uint8_t* v_codes;
  int64_t c_sblk, c_sh;
  __half* k_scale;
  __half* k_zero;
  __half* v_scale;
  __half* v_zero;
  int64_t s_sblk, s_sh;
  void* k_hp;
  void* v_hp;
  int64_t h_sblk, h_sh, h_srow;
  int hkv, clip_k, clip_v;  // clip index k (0-based) or -1
  int do_pages, do_rows;
};

namespace {

constexpr int kTile = 16;

template <typename T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};
template <> struct MmaType<__half> {
  static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t r;  // (a & mask) | magic
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));
  return r;
}
__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

// Eight fp16x2 registers (codes 0..3, exact) from one 32-bit word: field pair i sits at bits
// 2(i&3) + 8(i>>2) of each 16-bit half. OR-ing it under the exponent of 1024 (0x6400) gives
// 1024 + 4^p c; one HFMA2 (x * 4^-p - 1024 * 4^-p) brings it back to c. 17 instructions per 16 codes.
__device__ __forceinline__ void unpack8(uint32_t w, uint32_t o[8]) {
  const uint32_t m = 0x64006400u;
  uint32_t w2 = w >> 8;
  o[0] = hfma2(lop3_and_or(w, 0x00030003u, m), 0x3C003C00u, 0xE400E400u);
  o[1] = hfma2(lop3_and_or(w, 0x000C000Cu, m), 0x34003400u, 0xDC00DC00u);
  o[2] = hfma2(lop3_and_or(w, 0x00300030u, m), 0x2C002C00u, 0xD400D400u);
  o[3] = hfma2(lop3_and_or(w, 0x00C000C0u, m), 0x24002400u, 0xCC00CC00u);
  o[4] = hfma2(lop3_and_or(w2, 0x00030003u, m), 0x3C003C00u, 0xE400E400u);
  o[5] = hfma2(lop3_and_or(w2, 0x000C000Cu, m), 0x34003400u, 0xDC00DC00u);
  o[6] = hfma2(lop3_and_or(w2, 0x00300030u, m), 0x2C002C00u, 0xD400D400u);
  o[7] = hfma2(lop3_and_or(w2, 0x00C000C0u, m), 0x24002400u, 0xCC00CC00u);
}

template <int NW> struct Words { uint32_t w[NW]; };

template <int NW>
__device__ __forceinline__ Words<NW> load_words(const uint8_t* p) {
  Words<NW> r;
  if constexpr (NW == 4) {
    uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));
    r.w[0] = v.x; r.w[1] = v.y; r.w[2] = v.z; r.w[3] = v.w;
  } else {
    uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
    r.w[0] = v.x; r.w[1] = v.y;
  }
  return r;
}

__device__ __forceinline__ float2 h2f(uint32_t x) {
  __half2 h = *reinterpret_cast<__half2*>(&x);
  return __half22float2(h);
}

// Online-softmax state of one warp: lane (g, t) owns heads 2t, 2t+1 and tokens g, g+8 of each tile.
template <int D>
struct WarpState {
  float m[2], l[2], z[2];
  float acc[D / 16][4];
};

template <typename T, int D, int NWARP, int NPRE, int MINB, int STAGES>
__global__ void __launch_bounds__(NWARP * 32, MINB) int2_decode_kernel(const DecodeParams p) {
  constexpr int KS = D / 16;  // k-steps of the score MMA = m-tiles of the output MMA
  constexpr int NW = D / 32;  // 32-bit code words per lane per tile
  using M = MmaType<T>;
  const int split = blockIdx.x;
  const int bh = blockIdx.y;
  const int b = bh / p.hkv, kvh = bh % p.hkv;
  const int G = p.group;
  const int NS = p.n_hp + p.n_int2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const bool hp = split < p.n_hp;
  // one static buffer: the cp.async ring during the loop, then the per-warp partial outputs
  constexpr int RING_BYTES = NWARP * STAGES * (8 * D + 128);
  constexpr int EPI_BYTES = NWARP * 8 * D * 4;
  __shared__ __align__(16) uint8_t smem_raw[RING_BYTES > EPI_BYTES ? RING_BYTES : EPI_BYTES];

  // ---- q as the B operand: B[k = dim][n = head], lane holds head g, dims 16ks + 2t + {0,1,8,9}
  const T* qrow = reinterpret_cast<const T*>(p.q) + b * p.q_sb + (int64_t)(kvh * G + (g < G ? g : 0)) * p.q_sh;
  uint32_t qb[KS][2];
  float qsum = 0.f;
#pragma unroll
  for (int ks = 0; ks < KS; ks++) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float lo = 0.f, hi = 0.f;
      if (g < G) {
        lo = M::to_float(qrow[16 * ks + 2 * t + 8 * h]);
        hi = M::to_float(qrow[16 * ks + 2 * t + 8 * h + 1]);
      }
      qsum += lo + hi;
      // INT2 tier: fp16 operands (codes are fp16); bf16 -> fp16 is exact for |q| in [6e-5, 65504].
      qb[ks][h] = hp ? M::pack(lo, hi) : MmaType<__half>::pack(lo, hi);
    }
  }
  qsum += __shfl_xor_sync(0xffffffffu, qsum, 1);
  qsum += __shfl_xor_sync(0xffffffffu, qsum, 2);
  // lane needs sum(q) of heads 2t, 2t+1 (held by lanes 8t and 8t + 4)
  const float qs0 = __shfl_sync(0xffffffffu, qsum, 8 * t);
  const float qs1 = __shfl_sync(0xffffffffu, qsum, 8 * t + 4);

  WarpState<D> st;
  st.m[0] = st.m[1] = -1e30f;
  st.l[0] = st.l[1] = st.z[0] = st.z[1] = 0.f;
#pragma unroll
  for (int i = 0; i < KS; i++) st.acc[i][0] = st.acc[i][1] = st.acc[i][2] = st.acc[i][3] = 0.f;

  // softmax update from logits c (already in log2 units, masked = -inf); returns p in c
  auto softmax = [&](float c[4], float alpha[2]) {
    float mx0 = fmaxf(c[0], c[2]), mx1 = fmaxf(c[1], c[3]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
    }
    const float n0 = fmaxf(st.m[0], mx0), n1 = fmaxf(st.m[1], mx1);
    alpha[0] = exp2f(st.m[0] - n0);
    alpha[1] = exp2f(st.m[1] - n1);
    st.m[0] = n0;
    st.m[1] = n1;
    c[0] = exp2f(c[0] - n0);
    c[1] = exp2f(c[1] - n1);
    c[2] = exp2f(c[2] - n0);
    c[3] = exp2f(c[3] - n1);
    st.l[0] = st.l[0] * alpha[0] + c[0] + c[2];
    st.l[1] = st.l[1] * alpha[1] + c[1] + c[3];
    // the running max rarely moves after the first tiles: skip the accumulator rescale when no head of
    // the warp needs it (warp-uniform branch)
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int i = 0; i < KS; i++) {
        st.acc[i][0] *= alpha[0];
        st.acc[i][1] *= alpha[1];
        st.acc[i][2] *= alpha[0];
        st.acc[i][3] *= alpha[1];
      }
    }
  };

  // one INT2 tile: codes (registers) + scale/zero pairs of tokens (g, g + 8) -> softmax state
  auto int2_tile = [&](const Words<NW>& kw, const Words<NW>& vw, uint32_t ksc, uint32_t kz, uint32_t vsc,
                       uint32_t vz, int tile) {
    const int len = p.int2_lens[b];
    // scores: two accumulators break the MMA dependency chain
    float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < NW; w++) {
      uint32_t a[8];
      unpack8(kw.w[w], a);
      MmaType<__half>::mma(s0, a, qb[2 * w][0], qb[2 * w][1]);
      MmaType<__half>::mma(s1, a + 4, qb[2 * w + 1][0], qb[2 * w + 1][1]);
    }
    const float2 ks2 = h2f(ksc), kz2 = h2f(kz), vs2 = h2f(vsc), vz2 = h2f(vz);
    const int valid = len - tile * kTile;
    const bool r0 = g < valid, r1 = g + 8 < valid;
    float c4[4];
    c4[0] = r0 ? (ks2.x * (s0[0] + s1[0]) + kz2.x * qs0) * p.scale_log2 : -INFINITY;
    c4[1] = r0 ? (ks2.x * (s0[1] + s1[1]) + kz2.x * qs1) * p.scale_log2 : -INFINITY;
    c4[2] = r1 ? (ks2.y * (s0[2] + s1[2]) + kz2.y * qs0) * p.scale_log2 : -INFINITY;
    c4[3] = r1 ? (ks2.y * (s0[3] + s1[3]) + kz2.y * qs1) * p.scale_log2 : -INFINITY;
    float alpha[2];
    softmax(c4, alpha);
    // masked tokens have p = 0: zero their scale/zero too (stale slots may hold anything finite)
    const float vsa = r0 ? vs2.x : 0.f, vsb = r1 ? vs2.y : 0.f;
    const float vza = r0 ? vz2.x : 0.f, vzb = r1 ? vz2.y : 0.f;
    st.z[0] = st.z[0] * alpha[0] + c4[0] * vza + c4[2] * vzb;
    st.z[1] = st.z[1] * alpha[1] + c4[1] * vza + c4[3] * vzb;
    const uint32_t b0 = movmatrix_t(MmaType<__half>::pack(c4[0] * vsa, c4[1] * vsa));
    const uint32_t b1 = movmatrix_t(MmaType<__half>::pack(c4[2] * vsb, c4[3] * vsb));
#pragma unroll
    for (int w = 0; w < NW; w++) {
      uint32_t a[8];
      unpack8(vw.w[w], a);
      MmaType<__half>::mma(st.acc[2 * w], a, b0, b1);
      MmaType<__half>::mma(st.acc[2 * w + 1], a + 4, b0, b1);
    }
  };

  if (hp) {
    // ---------------------------------------------------------------- BF16 sink + recent tier
    const int len = p.hp_lens[b];
    const int ntile = (len + kTile - 1) / kTile;
    const int per = (ntile + p.n_hp - 1) / p.n_hp;
    const int t0 = split * per, t1 = min(t0 + per, ntile);
    const int32_t* table = p.hp_table + b * p.hp_table_s;
    const T* khp = reinterpret_cast<const T*>(p.k_hp);
    const T* vhp = reinterpret_cast<const T*>(p.v_hp);
    for (int tile = t0 + warp; tile < t1; tile += NWARP) {
      const int64_t base = (int64_t)table[tile] * p.h_sblk + (int64_t)kvh * p.h_sh;
      const int valid = len - tile * kTile;  // rows < valid are real tokens
      const T* K = khp + base;
      const T* V = vhp + base;
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      const bool r0 = g < valid, r1 = g + 8 < valid;
#pragma unroll
      for (int ks = 0; ks < KS; ks++) {
        uint32_t a[4];
        const int c = 16 * ks + 2 * t;
        a[0] = r0 ? *reinterpret_cast<const uint32_t*>(K + g * p.h_srow + c) : 0u;
        a[1] = r1 ? *reinterpret_cast<const uint32_t*>(K + (g + 8) * p.h_srow + c) : 0u;
        a[2] = r0 ? *reinterpret_cast<const uint32_t*>(K + g * p.h_srow + c + 8) : 0u;
        a[3] = r1 ? *reinterpret_cast<const uint32_t*>(K + (g + 8) * p.h_srow + c + 8) : 0u;
        M::mma(s, a, qb[ks][0], qb[ks][1]);
      }
      float c4[4];
      c4[0] = r0 ? s[0] * p.scale_log2 : -INFINITY;
      c4[1] = r0 ? s[1] * p.scale_log2 : -INFINITY;
      c4[2] = r1 ? s[2] * p.scale_log2 : -INFINITY;
      c4[3] = r1 ? s[3] * p.scale_log2 : -INFINITY;
      float alpha[2];
      softmax(c4, alpha);
      const uint32_t b0 = movmatrix_t(M::pack(c4[0], c4[1]));
      const uint32_t b1 = movmatrix_t(M::pack(c4[2], c4[3]));
      // V^T as A: a0 = V[tok 2t][dim], V[tok 2t+1][dim] ...
      const int ta = 2 * t, tb = 2 * t + 8;
      const bool va0 = ta < valid, va1 = ta + 1 < valid, vb0 = tb < valid, vb1 = tb + 1 < valid;
      const unsigned short* Vu = reinterpret_cast<const unsigned short*>(V);
#pragma unroll
      for (int mt = 0; mt < KS; mt++) {
        const int d0 = 16 * mt + g, d1 = d0 + 8;
        auto ld = [&](bool ok, int tok, int d) -> uint32_t { return ok ? (uint32_t)Vu[tok * p.h_srow + d] : 0u; };
        uint32_t a[4];
        a[0] = ld(va0, ta, d0) | (ld(va1, ta + 1, d0) << 16);
        a[1] = ld(va0, ta, d1) | (ld(va1, ta + 1, d1) << 16);
        a[2] = ld(vb0, tb, d0) | (ld(vb1, tb + 1, d0) << 16);
        a[3] = ld(vb0, tb, d1) | (ld(vb1, tb + 1, d1) << 16);
        M::mma(st.acc[mt], a, b0, b1);
      }
    }
  } else if constexpr (STAGES > 0) {
    // ---------------------------------------------------------------- INT2 tier, cp.async ring
    // Each warp streams its own tiles through a STAGES-deep shared-memory ring (cp.async, no registers
    // held per tile in flight); block ids come 32 tiles ahead, one per lane, broadcast with a shuffle.
    constexpr int TB = 8 * D + 128;  // K codes 4D bytes | V codes 4D | k_scale, k_zero, v_scale, v_zero 32 B each
    constexpr int CH = TB / 16;       // 16-byte chunks per tile
    uint8_t* ring = smem_raw + warp * STAGES * TB;
    const int sp = split - p.n_hp;
    const int len = p.int2_lens[b];
    const int ntile = (len + kTile - 1) / kTile;
    const int per = (ntile + p.n_int2 - 1) / p.n_int2;
    const int t0 = sp * per, t1 = min(t0 + per, ntile);
    const int32_t* table = p.int2_table + b * p.int2_table_s;
    const int first = t0 + warp;
    const int nmine = first < t1 ? (t1 - first + NWARP - 1) / NWARP : 0;  // tiles of this warp
    auto tbl = [&](int k) { return k < nmine ? table[first + k * NWARP] : 0; };
    int blk_cur = 0, blk_nxt = tbl(lane);
    auto issue = [&](int k) {
      if ((k & 31) == 0) {
        blk_cur = blk_nxt;
        blk_nxt = tbl(k + 32 + lane);
      }
      const int blk = __shfl_sync(0xffffffffu, blk_cur, k & 31);
      if (k < nmine) {
        uint8_t* dst = ring + (k % STAGES) * TB;
        for (int c = lane; c < CH; c += 32) {
          const uint8_t* src;
          if (c < D / 4) {
            src = p.k_codes + (int64_t)blk * p.c_sblk + (int64_t)kvh * p.c_sh + c * 16;
          } else if (c < D / 2) {
            src = p.v_codes + (int64_t)blk * p.c_sblk + (int64_t)kvh * p.c_sh + (c - D / 4) * 16;
          } else {
            const int m = c - D / 2;
            const __half* t = m < 2 ? p.k_scale : m < 4 ? p.k_zero : m < 6 ? p.v_scale : p.v_zero;
            src = reinterpret_cast<const uint8_t*>(t + (int64_t)blk * p.s_sblk + (int64_t)kvh * p.s_sh) + (m & 1) * 16;
          }
          const uint32_t d32 = (uint32_t)__cvta_generic_to_shared(dst + c * 16);
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d32), "l"(src));
        }
      }
      asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int k = 0; k < STAGES - 1; k++) issue(k);
    for (int k = 0; k < nmine; k++) {
      asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
      __syncwarp();
      const uint8_t* src = ring + (k % STAGES) * TB;
      Words<NW> kw, vw;
#pragma unroll
      for (int w = 0; w < NW; w++) {
        kw.w[w] = reinterpret_cast<const uint32_t*>(src + lane * (NW * 4))[w];
        vw.w[w] = reinterpret_cast<const uint32_t*>(src + 4 * D + lane * (NW * 4))[w];
      }
      const uint32_t* meta = reinterpret_cast<const uint32_t*>(src + 8 * D);
      const uint32_t ksc = meta[g], kz = meta[8 + g], vsc = meta[16 + g], vz = meta[24 + g];
      __syncwarp();  // every lane has read stage k % STAGES before it is refilled below
      issue(k + STAGES - 1);
      if (p.probe) {  // keep the loads alive without the math
        st.z[0] += __uint_as_float((kw.w[0] ^ vw.w[NW - 1] ^ ksc ^ kz ^ vsc ^ vz) & 0x3f800000u);
        continue;
      }
      int2_tile(kw, vw, ksc, kz, vsc, vz, first + k * NWARP);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
  } else {
    // ---------------------------------------------------------------- INT2 history tier
    const int sp = split - p.n_hp;
    const int len = p.int2_lens[b];
    const int ntile = (len + kTile - 1) / kTile;
    const int per = (ntile + p.n_int2 - 1) / p.n_int2;
    const int t0 = sp * per, t1 = min(t0 + per, ntile);
    const int32_t* table = p.int2_table + b * p.int2_table_s;
    const int64_t hoff_c = (int64_t)kvh * p.c_sh + lane * (NW * 4);
    const int64_t hoff_s = (int64_t)kvh * p.s_sh + 2 * g;
    Words<NW> kbuf[NPRE], vbuf[NPRE];
    uint32_t mbuf[NPRE][4];
    int blk[NPRE];
    // prologue: block ids of the first NPRE tiles of this warp, then their data, then the next ids
#pragma unroll
    for (int j = 0; j < NPRE; j++) {
      const int tile = t0 + warp + j * NWARP;
      blk[j] = tile < t1 ? table[tile] : 0;
    }
#pragma unroll
    for (int j = 0; j < NPRE; j++) {
      const int tile = t0 + warp + j * NWARP;
      if (tile < t1) {
        const int64_t cb = (int64_t)blk[j] * p.c_sblk + hoff_c;
        const int64_t sb = (int64_t)blk[j] * p.s_sblk + hoff_s;
        kbuf[j] = load_words<NW>(p.k_codes + cb);
        vbuf[j] = load_words<NW>(p.v_codes + cb);
        mbuf[j][0] = __ldcs(reinterpret_cast<const unsigned int*>(p.k_scale + sb));
        mbuf[j][1] = __ldcs(reinterpret_cast<const unsigned int*>(p.k_zero + sb));
        mbuf[j][2] = __ldcs(reinterpret_cast<const unsigned int*>(p.v_scale + sb));
        mbuf[j][3] = __ldcs(reinterpret_cast<const unsigned int*>(p.v_zero + sb));
      }
      const int nxt = tile + NPRE * NWARP;
      blk[j] = nxt < t1 ? table[nxt] : 0;
    }
    for (int base = t0 + warp; base < t1; base += NPRE * NWARP) {
#pragma unroll
      for (int j = 0; j < NPRE; j++) {
        const int tile = base + j * NWARP;
        if (tile < t1) {
          const Words<NW> kw = kbuf[j], vw = vbuf[j];
          const uint32_t ksc = mbuf[j][0], kz = mbuf[j][1], vsc = mbuf[j][2], vz = mbuf[j][3];
          // refill this stage with the tile NPRE steps ahead, and fetch the block id after it
          const int nxt = tile + NPRE * NWARP;
          if (nxt < t1) {
            const int64_t cb = (int64_t)blk[j] * p.c_sblk + hoff_c;
            const int64_t sb = (int64_t)blk[j] * p.s_sblk + hoff_s;
            kbuf[j] = load_words<NW>(p.k_codes + cb);
            vbuf[j] = load_words<NW>(p.v_codes + cb);
            mbuf[j][0] = __ldcs(reinterpret_cast<const unsigned int*>(p.k_scale + sb));
            mbuf[j][1] = __ldcs(reinterpret_cast<const unsigned int*>(p.k_zero + sb));
            mbuf[j][2] = __ldcs(reinterpret_cast<const unsigned int*>(p.v_scale + sb));
            mbuf[j][3] = __ldcs(reinterpret_cast<const unsigned int*>(p.v_zero + sb));
            const int nn = nxt + NPRE * NWARP;
            blk[j] = nn < t1 ? table[nn] : 0;
          }
          int2_tile(kw, vw, ksc, kz, vsc, vz, tile);
        }
      }
    }
  }

  // ---- reduce the per-lane partial sums over the 8 lanes (g) that share a head
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], o);
      st.z[h] += __shfl_xor_sync(0xffffffffu, st.z[h], o);
    }
  }
  __syncthreads();  // all warps are done with the ring before it becomes sm_o
  float (*sm_o)[8][D] = reinterpret_cast<float (*)[8][D]>(smem_raw);
  __shared__ float sm_m[NWARP][8], sm_l[NWARP][8];
  __shared__ int sm_last;
#pragma unroll
  for (int mt = 0; mt < KS; mt++) {
    sm_o[warp][2 * t][16 * mt + g] = st.acc[mt][0] + st.z[0];
    sm_o[warp][2 * t + 1][16 * mt + g] = st.acc[mt][1] + st.z[1];
    sm_o[warp][2 * t][16 * mt + g + 8] = st.acc[mt][2] + st.z[0];
    sm_o[warp][2 * t + 1][16 * mt + g + 8] = st.acc[mt][3] + st.z[1];
  }
  if (g == 0) {
    sm_m[warp][2 * t] = st.m[0];
    sm_m[warp][2 * t + 1] = st.m[1];
    sm_l[warp][2 * t] = st.l[0];
    sm_l[warp][2 * t + 1] = st.l[1];
  }
  __syncthreads();
  float* opart = p.o_part + ((int64_t)bh * NS + split) * G * D;
  float* lpart = p.lse_part + ((int64_t)bh * NS + split) * G;
  for (int idx = threadIdx.x; idx < G * D; idx += NWARP * 32) {
    const int h = idx / D, d = idx % D;
    float mm = -1e30f;
#pragma unroll
    for (int w = 0; w < NWARP; w++) mm = fmaxf(mm, sm_m[w][h]);
    float L = 0.f, O = 0.f;
#pragma unroll
    for (int w = 0; w < NWARP; w++) {
      const float e = exp2f(sm_m[w][h] - mm);
      L += e * sm_l[w][h];
      O += e * sm_o[w][h][d];
    }
    // Issue 11: a NaN score (NaN scale of a non-finite row) makes L NaN; "L > 0" would turn it into an
    // empty split, so test for zero instead and let NaN reach the output.
    opart[idx] = L != 0.f ? O / L : 0.f;
    if (d == 0) lpart[h] = L != 0.f ? mm + log2f(L) : -INFINITY;
  }
  // ---- the last CTA of this (batch, KV head) merges all splits (threadFenceReduction pattern)
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int prev = atomicAdd(p.counters + bh, 1);
    sm_last = prev == NS - 1;
  }
  __syncthreads();
  if (!sm_last) return;
  __threadfence();
  // merge, parallel over splits: weights w[s][h] = 2^(lse - max) / sum (in shared memory, reusing sm_o;
  // the plan keeps NS * G <= NWARP * 8 * D), then each thread sums float4 outputs over the splits.
  float* w = &sm_o[0][0][0];
  const float* obase = p.o_part + (int64_t)bh * NS * G * D;
  const float* lbase = p.lse_part + (int64_t)bh * NS * G;
  for (int i = threadIdx.x; i < NS * G; i += NWARP * 32) w[i] = __ldcg(lbase + i);
  __syncthreads();
  for (int h = warp; h < G; h += NWARP) {
    float mx = -INFINITY;
    bool nan = false;  // fmaxf drops NaN: a split whose lse is NaN must make the whole head NaN (issue 11)
    for (int s = lane; s < NS; s += 32) { mx = fmaxf(mx, w[s * G + h]); nan |= isnan(w[s * G + h]); }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    nan = __any_sync(0xffffffffu, nan);
    float den = 0.f;
    if (mx != -INFINITY)
      for (int s = lane; s < NS; s += 32) den += exp2f(w[s * G + h] - mx);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    __syncwarp();
    for (int s = lane; s < NS; s += 32)
      w[s * G + h] = nan ? __int_as_float(0x7fc00000) : den > 0.f ? exp2f(w[s * G + h] - mx) / den : 0.f;
  }
  __syncthreads();
  T* out = reinterpret_cast<T*>(p.out);
  for (int i4 = threadIdx.x; i4 < G * D / 4; i4 += NWARP * 32) {
    const int h = (i4 * 4) / D, d = (i4 * 4) % D;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < NS; s++) {
      const float wt = w[s * G + h];
      if (wt != 0.f) {
        const float4 o = __ldcg(reinterpret_cast<const float4*>(obase + ((int64_t)s * G + h) * D + d));
        acc.x += wt * o.x;
        acc.y += wt * o.y;
        acc.z += wt * o.z;
        acc.w += wt * o.w;
      }
    }
    T* dst = out + b * p.o_sb + (int64_t)(kvh * G + h) * p.o_sh + d;
    dst[0] = M::from_float(acc.x);
    dst[1] = M::from_float(acc.y);
    dst[2] = M::from_float(acc.z);
    dst[3] = M::from_float(acc.w);
  }
  if (threadIdx.x == 0) p.counters[bh] = 0;
}

// ------------------------------------------------------------------------------------------------------
// Append: (a) copy new rows into hp slots, (b) quantize whole 16-token pages into tile16 int2 blocks, each
// row taken from the hp pool (demotion) or from the new rows (prefill straight into INT2). Same arithmetic
// as oscarkv.quant.format.quantize (fp32, IEEE division, scale/zero rounded to fp16 before coding). The clip
// threshold tau = sort(|x|)[k] is found by a 31-step radix select over the bits of |x| (exact; no d x d
// comparison).

template <int D>
__device__ __forceinline__ void quant_row(float x[D / 32], int clip, int lane, uint8_t* codes_row, __half* sc, __half* zr) {
  constexpr int E = D / 32;
  // Issue 11: fminf/fmaxf (and the clip) drop NaN, so a non-finite row would get plausible codes. Flag it
  // before clipping and store a NaN scale: its dequantized values are NaN and attention propagates them.
  bool bad = false;
#pragma unroll
  for (int e = 0; e < E; e++) bad |= !isfinite(x[e]);
  bad = __any_sync(0xffffffffu, bad);
  if (clip >= 0) {
    uint32_t a[E];
#pragma unroll
    for (int e = 0; e < E; e++) a[e] = __float_as_uint(fabsf(x[e]));
    uint32_t res = 0;
    for (int bit = 30; bit >= 0; bit--) {
      const uint32_t cand = res | (1u << bit);
      int c = 0;
#pragma unroll
      for (int e = 0; e < E; e++) c += a[e] < cand;
      c = __reduce_add_sync(0xffffffffu, c);
      if (c <= clip) res = cand;
    }
    const float tau = __uint_as_float(res);
#pragma unroll
    for (int e = 0; e < E; e++) x[e] = fmaxf(fminf(x[e], tau), -tau);
  }
  float lo = x[0], hi = x[0];
#pragma unroll
  for (int e = 1; e < E; e++) { lo = fminf(lo, x[e]); hi = fmaxf(hi, x[e]); }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  }
  const __half s = __float2half_rn(bad ? __int_as_float(0x7fc00000) : __fdiv_rn(fmaxf(hi - lo, 1e-8f), 3.0f));
  const __half z = __float2half_rn(lo);
  const float sf = __half2float(s), zf = __half2float(z);
#pragma unroll
  for (int e = 0; e < E; e++) {
    const float u = __fdiv_rn(x[e] - zf, sf);
    const float c = fminf(fmaxf(floorf(u + 0.5f), 0.f), 3.f);
    codes_row[lane + 32 * e] = (uint8_t)c;
  }
  if (lane == 0) { *sc = s; *zr = z; }
}

constexpr int kAppendWarps = 16;  // one warp per row of a page (K then V)

template <typename T, int D>
__global__ void __launch_bounds__(kAppendWarps * 32) append_kernel(const AppendParams p) {
  constexpr int E = D / 32;
  constexpr int NW = D / 32;
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  using M = MmaType<T>;
  if (p.do_pages && (int)blockIdx.x < p.n_pages) {
    const int pg = blockIdx.x;
    __shared__ uint8_t codes[2][kTile][D];
    __shared__ __half scz[4][kTile];
    for (int r = warp; r < kTile; r += kAppendWarps) {
      const int64_t src = p.page_src[pg * kTile + r];
      const T *kr, *vr;
      if (src >= 0) {
        const int64_t off = (src / kTile) * p.h_sblk + h * p.h_sh + (src % kTile) * p.h_srow;
        kr = reinterpret_cast<const T*>(p.k_hp) + off;
        vr = reinterpret_cast<const T*>(p.v_hp) + off;
      } else {
        const int64_t row = -(src + 1);
        kr = reinterpret_cast<const T*>(p.k) + row * p.k_sr + h * p.k_sh;
        vr = reinterpret_cast<const T*>(p.v) + row * p.v_sr + h * p.v_sh;
      }
      float xk[E], xv[E];
#pragma unroll
      for (int e = 0; e < E; e++) { xk[e] = M::to_float(kr[lane + 32 * e]); xv[e] = M::to_float(vr[lane + 32 * e]); }
      // tile16 token order for scale / zero: stored index 2 * (r % 8) + r / 8
      const int si = 2 * (r & 7) + (r >> 3);
      quant_row<D>(xk, p.clip_k, lane, codes[0][r], &scz[0][si], &scz[1][si]);
      quant_row<D>(xv, p.clip_v, lane, codes[1][r], &scz[2][si], &scz[3][si]);
    }
    __syncthreads();
    const int64_t blk = p.page_dst[pg];
    if (warp < 2) {  // warp 0 packs K, warp 1 packs V
      const int g = lane >> 2, t = lane & 3;
      uint32_t words[NW];
#pragma unroll
      for (int w = 0; w < NW; w++) {
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 16; j++) {
          const int i = j & 7, half = j >> 3, step = 2 * w + (i >> 2), r = i & 3;
          const int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1) + half;
          const uint32_t c = warp == 0 ? codes[0][row][16 * step + col] : codes[1][col][16 * step + row];
          word |= c << (2 * j);
        }
        words[w] = word;
      }
      uint8_t* dst = (warp == 0 ? p.k_codes : p.v_codes) + blk * p.c_sblk + h * p.c_sh + lane * (NW * 4);
      uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);
#pragma unroll
      for (int w = 0; w < NW; w++) d32[w] = words[w];
    } else if (warp == 2 && lane < kTile) {
      const int64_t so = blk * p.s_sblk + h * p.s_sh + lane;
      p.k_scale[so] = scz[0][lane];
      p.k_zero[so] = scz[1][lane];
      p.v_scale[so] = scz[2][lane];
      p.v_zero[so] = scz[3][lane];
    }
    return;
  }
  if (!p.do_rows) return;
  // row copies: one warp per (row, head)
  const int r = (blockIdx.x - (p.do_pages ? p.n_pages : 0)) * kAppendWarps + warp;
  if (r >= p.n_rows) return;
  const int64_t slot = p.hp_slots[r];
  if (slot < 0) return;
  const int64_t off = (slot / kTile) * p.h_sblk + h * p.h_sh + (slot % kTile) * p.h_srow;
  const T* kr = reinterpret_cast<const T*>(p.k) + r * p.k_sr + h * p.k_sh;
  const T* vr = reinterpret_cast<const T*>(p.v) + r * p.v_sr + h * p.v_sh;
  T* kd = reinterpret_cast<T*>(p.k_hp) + off;
  T* vd = reinterpret_cast<T*>(p.v_hp) + off;
#pragma unroll
  for (int e = 0; e < E; e++) { kd[lane + 32 * e] = kr[lane + 32 * e]; vd[lane + 32 * e] = vr[lane + 32 * e]; }
}

template <typename T, int D, int NWARP, int NPRE, int MINB, int STAGES>
int launch_decode(const DecodeParams& p, int batch, cudaStream_t stream) {
  dim3 grid(p.n_hp + p.n_int2, batch * p.hkv);
  int2_decode_kernel<T, D, NWARP, NPRE, MINB, STAGES><<<grid, NWARP * 32, 0, stream>>>(p);
  return (int)cudaGetLastError();
}

template <typename T, int D, int NWARP, int NPRE, int MINB, int STAGES>
int occupancy() {
  int n = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, int2_decode_kernel<T, D, NWARP, NPRE, MINB, STAGES>, NWARP * 32, 0);
  return n;
}

}  // namespace

// Variants (head_dim 128 | 64): 0 = register ring, 4 tiles in flight per warp (3 | 4 CTAs/SM);
// 1 = cp.async ring of 8 tiles per warp (3 | 4 CTAs/SM); 2 = cp.async ring of 6 (4 CTAs/SM);
// 3 = cp.async ring of 10 (3 | 4 CTAs/SM). dtype: 0 = bf16, 1 = fp16.
#define OSCAR_TABLE(F, T)                                                  \
  if (head_dim == 128 && variant == 0) return F<T, 128, 4, 4, 3, 0>ARGS;   \
  if (head_dim == 128 && variant == 1) return F<T, 128, 4, 1, 3, 8>ARGS;   \
  if (head_dim == 128 && variant == 2) return F<T, 128, 4, 1, 4, 6>ARGS;   \
  if (head_dim == 128 && variant == 3) return F<T, 128, 4, 1, 3, 10>ARGS;  \
  if (head_dim == 64 && variant == 0) return F<T, 64, 4, 4, 4, 0>ARGS;     \
  if (head_dim == 64 && variant == 1) return F<T, 64, 4, 1, 4, 8>ARGS;     \
  if (head_dim == 64 && variant == 2) return F<T, 64, 4, 1, 4, 6>ARGS;     \
  if (head_dim == 64 && variant == 3) return F<T, 64, 4, 1, 4, 10>ARGS;

extern "C" int oscar_int2_decode(const DecodeParams* p, int batch, int dtype, int head_dim, int variant, void* stream) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
#define ARGS (*p, batch, s)
  if (dtype == 0) { OSCAR_TABLE(launch_decode, __nv_bfloat16) }
  if (dtype == 1) { OSCAR_TABLE(launch_decode, __half) }
#undef ARGS
  return -1;
}

extern "C" int oscar_int2_decode_occupancy(int dtype, int head_dim, int variant) {
#define ARGS ()
  if (dtype == 0) { OSCAR_TABLE(occupancy, __nv_bfloat16) }
  if (dtype == 1) { OSCAR_TABLE(occupancy, __half) }
#undef ARGS
  return -1;
}

extern "C" int oscar_append(const AppendParams* p, int dtype, int head_dim, void* stream) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const int row_ctas = p->do_rows ? (p->n_rows + kAppendWarps - 1) / kAppendWarps : 0;
  const int page_ctas = p->do_pages ? p->n_pages : 0;
  if (row_ctas + page_ctas == 0) return 0;
  dim3 grid(row_ctas + page_ctas, p->hkv);
  if (dtype == 0 && head_dim == 128) append_kernel<__nv_bfloat16, 128><<<grid, kAppendWarps * 32, 0, s>>>(*p);
  else if (dtype == 0 && head_dim == 64) append_kernel<__nv_bfloat16, 64><<<grid, kAppendWarps * 32, 0, s>>>(*p);
  else if (dtype == 1 && head_dim == 128) append_kernel<__half, 128><<<grid, kAppendWarps * 32, 0, s>>>(*p);
  else if (dtype == 1 && head_dim == 64) append_kernel<__half, 64><<<grid, kAppendWarps * 32, 0, s>>>(*p);
  else return -1;
  return (int)cudaGetLastError();
}

extern "C" int oscar_params_sizes(int* out2) {
  out2[0] = (int)sizeof(DecodeParams);
  out2[1] = (int)sizeof(AppendParams);
  return 0;
}
