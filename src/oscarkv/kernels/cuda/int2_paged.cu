// INT2 paged decode attention and page-wise append for the "tile16" GPU pool layout (oscarkv.kernels).
//
// Built at first use by oscarkv/kernels/cuda_build.py (nvcc -> shared library, called through ctypes with
// raw device pointers and the current torch stream), so it needs no torch headers.
//
// Tile16 layout (pure function of the logical format; torch transform both ways in kernels/layout.py,
// whose docstring has the full map): one (int2 block, KV head) = 16 tokens x head_dim codes. The block's
// k_codes and v_codes bytes hold, for lane l (g = l >> 2, t = l & 3) of a warp, words [l*NW, (l+1)*NW)
// (NW = head_dim / 32), so one 128-bit (D=128) or 64-bit (D=64) load is lane l's MMA A fragments of one
// side for the whole tile.
//   K: byte j of word w, field P = 0..3 (bits 2P, 2P+1): token = g + 8 (w & 1), dim = (D/4) P + 16 (w >> 1)
//      + 4t + j. Masked in place (one LOP3 per 4 codes) the bytes are 4^P c, the u8 A operand of the
//      mma.m16n8k32 (D = 128; k16 for D = 64) of dims (D/4) P .. (D/4)(P+1) - 1 against int8 q.
//   V: word w is read as is (s = 0) and rotated right by 8 (s = 1); field position P = 1..4 of half e of
//      either, ORed under the fp16 exponent of 1024, is the exact operand 1024 + 4^P c (one LOP3 per
//      register). With u = (P-1) >> 1, x = (P-1) & 1: token = 2t + 8s + e, dim = 16 (2w + u) + 8x + g
//      (A = V^T codes, head_dim on M, tokens on K), so P = 1 + ((dim >> 3) & 1) + 2 ((dim >> 4) & 1).
// K scale / zero are stored in token order 0,8,1,9,...,7,15 (lane g reads tokens g, g + 8 as one 32-bit
// pair), V scale / zero in order 0,1,8,9,2,3,10,11,... (lane t reads tokens 2t, 2t+1, 2t+8, 2t+9 as 64 bits).
// Scale formats (template SF): 0 = fp16 scale and zero (records of 8 D + 128 bytes); 1 = "log8" (oscarkv.quant.format:
// one byte each, records of 8 D + 64 bytes, issue 7's 5.6% fewer bytes at head_dim 128): scale = 2^(top - e / 32)
// (e = 255: NaN), zero = scale * zq / 4 with zq = zb - 128. The decode kernel looks e up in per-CTA shared-memory
// tables (exp2f, within 2 ulp of the format's table): K with 2^k_top folded in (fp32), V as fp16 2^(-e/32) with 2^v_top
// applied to the INT2 split's output. The zero enters in units of its own scale: logits ks (S + (zq / 4) sum(q')),
// and sum p z = sum p' zq / 4 is one more row of the sp MMA (B = p'); zq / 4 comes from the byte by a magic number
// (fp32 for K, the fp16 halves 1024 + zb for V), exactly.
//
// Decode (one launch): grid (n_hp_splits + n_int2_splits, batch * num_kv_heads); each CTA takes one
// token range of one tier for one KV head and all its query heads (GQA group <= 8 on the MMA's N).
// INT2 tier, per 16-token tile and warp (issue 7: no float instruction touches a code):
//   scores  S[tok, head]  = sum_P 4^-P (4^P c) (A, u8) x q8 (B, s8) x sigma,  q' = q * scale_log2 ~ sigma q8
//                           (int8 per head, once per call): four s32 MMAs joined by IMAD, one conversion
//   logits                = s_tok * S + z_tok * sum(q')             (scale / zero by algebra, fp32)
//   O^T[dim, head]       += (1024 + 4^P c) (A = V^T) x P'[tok, head],  P' = p * s_tok (fp16, movmatrix from
//                           the C to the B fragment); odd tokens enter as -(1024 + 4^P (3 - c)) (unpack8), so
//                           the offsets of even and odd tokens cancel in the MMA sums; sum P' of even and of odd
//                           tokens is accumulated by one more MMA; l = sum p and sum p z_tok come from one MMA
//                           (A rows = ones, z); the offsets and sum p z are folded into O^T every kFlushTiles
//                           (32) tiles, 4^-P is applied per output row at the end.
//   The running max moves only when a logit exceeds it by kSlack (warp-uniform slow path, which also
//   masks the partial last tile and folds the V offset).
// The BF16 sink / recent tier runs as extra splits of the same launch with bf16 (or fp16) MMAs. The
// split results are merged by the last CTA of each (batch, KV head) (atomic counter, reset by that CTA),
// so the whole call is one kernel, with no host sync or allocation: CUDA-graph capturable.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

// Parameter blocks: outside the anonymous namespace so the extern "C" entry points keep external linkage.
constexpr int kSplitLut = 64;  // entries of DecodeParams::split_lut (cuda_ops._LUT; the struct-size check holds them equal)
struct DecodeParams {
  const void* q;  // [B, HQ, D] T
  int64_t q_sb, q_sh;
  const uint8_t* records;  // [nb, HKV, 8 D + 128] tile16 records: K codes | V codes | k_scale | k_zero |
                           // v_scale | v_zero (kernels/paged.py tile16_records; cuda_ops checks the layout)
  int64_t c_sblk, c_sh;  // bytes
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
  int early;  // 1: lengths, block tables, BF16-tier L2 prefetches and INT2 tiles other than each sequence's
              // newest read before waiting for the previous kernel (PDL); the caller guarantees that the
              // kernel launched right before writes none of them (DecodePlan's early_reads)
  int probe;  // 0 = normal; benchmark probes (output is garbage): 1 = INT2 tier loads only (bandwidth),
             // 2 = return right after the launch (launch floor of this grid), 3 = no merge (return after
             // the partial writes, before the arrival), 4 = prologue only (q, lengths and the first block
             // ids read, return before the tile loop), 5 = no epilogue (return after the tile loop), 6 = no
             // code unpack (the MMAs take the raw words), 7 = no INT2 loads after the first ring fill (math only),
             // 8 = probe 1's loads as plain 16-byte loads into registers (no shared memory)
  int l2_evict_first;  // 1: the INT2 records are loaded with the L2 evict-first policy (CudaDecodeConfig)
  // Splits per sequence (a plan sized for the pool's capacity, as the CUDA-graph decode step's, runs short
  // sequences with the split counts planned for their own length): with ntile = sequence b's INT2 tiles and
  // e = min(kSplitLut - 1, (ntile - 1) / lut_tiles) (0 when ntile = 0), b uses the first split_lut[e] of the n_int2
  // INT2 splits and the first hp_lut[e] of the n_hp BF16-tier splits; the others return at once, and the
  // splits that run write partial slots 0 .. hp_lut[e] + split_lut[e] - 1 (hp first), which its merge takes.
  // Entries in [1, n_int2] / [1, n_hp] (0 where the tier has no split); constant = n_int2 / n_hp for explicit
  // split counts and the cluster variants.
  int lut_tiles;
  uint16_t split_lut[kSplitLut];
  uint16_t hp_lut[kSplitLut];
  int split_major;  // 1: the linear CTA index is read split-major (below)
  int merge_poll;   // 1: the CTA of partial slot 0 merges, polling per-slot flags (CudaDecodeConfig.poll_merge)
  int merge_slices;  // >= 1: the last min(merge_slices, splits) CTAs to arrive each merge a slice of the outputs
  int k_top, v_top;  // log8 records (SF = 1): the scale_top of K and of V
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
  void* k_scale;  // __half (SF 0) or uint8 (SF 1, log8)
  void* k_zero;
  void* v_scale;
  void* v_zero;
  int64_t s_sblk, s_sh;  // elements
  void* k_hp;
  void* v_hp;
  int64_t h_sblk, h_sh, h_srow;
  int hkv, clip_k, clip_v;  // clip index k (0-based) or -1
  int do_pages, do_rows;
  // R_K fused into the append (issue 8: no rotation GEMM, cast or copy kernels per layer and step): with rot, the
  // new K rows arrive unrotated and are rotated (x @ R of their KV head, fp32 sums rounded to T, the rule of
  // rotation.rotate_with_keys) before they are stored or quantized, and the queries q [R, HQ, D] (row / head
  // strides q_sr, q_sh; HQ = hkv * group) are rotated by their KV head's R into q_out [R, HQ, D] (contiguous)
  const float* rot;  // [rot_heads, D, D] fp32 row-major, or nullptr
  int rot_heads;     // 1 (one R per layer) or hkv
  const void* q;     // or nullptr
  void* q_out;
  int64_t q_sr, q_sh;
  int group;  // query heads per KV head
  const float* log8;  // log8 pages (SF 1): the format's float32 table [512]: 2^(-e / 32) for e = 0 .. 255 (NaN at 255), then
                      // the 255 midpoints (quant.format LOG8_SCALES, LOG8_MIDS; cuda_ops.log8_table); scale_top of K and V
  int k_top, v_top;
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
  // the two halves of a pack()ed word as floats (exact; bit shifts, no conversion instruction)
  static __device__ __forceinline__ void unpack(uint32_t w, float& lo, float& hi) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xffff0000u);
  }
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
  static __device__ __forceinline__ void unpack(uint32_t w, float& lo, float& hi) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w));
    lo = f.x;
    hi = f.y;
  }
};

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t r;  // (a & mask) | magic
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));
  return r;
}
__device__ __forceinline__ uint32_t lop3_xor_and(uint32_t a, uint32_t mask, uint32_t c) {
  uint32_t r;  // c ^ (a & mask)
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(c));
  return r;
}
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t hfma2_c(uint32_t a, uint32_t b, uint32_t c) {  // a * b + c, f16x2
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ __forceinline__ float ex2(float x) {  // MUFU.EX2 alone (no denormal range fix-up)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}
// floor(a / b) for 0 <= a < 2^20, 1 <= b < 2^12, without the ~20-instruction integer division: the quotient of
// a + 1/2 is at least 1/(2b) above floor(a / b) and below it + 1 - 1/(2b), far more than __fdividef's error
__device__ __forceinline__ int small_div(int a, int b) {
  return __float2int_rz(__fdividef((float)a + 0.5f, (float)b));
}
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// d = a (16x32 u8) x b (32x8 s8), s32, from zero (K side of the INT2 tier, D = 128)
__device__ __forceinline__ void mma_u8s8_k32(int d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}
// d = a (16x16 u8) x b (16x8 s8), s32, from zero (K side of the INT2 tier, D = 64)
__device__ __forceinline__ void mma_u8s8_k16(int d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}
// d += a (16x32 u8) x b (32x8 s8), s32 (the paired-tile path: tile b's scores onto tile a's fragment)
__device__ __forceinline__ void mma_u8s8_k32_acc(int d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_u8s8_k16_acc(int d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(b0));
}
// d = a (16x16 f16) x b (16x8 f16) + c, f32 accumulate, with c and d in different registers
__device__ __forceinline__ void mma_f16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1, float c0, float c1, float c2, float c3) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
}

// Code unpacking without any float arithmetic. In every 16-bit half of a tile16 word the 2-bit fields sit
// at bits 0..15; variant s = 0 reads the word as is, s = 1 the word rotated right by 8 bits. Field position
// P = 1..4 of a variant (bits 2P, 2P+1 of the half) under the exponent of 1024 gives an exact fp16 value.
// The layout puts the codes so that P depends only on the head_dim index:
//   P(dim) = 1 + ((dim >> 3) & 1) + 2 ((dim >> 4) & 1)
// so 4^P is undone per output row (V side; the K side reads its codes as u8 MMA operands, see scores() in the
// decode kernel). The two halves of a register are the A operand's consecutive k, tokens 2j and 2j + 1: the
// even token's half is 1024 + 4^P c (0x6400 ORed over the field), the odd token's -(1024 + 4^P (3 - c)) =
// -(1024 + 3 4^P) + 4^P c (0xE400 over the complemented field), both from one LOP3: C ^ (w & mask) with C =
// 0xE4006400 | the odd half's field bits. So the offsets of a tile's even and odd tokens cancel inside the
// MMA's sums instead of piling up (issue 8: the tensor core's fp32 accumulation truncates; a sum of the
// size of 1024 sum p' beside an output of 4^P sum c p' lost up to 5% of a flat 128K softmax), and they are
// carried algebraically (sum p' of even and of odd tokens, the sp MMA). 9 instructions per 16 codes (1 SHF +
// 8 LOP3), no HFMA2.
__device__ __forceinline__ void unpack8(uint32_t w, uint32_t o[8]) {
  const uint32_t r = __funnelshift_r(w, w, 8);
#pragma unroll
  for (int P = 1; P <= 4; P++) {
    const uint32_t mask = 0x00030003u << (2 * P), c = 0xE4006400u | (0x00030000u << (2 * P));
    o[P - 1] = lop3_xor_and(w, mask, c);
    o[4 + P - 1] = lop3_xor_and(r, mask, c);
  }
}

// The field P (unpack8) of the V operand in m-tile i's rows 16 i + g (rows 16 i + g + 8: P + 1): the layout puts
// head_dim's rows so that P depends on the row only (layout.py), and the flush, the rescale and the epilogue undo
// its 4^P weight.
__host__ __device__ constexpr int v_field(int i) { return 1 + 2 * (i & 1); }

// unpack8 of word i of the V side; RAW (probe 6, benchmarks only, garbage output): the raw words in the
// order that makes each MMA's A operand the loaded register quad (no instruction), so that a tile costs
// everything but the unpack (is the loop bound by the unpack's ALU work?)
template <bool RAW, int NW>
__device__ __forceinline__ void unpack_tile(const uint32_t* w, int i, uint32_t a[8]) {
  if constexpr (RAW) {
#pragma unroll
    for (int j = 0; j < 8; j++) a[j] = w[((j & 1) + 2 * (j >> 2)) % NW];
  } else {
    unpack8(w[i], a);
  }
}

__device__ __forceinline__ float h2f_lo(uint32_t x) { return __low2float(*reinterpret_cast<__half2*>(&x)); }
__device__ __forceinline__ float h2f_hi(uint32_t x) { return __high2float(*reinterpret_cast<__half2*>(&x)); }

__device__ __forceinline__ const uint8_t* mad_wide(uint32_t a, uint32_t b, const uint8_t* c) {  // c + a * b
  uint64_t r;
  asm("mad.wide.u32 %0, %1, %2, %3;\n" : "=l"(r) : "r"(a), "r"(b), "l"(reinterpret_cast<uint64_t>(c)));
  return reinterpret_cast<const uint8_t*>(r);
}
// 16 bytes global -> shared, cached in L2 only, under the L2 eviction policy pol (l2_policy)
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred, uint64_t pol) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %3;\n}\n"
      ::"r"(dst), "l"(src), "r"((int)pred), "l"(pol));
}
// 16 bytes global -> registers, cached in L2 only, under the L2 eviction policy pol (probe 8)
__device__ __forceinline__ uint4 ldg_cg16(const void* a, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(pol));
  return v;
}
// L2 eviction policy of the INT2 stream: evict-first (each byte is read once per call) or normal
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t pol;
  if (evict_first) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  else asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// Programmatic dependent launch (sm_90): a kernel launched with the PDL attribute may be scheduled while
// the previous kernel of the stream still runs; it waits here for that kernel (and its memory) before
// touching anything, and lets the next kernel be scheduled as early as possible.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// the two halves of pdl_begin for a CTA that reads data no kernel of the step writes first: the next kernel may
// be scheduled at once (pdl_trigger), the wait for the previous one comes after those reads (pdl_wait)
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Timeline trace of the decode kernel's start and end (issue 7, the batch-1 fixed cost): compiled only with
// OSCARKV_TRACE defined (bench/trace_decode.py builds such a copy of this file); otherwise every TRACE is empty.
// Per CTA (linear index in the grid, the first kTraceCtas): the SM, and at events 0..7 thread 0's %globaltimer (ns,
// one clock for all SMs) and clock64 (the SM's cycles: exact within a CTA); per warp, lane 0's loop end.
// Events: 0 entry, 1 after the PDL wait, 2 all warps' partials in shared memory, 3 the CTA's partial written,
// 4 the arrival atomic returned, 5 (merging CTA) its partial-output loads issued, 6 weights in shared memory,
// 7 output stored (the poll merge's events: bench/trace_decode.py).
#ifdef OSCARKV_TRACE
constexpr int kTraceCtas = 4096;
__device__ unsigned long long g_trace[kTraceCtas][2][8];
__device__ unsigned long long g_trace_warp[kTraceCtas][16];
__device__ int g_trace_sm[kTraceCtas];
__device__ __forceinline__ int trace_cta() { return blockIdx.y * gridDim.x + blockIdx.x; }
__device__ __forceinline__ void trace_at(int ev) {
  const int c = trace_cta();
  if (threadIdx.x != 0 || c >= kTraceCtas) return;
  unsigned long long gt, ck;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(ck));
  g_trace[c][0][ev] = gt;
  g_trace[c][1][ev] = ck;
  if (ev == 0) {
    int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_trace_sm[c] = sm;
  }
}
__device__ __forceinline__ void trace_warp(int warp) {
  const int c = trace_cta();
  if ((threadIdx.x & 31) != 0 || c >= kTraceCtas || warp >= 16) return;
  unsigned long long gt;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  g_trace_warp[c][warp] = gt;
}
#define TRACE(ev) trace_at(ev)
#define TRACE_WARP(w) trace_warp(w)
#else
#define TRACE(ev)
#define TRACE_WARP(w)
#endif
// the decode kernel's PDL wait (before or after its early reads) and trace event 1
__device__ __forceinline__ void decode_pdl_wait() {
  pdl_begin();
  TRACE(1);
}

// Thread-block clusters (sm_90): all threads of all CTAs of the cluster meet here; release / acquire make each
// CTA's shared-memory writes before the barrier visible to the others' distributed-shared-memory reads after it.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
// a float in CTA `rank`'s shared memory, at the address `p` has in this CTA's
__device__ __forceinline__ float ld_cluster(const float* p, uint32_t rank) {
  float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t a = (uint32_t)__cvta_generic_to_shared(p), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
#endif
  return v;
}

#ifndef OSCAR_FLUSH_TILES
#define OSCAR_FLUSH_TILES 32
#endif
constexpr int kFlushTiles = OSCAR_FLUSH_TILES;  // INT2 tiles between two folds of the V offset (flush, below)
#ifndef OSCAR_RING_PHASE
#define OSCAR_RING_PHASE 0
#endif
constexpr uint32_t kRingPhase = OSCAR_RING_PHASE;  // the decode ring's shared address mod 128 (smem, below)
static_assert(kRingPhase % 16 == 0 && kRingPhase < 128, "cp.async needs 16-byte alignment");
static_assert(32 % kFlushTiles == 0, "the fold interval divides the 32-tile block-id window");
constexpr float kSlack = 4.f;  // log2 units: p = 2^(logit - m) may reach 16 before the running max moves

// PAIR (variants 10 / 11, group <= 4; issue 7): the INT2 tier takes its tiles two at a time. With <= 4 query
// heads per KV head the MMAs' columns 4-7 are empty; tile b's heads go there (its score MMAs accumulate onto tile
// a's fragment with q8 on columns 4-7), so the score join, the scale / zero algebra, the softmax, the movmatrix,
// the l / sum p z MMA and the offset MMA run once per pair, and tile b's V MMAs take P' with columns 0-3 zeroed
// (tile a's with 4-7 zeroed). Columns n and n + 4 are two softmax streams of head n (each its own running max),
// merged at the end of the warp's run. tests/kernels/test_cuda_emulation.py (pair=True) replays it on the CPU.
template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
__global__ void __launch_bounds__(NWARP * 32, MINB) int2_decode_kernel(const DecodeParams p) {
  constexpr int KS = D / 16;  // k-steps of the score MMA = m-tiles of the output MMA
  constexpr int NW = D / 32;  // 32-bit code words per lane per tile
  static_assert(!PAIR || (STAGES % 2 == 0 && CX == 0 && kFlushTiles % 2 == 0),
                "pairs take two adjacent ring slots and fold between pairs; no cluster variant");
  using M = MmaType<T>;
  // grid (NS, B * HKV), CTAs dispatched in linear order. Split-major (p.split_major: CudaDecodeConfig.cta_order)
  // reads that order as every (sequence, KV head)'s split 0, then split 1, ...: the splits that
  // run come first and spread over the SMs, the CTAs that return at once take the remaining slots. (In the
  // (sequence, KV head)-major order, a one-wave batch-1 grid planned for 128K and run at 32K put two working
  // CTAs on some SMs and none on others: 19.7 vs 14.5 us, H200, fourteenth session.)
  TRACE(0);
  const int lin = blockIdx.y * gridDim.x + blockIdx.x;
  const int split = p.split_major ? lin / gridDim.y : blockIdx.x;
  const int bh = p.split_major ? lin % gridDim.y : blockIdx.y;
  const int b = bh / p.hkv, kvh = bh % p.hkv;
  const int G = p.group;
  const int NS = p.n_hp + p.n_int2;  // the plan's splits: the stride of the partial buffers
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const bool hp = split < p.n_hp;
  // PDL: with p.early the wait for the previous kernel comes after the reads that do not depend on it (in
  // each tier below); q, the partial buffers and the output are touched only after it
  if (p.probe == 2 || !p.early) decode_pdl_wait();
  if (p.probe == 2) return;
  // this sequence's splits (DecodeParams::split_lut / hp_lut); lengths are early reads (p.early)
  const int len2 = p.int2_lens[b];
  const int ntile2 = (len2 + kTile - 1) / kTile;
  const int e = ntile2 == 0 ? 0 : min(kSplitLut - 1, (ntile2 - 1) / p.lut_tiles);
  const int n_i2 = p.n_int2 == 0 ? 0 : (int)p.split_lut[e];
  const int n_h = p.n_hp == 0 ? 0 : (int)p.hp_lut[e];
  if (hp ? split >= n_h : split - p.n_hp >= n_i2) return;  // a split this sequence does not use
  // the splits that run for this sequence (and are merged) and this split's partial slot among them (hp
  // first): kept in shared memory until the epilogue (as registers live across the tile loop they would cost
  // a spill at 128 registers)
  __shared__ int sm_nsb, sm_slot;
  if (threadIdx.x == 0) {
    sm_nsb = n_h + n_i2;
    sm_slot = hp ? split : n_h + (split - p.n_hp);
  }
  // one shared buffer: the cp.async ring during the loop, then the per-warp partial outputs (dynamic:
  // decode_smem_bytes<D, NWARP, STAGES, SF>() at launch; 16-warp CTAs need more than the static 48 KB)
  // one tile: K codes 4D bytes | V codes 4D | k_scale, k_zero, v_scale, v_zero (32 B each; log8: 16 B each)
  constexpr int TAIL = SF ? 64 : 128;
  constexpr int TB = 8 * D + TAIL;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  // the buffer's base at a fixed 128-byte phase (kRingPhase) wherever the static shared memory ends (the dynamic
  // part starts right after it, 16-byte aligned, so the static arrays' size used to set the ring's phase: 528 ->
  // 608 bytes, phase 16 -> 96, was 4-9% faster, thirty-fifth session). Thirty-sixth session, H100, 128K batch 1:
  // phase 0 33.8-34.0 us, 32 35.4, 64 / 96 35.9-36.0, 16 37.5-38.0 (BENCHMARKS.md). decode_smem_bytes() reserves
  // the up to 128 bytes this skips.
  uint8_t* const smem = smem_raw + ((kRingPhase - (uint32_t)__cvta_generic_to_shared(smem_raw)) & 127u);

  const T* qrow = reinterpret_cast<const T*>(p.q) + b * p.q_sb + (int64_t)(kvh * G + (g < G ? g : 0)) * p.q_sh;
  // final per-lane state of either tier: output rows (dims 16 mt + g (+8)) for heads 2t, 2t + 1, not yet
  // divided by l; running max m and full sum l of the two heads
  float fin[KS][4];
  float fm[2], fl[2];
  // the lane's two q elements of head g, dims 16 ks + 2 t + 8 h and + 1 (0 for the padding heads g >= G)
  auto q_pair = [&](int ks, int h, float& lo, float& hi) {
    lo = hi = 0.f;
    if (g < G) {
      lo = M::to_float(qrow[16 * ks + 2 * t + 8 * h]);
      hi = M::to_float(qrow[16 * ks + 2 * t + 8 * h + 1]);
    }
  };

  if (hp) {
    // ---------------------------------------------------------------- BF16 sink + recent tier
    float m_[2] = {-1e30f, -1e30f}, l_[2] = {0.f, 0.f};
    float acc[KS][4];
#pragma unroll
    for (int i = 0; i < KS; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    const int len = p.hp_lens[b];
    const int ntile = (len + kTile - 1) / kTile;
    const int per = (ntile + n_h - 1) / n_h;
    const int t0 = split * per, t1 = min(t0 + per, ntile);
    const int32_t* table = p.hp_table + b * p.hp_table_s;
    const T* khp = reinterpret_cast<const T*>(p.k_hp);
    const T* vhp = reinterpret_cast<const T*>(p.v_hp);
    // The hp tier has no load pipeline; so that each of a warp's tiles does not pay a memory latency or two
    // (K, then V after the scores), all its tiles' K and V rows are first prefetched into L2 (lanes 0..15:
    // K rows, 16..31: V rows; 128-byte lines). Issue 7: part of the batch-1 fixed cost.
    for (int tile = t0 + warp; tile < t1; tile += NWARP) {
      const int64_t base = (int64_t)table[tile] * p.h_sblk + (int64_t)kvh * p.h_sh;
      const T* row = (lane < 16 ? khp : vhp) + base + (lane & 15) * p.h_srow;
#pragma unroll
      for (int c = 0; c < D / 64; c++) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + 64 * c));
    }
    if (p.early) decode_pdl_wait();  // (L2 prefetches are hints; L2 holds the previous kernel's writes either way)
    // q as the B operand: B[k = dim][n = head], lane holds head g, dims 16ks + 2t + {0,1,8,9}
    uint32_t qb[KS][2];
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float lo, hi;
        q_pair(ks, h, lo, hi);
        qb[ks][h] = M::pack(lo, hi);
      }
    if (p.probe == 4 && __shfl_sync(0xffffffffu, qb[0][0] ^ (uint32_t)len, 0) != 0x7fffffffu) return;
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
      float mx0 = fmaxf(c4[0], c4[2]), mx1 = fmaxf(c4[1], c4[3]);
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
      }
      const float n0 = fmaxf(m_[0], mx0), n1 = fmaxf(m_[1], mx1);
      const float al0 = exp2f(m_[0] - n0), al1 = exp2f(m_[1] - n1);
      m_[0] = n0;
      m_[1] = n1;
      c4[0] = exp2f(c4[0] - n0);
      c4[1] = exp2f(c4[1] - n1);
      c4[2] = exp2f(c4[2] - n0);
      c4[3] = exp2f(c4[3] - n1);
      l_[0] = l_[0] * al0 + c4[0] + c4[2];
      l_[1] = l_[1] * al1 + c4[1] + c4[3];
#pragma unroll
      for (int i = 0; i < KS; i++) {
        acc[i][0] *= al0;
        acc[i][1] *= al1;
        acc[i][2] *= al0;
        acc[i][3] *= al1;
      }
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
        M::mma(acc[mt], a, b0, b1);
      }
    }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      l_[0] += __shfl_xor_sync(0xffffffffu, l_[0], o);
      l_[1] += __shfl_xor_sync(0xffffffffu, l_[1], o);
    }
#pragma unroll
    for (int i = 0; i < KS; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) fin[i][j] = acc[i][j];
    fm[0] = m_[0];
    fm[1] = m_[1];
    fl[0] = l_[0];
    fl[1] = l_[1];
  } else {
    // ---------------------------------------------------------------- INT2 tier, cp.async ring
    // log8: the CTA's scale tables (kscale / vscale below), filled after the first ring loads are issued
    __shared__ float sm_ks[SF ? 256 : 1];
    __shared__ unsigned short sm_vs[SF ? 256 : 1];
    // q for the K side in int8 (departure from the spec, whose kernel keeps q in bf16; issue 7: 8-bit K
    // operands take 4 u8 x s8 MMAs and 16 LOP3 per tile instead of 8 fp16 MMAs and 36 unpack instructions, and no
    // 1024 offset to cancel). Per head, x = q * scale_log2, q8 = rint(x * 127 / absmax(x)), sigma = absmax / 127
    // (reference.int8_query is the same rule; SageAttention quantizes q to int8 the same way). Rounding q costs
    // a score error of std ~0.6% of the score's (for a Gaussian q), a few percent of what INT2 K already costs.
    // B operand of the MMA of field P: register r, byte j = dim (D/4) P + 16 r + 4t + j of head g.
    constexpr int QR = D / 64;  // B registers per MMA: 2 (m16n8k32, D = 128) or 1 (m16n8k16, D = 64)
    uint32_t q8[4][QR];
    // PAIR: lane (g, t) quantizes head g & 3 (columns g and g + 4 are the same head for tiles a and b): q8 holds
    // it on columns 0-3 (tile a's B operand, 0 on lanes g >= 4), q8b on columns 4-7 (tile b's, 0 on g < 4)
    uint32_t q8b[4][QR];
    const int qh = PAIR ? (g & 3) : g;
    const T* qrow8 = reinterpret_cast<const T*>(p.q) + b * p.q_sb + (int64_t)(kvh * G + (qh < G ? qh : 0)) * p.q_sh;
    float sg0, sg1;  // sigma / 64 of heads 2t, 2t + 1 (the score join below carries a factor 64)
    float qs0, qs1;  // sum over dims of the dequantized q' = sigma q8 of heads 2t, 2t + 1 (for the zero point)
    auto prep_q = [&]() {  // after the PDL wait: q is the previous kernels' output
      float x[4][QR][4];
      float amax = 0.f, bad = 0.f;  // bad: NaN when an element is not finite (x * 0), so that rounding q
                                    // cannot turn a NaN / inf query into plausible scores (issue 11)
#pragma unroll
      for (int P = 0; P < 4; P++)
#pragma unroll
        for (int r = 0; r < QR; r++)
#pragma unroll
          for (int j = 0; j < 4; j++) {
            x[P][r][j] = qh < G ? M::to_float(qrow8[(D / 4) * P + 16 * r + 4 * t + j]) * p.scale_log2 : 0.f;
            amax = fmaxf(amax, fabsf(x[P][r][j]));
            bad += x[P][r][j] * 0.f;
          }
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      bad += __shfl_xor_sync(0xffffffffu, bad, 1);
      bad += __shfl_xor_sync(0xffffffffu, bad, 2);
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      int isum = 0;
#pragma unroll
      for (int P = 0; P < 4; P++)
#pragma unroll
        for (int r = 0; r < QR; r++) {
          uint32_t w = 0;
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const int v = __float2int_rn(x[P][r][j] * inv);
            isum += v;
            w |= (uint32_t)(v & 0xff) << (8 * j);
          }
          if constexpr (PAIR) {
            q8[P][r] = g < 4 ? w : 0u;
            q8b[P][r] = g < 4 ? 0u : w;
          } else {
            q8[P][r] = w;
          }
        }
      isum += __shfl_xor_sync(0xffffffffu, isum, 1);
      isum += __shfl_xor_sync(0xffffffffu, isum, 2);
      const float sig = amax / 127.f + bad, qsum = sig * (float)isum, s64 = sig * (1.f / 64.f);
      // the score fragment of lane (g, t) holds columns 2t, 2t + 1: heads 2t, 2t + 1 (lanes 8t and 8t + 4 hold
      // them as g), with PAIR heads (2t) & 3, (2t + 1) & 3 (lanes 8 (t & 1) and 8 (t & 1) + 4)
      const int c0 = PAIR ? 8 * (t & 1) : 8 * t;
      qs0 = __shfl_sync(0xffffffffu, qsum, c0);
      qs1 = __shfl_sync(0xffffffffu, qsum, c0 + 4);
      sg0 = __shfl_sync(0xffffffffu, s64, c0);
      sg1 = __shfl_sync(0xffffffffu, s64, c0 + 4);
    };
    // A operand of the sp MMA: row 0 = 1 on even tokens (the low half of each register), row 1 = 1 on odd ones
    const uint32_t sp_ind = g == 0 ? 0x00003C00u : (g == 1 ? 0x3C000000u : 0u);

    // state: acc = O^T rows with the V offsets not yet removed: 1024 S_e - (1024 + 3 4^P) S_o for the row's P,
    // S_e / S_o = sum p' over even / odd tokens (sp rows 0 / 1, lanes g = 0 / g = 1; unpack8);
    // lz row 0 = sum p (l), row 1 = sum p z (lanes g = 0 / g = 1)
    float acc[KS][4], sp[4] = {0.f, 0.f, 0.f, 0.f}, lz[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < KS; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    float m0 = -1e30f, m1 = -1e30f;
    // the offsets of sp, per column (2t, 2t + 1) and P of the row: off[P - 1][column] (all lanes)
    auto offsets = [&](float off[4][2]) {
      const float se0 = __shfl_sync(0xffffffffu, sp[0], t), se1 = __shfl_sync(0xffffffffu, sp[1], t);
      const float so0 = __shfl_sync(0xffffffffu, sp[0], 4 + t), so1 = __shfl_sync(0xffffffffu, sp[1], 4 + t);
#pragma unroll
      for (int P = 1; P <= 4; P++) {
        const float c = 1024.f + 3.f * float(1 << (2 * P));
        off[P - 1][0] = fmaf(-c, so0, 1024.f * se0);
        off[P - 1][1] = fmaf(-c, so1, 1024.f * se1);
      }
    };
    // The zero-point sum sum p z. fp16 records: lz's A operand rows 0 = ones, ZR = 1: v_zero of the tile's tokens
    // (PAIR: of tile a; row 2 of tile b), sum p z accumulates in lz. log8 records (zero = vs zq / 4): sp's A rows
    // ZR = 2 (tile a) and 3 (PAIR: tile b) are zq / 4, so sum p' zq / 4 = sum p z accumulates in sp; lz has row 0 only.
    constexpr int ZR = SF ? 2 : 1;
    const bool z_row = g == ZR || (PAIR && g == ZR + 1);
    const uint32_t z_keep = z_row ? 0xffffffffu : 0u, lz_ones = g == 0 ? 0x3C003C00u : 0u;
    // the lane holding sum p z (row ZR, or with PAIR row ZR + 1 for columns 4-7) of this lane's columns
    const int z_src = 4 * ZR + (PAIR && t >= 2 ? 4 : 0) + t;
    auto zsum = [&](float& z0, float& z1) {
      z0 = __shfl_sync(0xffffffffu, SF ? sp[0] : lz[0], z_src);
      z1 = __shfl_sync(0xffffffffu, SF ? sp[1] : lz[1], z_src);
    };

    uint8_t* ring = smem + warp * STAGES * TB;
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring) + 16 * lane;
    const int sp_ = split - p.n_hp;
    const int len = len2;
    const int ntile = ntile2;
    const int per = (ntile + n_i2 - 1) / n_i2;
    const int32_t* table = p.int2_table + b * p.int2_table_s;
    // this warp's tiles: split sp_ takes tiles [t0, t1), its warps every NWARP-th from first (interleaving the
    // splits' tiles instead was measured to gain nothing, tenth session)
    const int t0 = sp_ * per, t1 = min(t0 + per, ntile);
    const int first = t0 + warp;
    constexpr int step = NWARP;
    const int nmine = first < t1 ? (t1 - first + step - 1) / step : 0;  // tiles of this warp
    // the sequence's last tile is partial when len % 16 != 0: its local index in this warp, else -1
    const int lastt = ntile - 1;
    const int partial_k =
        (len % kTile != 0 && lastt >= first && lastt < t1 && (lastt - first) % step == 0) ? (lastt - first) / step : -1;
    // PAIR: the first pair (k, k + 1) that holds the partial tile or runs past the warp's last tile. The partial
    // tile, when this warp has it, is its last (nmine - 1: the sequence's last tile has the highest index), so a
    // pair is short exactly when k >= k_short (one compare per pair instead of three)
    const int k_short = partial_k >= 0 ? nmine - 2 : nmine - 1;
    // The pool is one record per (block, KV head): K codes (4D bytes) | V codes (4D) | k_scale | k_zero |
    // v_scale | v_zero (32 B each), the ring slot's order (MixedKVPool.allocate; cuda_ops checks it). So a
    // tile's three 16-byte cp.async per lane share one address (one IMAD.WIDE per tile) with immediate
    // offsets: bytes [16 l, 16 l + 16) of the first 512 (D = 128: K codes; D = 64: K then V codes), the same
    // of the next 512 (D = 128: V codes), and the TAIL scale / zero bytes (lanes 0..7; log8: 64 bytes, lanes 0..3).
    const uint8_t* src = p.records + (int64_t)kvh * p.c_sh + 16 * lane;
    const uint32_t cblk = (uint32_t)p.c_sblk;  // record bytes per block (< 2^32)
    const uint64_t pol = l2_policy(p.l2_evict_first != 0);
    auto tbl = [&](int k) { return k < nmine ? table[first + k * step] : 0; };
    // cp.async of tile k (local index) into the ring slot at shared address slot (this lane's 16 bytes)
    auto issue = [&](int k, int blk, uint32_t slot) {
      const bool ok = k < nmine;
      const uint8_t* a = mad_wide(blk, cblk, src);
      cp_async16(slot, a, ok, pol);
      if constexpr (NW == 4) cp_async16(slot + 4 * D, a + 4 * D, ok, pol);
      cp_async16(slot + 8 * D, a + 8 * D, ok && lane < TAIL / 16, pol);
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    // ring slot of tile k: k mod STAGES (a mask for power-of-two rings, else a running pointer)
    constexpr bool POW2 = (STAGES & (STAGES - 1)) == 0;
    const uint32_t ring_end = ring_s + STAGES * TB;
    uint32_t slot_run = ring_s;
    // The registers of NT INT2 tiles (PAIR: 2, else 1): the lane's K / V code words of each, K scale / zero of
    // tokens (g, g + 8), V scale / zero of tokens (2t, 2t + 1) and (2t + 8, 2t + 9) (PAIR: read_scales below).
    constexpr int NT = PAIR ? 2 : 1;
    struct Tile {
      uint32_t kw[NT][NW], vw[NT][NW], ksc, kzr;
      uint2 vsc, vzr;
    };
    // wait for the oldest ring slot, read tile k from it, refill it with tile k + STAGES (block id blk_next)
    // (noload: probe 7, the slot is not refilled)
    // the lane's K / V code words of the tile in the ring slot at `slot` (this lane's address)
    auto read_words = [&](uint32_t slot, uint32_t (&kw)[NW], uint32_t (&vw)[NW]) {
      if constexpr (NW == 4) {
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(kw[0]), "=r"(kw[1]), "=r"(kw[2]), "=r"(kw[3]) : "r"(slot) : "memory");
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4+%5];\n"
                     : "=r"(vw[0]), "=r"(vw[1]), "=r"(vw[2]), "=r"(vw[3]) : "r"(slot), "n"(4 * D) : "memory");
      } else {
        const uint32_t base = slot - 16 * lane;
        asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(kw[0]), "=r"(kw[1]) : "r"(base + 8 * lane) : "memory");
        asm volatile("ld.shared.v2.u32 {%0,%1}, [%2+%3];\n" : "=r"(vw[0]), "=r"(vw[1]) : "r"(base + 8 * lane), "n"(4 * D)
                     : "memory");
      }
    };
    // K scale / zero of tokens (g, g + 8), V scale / zero of tokens (2t, 2t + 1) and (2t + 8, 2t + 9), from the
    // slot whose lane-0 address is `base`; with PAIR each read takes tile b's slot (base + TB) for the lanes
    // whose columns / rows are tile b's: K (C layout) t >= 2, V scale (B layout) g >= 4, V zero (lz row) g = 2
    // (log8: one byte per token, so half the offsets and widths; ksc / kzr hold two bytes, vsc.x / vzr.x four)
    constexpr uint32_t SB = SF ? 1 : 2;  // bytes per scale / zero
    const uint32_t aK = (PAIR && t >= 2 ? TB : 0) + 2 * SB * g, aVs = (PAIR && g >= 4 ? TB : 0) + 4 * SB * t,
                   aVz = (PAIR && g == ZR + 1 ? TB : 0) + 4 * SB * t;
    auto read_scales = [&](uint32_t base, auto& x) {
      if constexpr (SF == 1) {
        unsigned short k0, k1;
        asm volatile("ld.shared.u16 %0, [%1+%2];\n" : "=h"(k0) : "r"(base + aK), "n"(8 * D) : "memory");
        asm volatile("ld.shared.u16 %0, [%1+%2];\n" : "=h"(k1) : "r"(base + aK), "n"(8 * D + 16) : "memory");
        x.ksc = k0;
        x.kzr = k1;
        asm volatile("ld.shared.u32 %0, [%1+%2];\n" : "=r"(x.vsc.x) : "r"(base + aVs), "n"(8 * D + 32) : "memory");
        asm volatile("ld.shared.u32 %0, [%1+%2];\n" : "=r"(x.vzr.x) : "r"(base + aVz), "n"(8 * D + 48) : "memory");
        x.vsc.y = x.vzr.y = 0u;
        return;
      }
      asm volatile("ld.shared.u32 %0, [%1+%2];\n" : "=r"(x.ksc) : "r"(base + aK), "n"(8 * D) : "memory");
      asm volatile("ld.shared.u32 %0, [%1+%2];\n" : "=r"(x.kzr) : "r"(base + aK), "n"(8 * D + 32) : "memory");
      asm volatile("ld.shared.v2.u32 {%0,%1}, [%2+%3];\n" : "=r"(x.vsc.x), "=r"(x.vsc.y) : "r"(base + aVs), "n"(8 * D + 64)
                   : "memory");
      asm volatile("ld.shared.v2.u32 {%0,%1}, [%2+%3];\n" : "=r"(x.vzr.x), "=r"(x.vzr.y) : "r"(base + aVz), "n"(8 * D + 96)
                   : "memory");
    };
    // wait for the oldest NT ring slots (adjacent: STAGES is even), read tiles k .. k + NT - 1 from them and
    // refill each with the tile STAGES ahead (block ids blk0, blk1; noload: probe 7, no refill)
    auto fetch = [&](int k, int blk0, int blk1, auto noload) {
      Tile x;
      const uint32_t slot = POW2 ? ring_s + (uint32_t)(k & (STAGES - 1)) * TB : slot_run;
      asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - NT) : "memory");
      __syncwarp();
#pragma unroll
      for (int n = 0; n < NT; n++) read_words(slot + n * TB, x.kw[n], x.vw[n]);
      read_scales(slot - 16 * lane, x);
      __syncwarp();  // every lane has read these stages before they are refilled
      if constexpr (!decltype(noload)::value) {
        issue(k + STAGES, blk0, slot);
        if constexpr (PAIR) issue(k + 1 + STAGES, blk1, slot + TB);
      }
      if constexpr (!POW2) slot_run = slot_run + NT * TB == ring_end ? ring_s : slot_run + NT * TB;
      return x;
    };
    // scores S = sum_dim c q' (tokens g, g + 8 x heads 2t, 2t + 1; tokens on M, heads on N): field P of every
    // code byte masked in place (the byte is then 4^P c: one LOP3 per 4 codes) is the u8 A operand of one
    // MMA per P (dims (D/4) P ..); the four s32 results join as 64 r0 + 16 r1 + 4 r2 + r3 = 64 sum c q8
    // (|.| < 2^23: exact in the float conversion), times sigma / 64 of the head. RAW (probe 6): no masking.
    // (PAIR: tile b's words kwb onto the same fragment, B = q8b on columns 4-7)
    auto scores = [&](auto raw, const uint32_t* kw, const uint32_t* kwb, float S[4]) {  // (pointers: cicc 13.0
      // crashes on array-reference parameters of a generic lambda)
      int r[4][4];
#pragma unroll
      for (int P = 0; P < 4; P++) {
        const uint32_t m = decltype(raw)::value ? 0xffffffffu : 0x03030303u << (2 * P);
        if constexpr (NW == 4)
          mma_u8s8_k32(r[P], kw[0] & m, kw[1] & m, kw[2] & m, kw[3] & m, q8[P][0], q8[P][QR - 1]);
        else
          mma_u8s8_k16(r[P], kw[0] & m, kw[NW - 1] & m, q8[P][0]);
        if constexpr (PAIR && NW == 4)
          mma_u8s8_k32_acc(r[P], kwb[0] & m, kwb[1] & m, kwb[2] & m, kwb[3] & m, q8b[P][0], q8b[P][QR - 1]);
        if constexpr (PAIR && NW == 2) mma_u8s8_k16_acc(r[P], kwb[0] & m, kwb[NW - 1] & m, q8b[P][0]);
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
        S[i] = __int2float_rn(r[0][i] * 64 + r[1][i] * 16 + r[2][i] * 4 + r[3][i]) * (i & 1 ? sg1 : sg0);
    };
    // K scale / zero of tokens g, g + 8 (fp32) and V scale / zero of tokens (2t, 2t + 1), (2t + 8, 2t + 9) (fp16
    // pairs) of tile x, decoded from its stored format (log8: table lookups, V in units of 2^v_top)
    auto kscale = [&](const auto& x, float& ks0, float& ks1, float& kz0, float& kz1) {
      if constexpr (SF == 1) {  // kz = zq / 4, in units of ks: 2^23 + zb as a float, then (2^23 + zb) / 4 - 2^21 - 32
        ks0 = sm_ks[x.ksc & 0xffu];
        ks1 = sm_ks[(x.ksc >> 8) & 0xffu];
        kz0 = fmaf(__uint_as_float(__byte_perm(x.kzr, 0x4B000000u, 0x7440)), 0.25f, -2097184.f);
        kz1 = fmaf(__uint_as_float(__byte_perm(x.kzr, 0x4B000000u, 0x7441)), 0.25f, -2097184.f);
      } else {
        ks0 = h2f_lo(x.ksc), ks1 = h2f_hi(x.ksc), kz0 = h2f_lo(x.kzr), kz1 = h2f_hi(x.kzr);
      }
    };
    auto vscale = [&](const auto& x, uint32_t& vs_a, uint32_t& vs_b, uint32_t& vz_a, uint32_t& vz_b) {
      if constexpr (SF == 1) {
        const uint32_t e = x.vsc.x;
        vs_a = (uint32_t)sm_vs[e & 0xffu] | ((uint32_t)sm_vs[(e >> 8) & 0xffu] << 16);
        vs_b = (uint32_t)sm_vs[(e >> 16) & 0xffu] | ((uint32_t)sm_vs[e >> 24] << 16);
        // vz = zq / 4 in units of vs: the halves 1024 + zb of the zero bytes, then zb / 4 - 32 (exact; 0.25, -288)
        const uint32_t za = __byte_perm(x.vzr.x, 0x64646464u, 0x4140), zb = __byte_perm(x.vzr.x, 0x64646464u, 0x4342);
        vz_a = hfma2_c(za, 0x34003400u, 0xDC80DC80u);
        vz_b = hfma2_c(zb, 0x34003400u, 0xDC80DC80u);
      } else {
        vs_a = x.vsc.x, vs_b = x.vsc.y, vz_a = x.vzr.x, vz_b = x.vzr.y;
      }
    };
    // logit - m of one score (ks S + kz QS - m; log8: ks (S + kz QS) - m, kz in units of ks)
    auto rel = [&](float ks, float kz, float Sv, float qs, float m) {
      if constexpr (SF == 1) return fmaf(ks, fmaf(kz, qs, Sv), -m);
      else return fmaf(ks, Sv, fmaf(kz, qs, -m));
    };
    // exact logits c = ks S + kz QS of tile x (tokens g, g + 8 x heads 2t, 2t + 1)
    auto logits = [&](const auto& x, const float S[4], float c[4]) {
      float ks0, ks1, kz0, kz1;
      kscale(x, ks0, ks1, kz0, kz1);
      c[0] = rel(ks0, kz0, S[0], qs0, 0.f);
      c[1] = rel(ks0, kz0, S[1], qs1, 0.f);
      c[2] = rel(ks1, kz1, S[2], qs0, 0.f);
      c[3] = rel(ks1, kz1, S[3], qs1, 0.f);
    };
    // softmax and output of tile k with scores S
    // vmma(b0, b1): the V MMAs of the tile (PAIR: of both tiles, each with the other's columns of P' zeroed)
    auto finish = [&](auto raw, int k, const auto& x, const float S[4], auto&& vmma) {
      // logits relative to the running max: e = ks S + kz QS - m
      float ks0, ks1, kz0, kz1;
      kscale(x, ks0, ks1, kz0, kz1);
      float e[4];
      e[0] = rel(ks0, kz0, S[0], qs0, m0);
      e[1] = rel(ks0, kz0, S[1], qs1, m1);
      e[2] = rel(ks1, kz1, S[2], qs0, m0);
      e[3] = rel(ks1, kz1, S[3], qs1, m1);
      uint32_t vs_a, vs_b, vz_a, vz_b;
      vscale(x, vs_a, vs_b, vz_a, vz_b);
      // a partial tile (PAIR: or a pair whose tile b is partial or past the warp's last tile)
      const bool short_ = PAIR ? k >= k_short : k == partial_k;
      if (__any_sync(0xffffffffu, short_ || e[0] > kSlack || e[1] > kSlack || e[2] > kSlack || e[3] > kSlack)) {
        // slow path (warp-uniform): exact logits, mask of the partial tile, new running max, rescale, and
        // fold the V offset into acc
        float c[4];
        logits(x, S, c);
        if (short_) {
          // tokens of local tile j that exist: 16, the sequence's partial last tile's count, 0 past the warp's last
          auto valid_of = [&](int j) { return j >= nmine ? 0 : j == partial_k ? len - lastt * kTile : kTile; };
          const int va = valid_of(k), vb = PAIR ? valid_of(k + 1) : va;
          // whose tokens the lane holds: logits (C layout) by column, V scale (B layout) by column, V zero by lz row
          const int vc = PAIR && t >= 2 ? vb : va, vs = PAIR && g >= 4 ? vb : va, vz = PAIR && g == ZR + 1 ? vb : va;
          if (g >= vc) c[0] = c[1] = -INFINITY;
          if (g + 8 >= vc) c[2] = c[3] = -INFINITY;
          // masked tokens get p = 0; zero their V scale / zero too (stale slots may hold anything)
          const int ta = 2 * t, tb = 2 * t + 8;
          auto keep = [&](int tok, int valid) {
            return (tok < valid ? 0xffffu : 0u) | (tok + 1 < valid ? 0xffff0000u : 0u);
          };
          vs_a &= keep(ta, vs); vs_b &= keep(tb, vs); vz_a &= keep(ta, vz); vz_b &= keep(tb, vz);
        }
        float mx0 = fmaxf(c[0], c[2]), mx1 = fmaxf(c[1], c[3]);
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
          mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
          mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
        }
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        const float al0 = ex2(m0 - n0), al1 = ex2(m1 - n1);
        m0 = n0;
        m1 = n1;
        e[0] = c[0] - n0;
        e[1] = c[1] - n1;
        e[2] = c[2] - n0;
        e[3] = c[3] - n1;
        float off[4][2];
        offsets(off);
        // log8: sum p z lives in sp (zsum), folded into acc here before sp restarts, as flush() does
        [[maybe_unused]] float zz0 = 0.f, zz1 = 0.f;
        if constexpr (SF == 1) zsum(zz0, zz1);
#pragma unroll
        for (int i = 0; i < KS; i++) {
          const int P0 = v_field(i);
          if constexpr (SF == 1) {
            const float w0 = float(1 << (2 * P0)), w1 = 4.f * w0;
            acc[i][0] = fmaf(zz0, w0, acc[i][0] - off[P0 - 1][0]) * al0;
            acc[i][1] = fmaf(zz1, w0, acc[i][1] - off[P0 - 1][1]) * al1;
            acc[i][2] = fmaf(zz0, w1, acc[i][2] - off[P0][0]) * al0;
            acc[i][3] = fmaf(zz1, w1, acc[i][3] - off[P0][1]) * al1;
          } else {
            acc[i][0] = (acc[i][0] - off[P0 - 1][0]) * al0;
            acc[i][1] = (acc[i][1] - off[P0 - 1][1]) * al1;
            acc[i][2] = (acc[i][2] - off[P0][0]) * al0;
            acc[i][3] = (acc[i][3] - off[P0][1]) * al1;
          }
        }
        sp[0] = sp[1] = sp[2] = sp[3] = 0.f;
        lz[0] *= al0;
        lz[1] *= al1;
      }
      // p in fp16, moved from the score (C) fragment to the B fragment: lane holds tokens 2t, 2t+1 (b0) and
      // 2t+8, 2t+9 (b1) of head g
      const uint32_t pm0 = movmatrix_t(pack_h2(ex2(e[0]), ex2(e[1])));
      const uint32_t pm1 = movmatrix_t(pack_h2(ex2(e[2]), ex2(e[3])));
      // l and (fp16 records) sum p z: one MMA (rows 0 / 1 of A = ones / v_zero)
      const uint32_t lz_a = SF ? lz_ones : lop3_and_or(vz_a, z_keep, lz_ones);
      const uint32_t lz_b = SF ? lz_ones : lop3_and_or(vz_b, z_keep, lz_ones);
      mma_f16(lz, lz_a, 0u, lz_b, 0u, pm0, pm1, lz[0], lz[1], lz[2], lz[3]);
      // p' = p * v_scale (fp16), the B operand of O^T += V^T P'; sp rows 0 / 1 += sum p' of even / odd tokens
      // (log8: rows ZR, ZR + 1 += sum p' zq / 4 = sum p z)
      const uint32_t b0 = hmul2(pm0, vs_a), b1 = hmul2(pm1, vs_b);
      const uint32_t sp_a = SF ? lop3_and_or(vz_a, z_keep, sp_ind) : sp_ind;
      const uint32_t sp_b = SF ? lop3_and_or(vz_b, z_keep, sp_ind) : sp_ind;
      mma_f16(sp, sp_a, 0u, sp_b, 0u, b0, b1, sp[0], sp[1], sp[2], sp[3]);
      vmma(b0, b1);
    };
    // O^T += V^T P' for one tile's V code words
    auto vout = [&](auto raw, const uint32_t* vw, uint32_t b0, uint32_t b1) {
#pragma unroll
      for (int w = 0; w < NW; w++) {
        uint32_t a[8];
        unpack_tile<decltype(raw)::value, NW>(vw, w, a);
        // register o[4 s + P - 1]: s = column half (token + 8), P - 1 = 2 u + row half (dim + 8)
        mma_f16(acc[2 * w], a[0], a[1], a[4], a[5], b0, b1, acc[2 * w][0], acc[2 * w][1], acc[2 * w][2], acc[2 * w][3]);
        mma_f16(acc[2 * w + 1], a[2], a[3], a[6], a[7], b0, b1, acc[2 * w + 1][0], acc[2 * w + 1][1],
                acc[2 * w + 1][2], acc[2 * w + 1][3]);
      }
    };
    // one tile at a time (probes 1, 6, 7: DecodeParams)
    auto body = [&](auto probe_tag, int k, int blk_next) {
      constexpr int PROBE = decltype(probe_tag)::value;  // 0, 1 (loads only), 6 (no unpack), 7 (no loads)
      const Tile x = fetch(k, blk_next, 0, std::integral_constant<bool, PROBE == 7>{});
      if constexpr (PROBE == 1) {  // keep the loads alive without the math
        lz[0] += __uint_as_float((x.kw[0][0] ^ x.vw[0][NW - 1] ^ x.ksc ^ x.kzr ^ x.vsc.x ^ x.vzr.y) & 0x3f800000u);
      } else {
        float S[4];
        constexpr std::integral_constant<bool, PROBE == 6> raw{};
        scores(raw, x.kw[0], x.kw[0], S);
        finish(raw, k, x, S, [&](uint32_t b0, uint32_t b1) { vout(std::integral_constant<bool, PROBE == 6>{}, x.vw[0], b0, b1); });
      }
    };
    // PAIR: tiles k and k + 1 (B fragment lanes g < 4 hold tile a's columns of P')
    const uint32_t keep_a = g < 4 ? 0xffffffffu : 0u;
    auto body_pair = [&](int k, int blk_a, int blk_b) {  // (x.kw[NT - 1]: tile b; compiled, never run, without PAIR)
      const Tile x = fetch(k, blk_a, blk_b, std::false_type{});
      float S[4];
      scores(std::false_type{}, x.kw[0], x.kw[NT - 1], S);
      finish(std::false_type{}, k, x, S, [&](uint32_t b0, uint32_t b1) {
        vout(std::false_type{}, x.vw[0], b0 & keep_a, b1 & keep_a);
        vout(std::false_type{}, x.vw[NT - 1], b0 & ~keep_a, b1 & ~keep_a);
      });
    };
    // block ids: tf = the first ring fill's (tiles 0 .. 31, lane k: tile k); in the loop's window [kc, kc + 32) lane
    // j of tn holds the id of tile kc + STAGES + j (the refill issued while tile kc + j is read), tn2 the next
    // window's (loaded a window ahead), so every refill id is one shuffle of one register at a static offset
    const int tf = tbl(lane);
    int tn = tbl(STAGES + lane), tn2 = tbl(32 + STAGES + lane);
    // early: the first STAGES tiles go out before the PDL wait unless one of them is the sequence's newest
    // (the page the previous kernel, the step's append, may have just demoted)
    const bool pre = p.early && first + (min(STAGES, nmine) - 1) * step < ntile - 1;
    if (pre) {
#pragma unroll
      for (int k = 0; k < STAGES; k++) issue(k, __shfl_sync(0xffffffffu, tf, k), ring_s + k * TB);
    }
    if constexpr (SF == 1) {  // 2^(-e / 32) (NaN at 255, a non-finite row), K with 2^k_top folded in (|top| <= 100)
      const float kt = __int_as_float((127 + p.k_top) << 23);
      for (int i = threadIdx.x; i < 256; i += NWARP * 32) {
        const float v = i == 255 ? __int_as_float(0x7fc00000) : exp2f(-0.03125f * (float)i);
        sm_ks[i] = v * kt;
        sm_vs[i] = __half_as_ushort(__float2half_rn(v));
      }
      __syncthreads();
    }
    if (p.early) decode_pdl_wait();
    prep_q();
    if (p.probe == 4 && __shfl_sync(0xffffffffu, q8[0][0] ^ (uint32_t)(tf + tn), 0) != 0x7fffffffu) return;
    if (!pre) {
#pragma unroll
      for (int k = 0; k < STAGES; k++) issue(k, __shfl_sync(0xffffffffu, tf, k), ring_s + k * TB);
    }
    // once per kFlushTiles tiles (outside the tile body, so that the steady-state tile pays no test for it) fold
    // the V offsets (sp) and the zero-point sum sum p z (lz row 1, lanes 4 + t) into acc: sum c p' (c >= 0) and
    // sum p z grow with every token while the output, their difference, is an average (small next to the values
    // where the softmax is flat over a long context; issue 8). With the even / odd offsets of unpack8 the run
    // between folds no longer matters for the offsets' cancellation (CPU emulation with a truncating
    // accumulator, tests/kernels/test_cuda_emulation.py: a flat softmax over 1024 tokens 1.8e-3 with folds every
    // 32 tiles, as with round-to-nearest; before, 2.4e-2 every 32 tiles, 3.9e-3 every 8).
    auto flush = [&]() {
      float z0, z1;
      zsum(z0, z1);
      float off[4][2];
      offsets(off);
#pragma unroll
      for (int i = 0; i < KS; i++) {
        // rows 16 i + g: weight 4^P; rows 16 i + g + 8: 4^(P + 1) (the epilogue's 1 / u0, 1 / u1)
        const int P0 = v_field(i);
        const float w0 = float(1 << (2 * P0)), w1 = 4.f * w0;
        acc[i][0] = fmaf(z0, w0, acc[i][0] - off[P0 - 1][0]);
        acc[i][1] = fmaf(z1, w0, acc[i][1] - off[P0 - 1][1]);
        acc[i][2] = fmaf(z0, w1, acc[i][2] - off[P0][0]);
        acc[i][3] = fmaf(z1, w1, acc[i][3] - off[P0][1]);
      }
      sp[0] = sp[1] = sp[2] = sp[3] = 0.f;
      if (!SF && z_row) lz[0] = lz[1] = 0.f;  // row 1 (sum p z; PAIR: and row 2) restarts; row 0 (l) keeps running
    };
    auto loop = [&](auto probe_tag) {
      for (int kc = 0; kc < nmine; kc += 32) {
        const int e2 = min(kc + 32, nmine);
        for (int k0 = kc; k0 < e2; k0 += kFlushTiles) {
          const int ke = min(k0 + kFlushTiles, e2);
          if constexpr (PAIR) {  // (the probes are the single-tile loop's)
            for (int k = k0; k < ke; k += 2)  // (k - kc even: k - kc + 1 <= 31)
              body_pair(k, __shfl_sync(0xffffffffu, tn, k - kc), __shfl_sync(0xffffffffu, tn, k - kc + 1));
          } else {
            for (int k = k0; k < ke; k++) body(probe_tag, k, __shfl_sync(0xffffffffu, tn, k - kc));
          }
          flush();
        }
        tn = tn2;
        tn2 = tbl(kc + 64 + STAGES + lane);
      }
    };
    // probe 8: the loads of probe 1 (same tiles, addresses and order) as plain 16-byte loads into registers,
    // 6 tiles in flight per warp (8 would spill at 128 registers), no shared memory: does the ring's shared-memory
    // path cost time or power? (H200, ninth session: it costs time, ~10%, not power)
    auto reg_loads = [&]() {
      uint32_t x = 0;
      for (int kc = 0; kc < nmine; kc += 32) {
        const int bl = tbl(kc + lane);
        for (int j0 = 0; j0 < 32 && kc + j0 < nmine; j0 += 6) {
          uint4 v[6][3];
#pragma unroll
          for (int j = 0; j < 6; j++) {
            const uint8_t* a = mad_wide(__shfl_sync(0xffffffffu, bl, (j0 + j) & 31), cblk, src);
            v[j][0] = v[j][1] = v[j][2] = make_uint4(0u, 0u, 0u, 0u);
            if (j0 + j < 32 && kc + j0 + j < nmine) {
              v[j][0] = ldg_cg16(a, pol);
              if constexpr (NW == 4) v[j][1] = ldg_cg16(a + 4 * D, pol);
              if (lane < TAIL / 16) v[j][2] = ldg_cg16(a + 8 * D, pol);
            }
          }
#pragma unroll
          for (int j = 0; j < 6; j++)
#pragma unroll
            for (int i = 0; i < 3; i++) x ^= v[j][i].x ^ v[j][i].y ^ v[j][i].z ^ v[j][i].w;
        }
      }
      lz[0] += __uint_as_float(x & 0x3f800000u);
    };
    if (p.probe == 8) reg_loads();
    else if (p.probe == 1) loop(std::integral_constant<int, 1>{});
    else if (p.probe == 6) loop(std::integral_constant<int, 6>{});
    else if (p.probe == 7) loop(std::integral_constant<int, 7>{});
    else loop(std::integral_constant<int, 0>{});
    asm volatile("cp.async.wait_group 0;\n" ::);
    // l (row 0, lanes t) and sum p z (row 1, lanes 4 + t; PAIR columns 4-7: row 2) of columns 2t, 2t + 1
    const float l0 = __shfl_sync(0xffffffffu, lz[0], t), l1 = __shfl_sync(0xffffffffu, lz[1], t);
    float z0, z1;
    zsum(z0, z1);
    float off[4][2];
    offsets(off);
    // log8: V was in units of 2^v_top (vscale), put back here (powers of two: exact)
    float vt = 1.f, z0s = z0, z1s = z1;
    if constexpr (SF == 1) {
      vt = __int_as_float((127 + p.v_top) << 23);
      z0s *= vt;
      z1s *= vt;
    }
#pragma unroll
    for (int i = 0; i < KS; i++) {
      const int P0 = v_field(i);  // rows 16 i + g + 8: P0 + 1
      const float u0 = vt / float(1 << (2 * P0)), u1 = u0 * 0.25f;
      fin[i][0] = (acc[i][0] - off[P0 - 1][0]) * u0 + z0s;
      fin[i][1] = (acc[i][1] - off[P0 - 1][1]) * u0 + z1s;
      fin[i][2] = (acc[i][2] - off[P0][0]) * u1 + z0s;
      fin[i][3] = (acc[i][3] - off[P0][1]) * u1 + z1s;
    }
    fm[0] = m0;
    fm[1] = m1;
    fl[0] = l0;
    fl[1] = l1;
    if constexpr (PAIR) {
      // head n's two streams, columns n (lanes t < 2) and n + 4 (t >= 2, the partner lane t ^ 2): rescaled to
      // their common max and summed, as two splits are merged; both lanes end with the merged values
      float ws[2], wo[2];
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const float om = __shfl_xor_sync(0xffffffffu, fm[j], 2), ol = __shfl_xor_sync(0xffffffffu, fl[j], 2);
        const float mm = fmaxf(fm[j], om);
        ws[j] = ex2(fm[j] - mm);
        wo[j] = ex2(om - mm);
        fl[j] = fl[j] * ws[j] + ol * wo[j];
        fm[j] = mm;
      }
#pragma unroll
      for (int i = 0; i < KS; i++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const float o = __shfl_xor_sync(0xffffffffu, fin[i][c], 2);
          fin[i][c] = fin[i][c] * ws[c & 1] + o * wo[c & 1];
        }
    }
  }

  if (p.probe == 5 && __shfl_sync(0xffffffffu, __float_as_uint(fin[0][0] + fl[0]), 0) != 0x7fffffffu) return;
  TRACE_WARP(warp);
  __syncthreads();  // all warps are done with the ring before it becomes sm_o
  // rows of D + 4 floats: lane (g, t) writes column 2t (+1), dim 16 mt + g (+8), so with rows of D floats the four
  // lanes of one g hit one bank (4-way conflicts on each of the 32 stores); the pad puts them 8 banks apart
  constexpr int DP = D + 4;
  static_assert(STAGES * TB >= 8 * DP * 4, "the padded sm_o fits in the ring's shared memory");
  float (*sm_o)[8][DP] = reinterpret_cast<float (*)[8][DP]>(smem);
  // per head, the warps' running max and sum (head-major: a thread reads its head's NWARP values as float4s)
  __shared__ __align__(16) float sm_m[8][NWARP], sm_l[8][NWARP];
  __shared__ int sm_slice;
#pragma unroll
  for (int mt = 0; mt < KS; mt++) {
    sm_o[warp][2 * t][16 * mt + g] = fin[mt][0];
    sm_o[warp][2 * t + 1][16 * mt + g] = fin[mt][1];
    sm_o[warp][2 * t][16 * mt + g + 8] = fin[mt][2];
    sm_o[warp][2 * t + 1][16 * mt + g + 8] = fin[mt][3];
  }
  if (g == 0) {
    sm_m[2 * t][warp] = fm[0];
    sm_m[2 * t + 1][warp] = fm[1];
    sm_l[2 * t][warp] = fl[0];
    sm_l[2 * t + 1][warp] = fl[1];
  }
  __syncthreads();
  TRACE(2);
  // The CTA's partial result (its warps combined): into shared memory for the cluster merge (each CTA keeps
  // its own, read by the others through distributed shared memory), else into the global partial buffers
  // that the last CTA merges.
  __shared__ __align__(16) float sm_po[CX > 0 ? 8 * D : 4];
  __shared__ float sm_pl[CX > 0 ? 8 : 1];
  const int slot = sm_slot;
  float* opart = CX > 0 ? sm_po : p.o_part + ((int64_t)bh * NS + slot) * G * D;
  float* lpart = CX > 0 ? sm_pl : p.lse_part + ((int64_t)bh * NS + slot) * G;
  // One pass, no barrier inside (fifty-third session): the thread of float4 item i4 (head h, dims d .. d + 3) reads
  // its head's NWARP maxima and sums as float4s, takes the max, the warps' weights c_w = 2^(m_w - max),
  // L = sum c_w l_w and sum c_w o_w, and writes that sum / L; the thread of d = 0 also the head's LSE. The end of
  // the call runs once per CTA: short code and short dependent chains (first thought paced by fetching its code from
  // L2, bench/icache_probe.py; Nsight, fifty-fourth session: instruction fetch is 6% of the stall samples of this end
  // code at 32K batch 1, barrier waits 50%, and a warp that ran it ahead gained nothing). H100, trace event 2 -> 3 (partials in shared memory -> the CTA's partial written): 0.63 us before (G threads computed the
  // per-head weights, a barrier, then each element's sum), 0.73 with this pass in rolled loops, 0.33 unrolled.
  static_assert(NWARP % 4 == 0, "the warps' max and sum are read as float4s");
  for (int i4 = threadIdx.x; i4 < G * D / 4; i4 += NWARP * 32) {
    const int h = (i4 * 4) / D, d = (i4 * 4) % D;
    float m[NWARP];
#pragma unroll
    for (int w = 0; w < NWARP; w += 4) *reinterpret_cast<float4*>(&m[w]) = *reinterpret_cast<const float4*>(&sm_m[h][w]);
    float mm = -1e30f;
#pragma unroll
    for (int w = 0; w < NWARP; w++) mm = fmaxf(mm, m[w]);
    float L = 0.f;
    float4 O = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < NWARP; w++) {
      const float c = ex2(m[w] - mm);  // an empty warp (m = -1e30, l = 0): 0, or 1 times l = 0 if all are
      const float4 v = *reinterpret_cast<const float4*>(&sm_o[w][h][d]);
      L += c * sm_l[h][w];
      O.x += c * v.x;
      O.y += c * v.y;
      O.z += c * v.z;
      O.w += c * v.w;
    }
    // Issue 11: a NaN score (NaN scale of a non-finite row) makes L NaN; "L > 0" would turn it into an empty
    // split, so test for zero instead and let NaN reach the output (1 / NaN weights every dim NaN).
    // (L >= 1 when not 0: the max warp contributes its l >= 1, so the MUFU reciprocal and log are exact enough)
    const float inv = L != 0.f ? __fdividef(1.f, L) : 0.f;
    *reinterpret_cast<float4*>(opart + i4 * 4) = make_float4(O.x * inv, O.y * inv, O.z * inv, O.w * inv);
    if (d == 0) lpart[h] = L != 0.f ? mm + __log2f(L) : -INFINITY;
  }
  // probe 3 (no merge): every CTA returns here, so no CTA waits at a barrier or for an arrival
  if (p.probe == 3) return;
  if constexpr (CX > 0) {
    // Cluster merge (variants 8 / 9; issue 7, the batch-1 fixed cost): the CX CTAs of a cluster are all the
    // splits of this (batch, KV head) (the plan makes NS = CX). Each CTA keeps its partial result in its own
    // shared memory; after one cluster barrier, CTA r combines the outputs [r G D / CX, (r + 1) G D / CX) by
    // reading the CX partials through distributed shared memory: no partial written to global memory, no
    // arrival atomic, no last-CTA round trips. A second barrier keeps every CTA's shared memory alive until
    // all have read it.
    cluster_sync();
    // pairs (output item, source CTA): CX consecutive lanes hold one item's CX sources (CX divides 32 and
    // G D), reduced with shuffles inside the group
    const int nitem = G * D / CX;
    const int s = threadIdx.x % CX;
    T* out = reinterpret_cast<T*>(p.out);
    for (int base = 0; base < nitem * CX; base += NWARP * 32) {
      const int pair = base + threadIdx.x;
      const bool ok = pair < nitem * CX;
      const int gi = split * nitem + (ok ? pair / CX : 0);  // split == this CTA's rank in the cluster
      const int h = gi / D, d = gi % D;
      const float lse = ok ? ld_cluster(&sm_pl[h], s) : -INFINITY;
      const float o = ok ? ld_cluster(&sm_po[gi], s) : 0.f;
      float mx = lse;
      int nan = isnan(lse);
#pragma unroll
      for (int off = 1; off < CX; off <<= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        nan |= __shfl_xor_sync(0xffffffffu, nan, off);
      }
      const float e = mx == -INFINITY ? 0.f : exp2f(lse - mx);
      float den = e, num = e * o;
#pragma unroll
      for (int off = 1; off < CX; off <<= 1) {
        den += __shfl_xor_sync(0xffffffffu, den, off);
        num += __shfl_xor_sync(0xffffffffu, num, off);
      }
      if (ok && s == 0)
        out[b * p.o_sb + (int64_t)(kvh * G + h) * p.o_sh + d] =
            M::from_float(nan ? __int_as_float(0x7fc00000) : den > 0.f ? num / den : 0.f);
    }
    cluster_sync();
    return;
  } else {
  // ---- the last CTA of this (batch, KV head) merges all splits. Arrival: one acq_rel atomic by thread 0
  // after the CTA barrier (release: the CTA's partial writes, ordered before it by the barrier, are visible
  // GPU-wide before the count moves; acquire: the last CTA then sees every other CTA's partials), the
  // pattern of CUTLASS's semaphore; no __threadfence by every thread (issue 7, batch-1 fixed cost).
  __syncthreads();
  TRACE(3);
  const int NSb = sm_nsb;
  // output element i4 * 4 .. + 3 of this (sequence, KV head)'s G x D outputs (either merge below)
  T* out = reinterpret_cast<T*>(p.out);
  auto store = [&](int i4, float4 acc) {
    const int h = (i4 * 4) / D, d = (i4 * 4) % D;
    T* dst = out + b * p.o_sb + (int64_t)(kvh * G + h) * p.o_sh + d;
    dst[0] = M::from_float(acc.x);
    dst[1] = M::from_float(acc.y);
    dst[2] = M::from_float(acc.z);
    dst[3] = M::from_float(acc.w);
  };
  // the partials of this (sequence, KV head): slot s's G x D outputs and G LSEs (either merge below)
  constexpr int NT = NWARP * 32;
  const float* obase = p.o_part + (int64_t)bh * NS * G * D;
  const float* lbase = p.lse_part + (int64_t)bh * NS * G;
  const int nitem = G * D / 4;
  auto opart_at = [&](int s, int i4) {  // slot s's float4 output i4
    return __ldcg(reinterpret_cast<const float4*>(obase + (int64_t)s * G * D + i4 * 4));
  };
  auto lse_of = [&](int s, int h) { return __ldcg(lbase + s * G + h); };  // slot s's LSE of head h
  auto addw = [&](float4& acc, float wt, const float4& v) {  // wt = 0 for empty splits, whose partial is 0
    acc.x += wt * v.x;
    acc.y += wt * v.y;
    acc.z += wt * v.z;
    acc.w += wt * v.w;
  };
  if (p.merge_poll) {
    // ---- Poll merge (thirty-fifth session; opt-in, measured slower: CudaDecodeConfig.poll_merge; the fold is
    // replayed on the CPU in tests/kernels/test_merge_emulation.py). Planned only for one-wave grids of <= 64
    // splits, so that every CTA is resident while the merger waits. The CTA of partial slot 0 (the first
    // BF16-tier split when there is one; those end early at 128K batch 1) merges. Every CTA publishes its slot
    // with one release store of a flag after the CTA barrier (the CUTLASS semaphore pattern again, as a store: no
    // arrival atomic on anyone's path); the merger folds the slots as their flags appear, in rounds (warp 0
    // polls every unfolded flag with acquire loads, the CTA loads the new slots' partials and LSEs and folds
    // them with a running max), so after the last arrival only its slot's loads and the output remain.
    // Flags live after the B * HKV arrival counters (DecodePlan sizes the buffer) and are 0 between calls: the
    // merger clears them; the next call's CTAs write theirs only after their PDL wait, i.e. after this grid.
    int* flags = p.counters + gridDim.y + (int64_t)bh * NS;
    if (threadIdx.x == 0) asm volatile("st.release.gpu.global.s32 [%0], 1;\n" ::"l"(flags + slot) : "memory");
    TRACE(4);
    if (slot != 0) return;
    constexpr int IPT = (8 * D / 4 + NT - 1) / NT;  // float4 outputs per thread (G <= 8)
    constexpr int KP = 8;                           // a thread's partial loads in flight per batch
    __shared__ unsigned char sm_list[64];  // the slots that arrived since the last round
    __shared__ int sm_nnew, sm_all;
    float mx[IPT], den[IPT];
    float4 acc[IPT];
    bool nan[IPT];
#pragma unroll
    for (int k = 0; k < IPT; k++) mx[k] = -INFINITY, den[k] = 0.f, acc[k] = make_float4(0.f, 0.f, 0.f, 0.f), nan[k] = false;
    unsigned done0 = 0, done1 = 0;  // folded slots (warp 0's registers)
    const unsigned all0 = NSb >= 32 ? 0xffffffffu : (1u << NSb) - 1u;
    const unsigned all1 = NSb <= 32 ? 0u : NSb >= 64 ? 0xffffffffu : (1u << (NSb - 32)) - 1u;
    for (long long round = 0;; round++) {
      if (warp == 0) {
        int f0 = 0, f1 = 0;
        if (lane < NSb && !((done0 >> lane) & 1u))
          asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(f0) : "l"(flags + lane) : "memory");
        if (lane + 32 < NSb && !((done1 >> lane) & 1u))
          asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(f1) : "l"(flags + lane + 32) : "memory");
        const unsigned n0 = __ballot_sync(0xffffffffu, f0 != 0), n1 = __ballot_sync(0xffffffffu, f1 != 0);
        done0 |= n0, done1 |= n1;
        if (lane == 0) {
          int c = 0;
          for (unsigned m = n0; m; m &= m - 1) sm_list[c++] = __ffs(m) - 1;
          for (unsigned m = n1; m; m &= m - 1) sm_list[c++] = 32 + __ffs(m) - 1;
          sm_nnew = c;
          sm_all = done0 == all0 && done1 == all1;
        }
        if (round > (1ll << 26)) __trap();  // a slot that never arrives (a bug): fail loudly, never hang
      }
      __syncthreads();
      const int nn = sm_nnew;
      const bool last = sm_all != 0;
#pragma unroll
      for (int k = 0; k < IPT; k++) {
        const int i4 = threadIdx.x + k * NT;
        if (i4 >= nitem) continue;
        const int h = (i4 * 4) / D;
        for (int j0 = 0; j0 < nn; j0 += KP) {
          float4 v[KP];
          float ls[KP];
#pragma unroll
          for (int j = 0; j < KP; j++) {
            const bool ok = j0 + j < nn;
            const int s = ok ? sm_list[j0 + j] : 0;
            v[j] = ok ? opart_at(s, i4) : make_float4(0.f, 0.f, 0.f, 0.f);
            ls[j] = ok ? lse_of(s, h) : -INFINITY;
          }
          float m2 = mx[k];
#pragma unroll
          for (int j = 0; j < KP; j++) m2 = fmaxf(m2, ls[j]), nan[k] |= isnan(ls[j]);
          if (m2 == -INFINITY) continue;  // only empty splits so far (their partials are 0)
          const float c = exp2f(mx[k] - m2);  // 0 while mx is -inf (den, acc are 0 then)
          den[k] *= c;
          acc[k].x *= c, acc[k].y *= c, acc[k].z *= c, acc[k].w *= c;
#pragma unroll
          for (int j = 0; j < KP; j++) {  // unused slots: lse -inf, e = 0, v = 0
            const float e = exp2f(ls[j] - m2);
            den[k] += e;
            addw(acc[k], e, v[j]);
          }
          mx[k] = m2;
        }
      }
      if (last) break;
      __syncthreads();  // sm_list is rewritten by the next round
    }
    TRACE(5);
    const float qnan = __int_as_float(0x7fc00000);
#pragma unroll
    for (int k = 0; k < IPT; k++) {
      const int i4 = threadIdx.x + k * NT;
      if (i4 >= nitem) continue;
      const float r = den[k] > 0.f ? 1.f / den[k] : 0.f;  // a NaN LSE (issue 11) makes the head NaN
      store(i4, nan[k] ? make_float4(qnan, qnan, qnan, qnan)
                       : make_float4(acc[k].x * r, acc[k].y * r, acc[k].z * r, acc[k].w * r));
    }
    if (threadIdx.x < NSb) flags[threadIdx.x] = 0;
#ifdef OSCARKV_TRACE
    TRACE(6);
    __syncthreads();
    TRACE(7);
#endif
    return;
  }
  // Merge slices (CudaDecodeConfig.merge_slices; thirty-ninth session): the last NSL CTAs to arrive each merge
  // the outputs [s nitem / NSL, (s + 1) nitem / NSL) of this (sequence, KV head), so that after the last arrival each
  // merger loads 1 / NSL of the partials (one L2 round trip) instead of one CTA loading all of them. The last
  // arrival takes slice NSL - 1 at once; the others (helpers, slices 0 .. NSL - 2) poll the counter until it reaches
  // NSb (acquire: they then see every partial), then count themselves on it once more; the helper whose count
  // makes NSb + NSL - 1 resets it to 0 (every helper has seen NSb by then, and the next call's arrivals come after
  // its PDL wait, i.e. after this grid). Helpers wait on CTAs that are already running only where the plan has
  // every CTA of the grid resident at once (one wave), as it sets NSL > 1 only there. NSL = 1: the last CTA merges
  // everything and resets the counter (the merge before this session).
  const int NSL = min(max(p.merge_slices, 1), NSb);
  __shared__ int sm_reset;
  if (threadIdx.x == 0) {
    int prev;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(prev) : "l"(p.counters + bh) : "memory");
    sm_slice = prev - (NSb - NSL);  // this CTA's slice; < 0: not a merger
    sm_reset = NSL == 1 ? 1 : 0;
    if (sm_slice >= 0 && sm_slice < NSL - 1) {
      int c;
      do {
        asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(c) : "l"(p.counters + bh) : "memory");
      } while (c < NSb);
      int ack;
      asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(ack) : "l"(p.counters + bh) : "memory");
      sm_reset = ack == NSb + NSL - 2;
    }
    TRACE(4);
  }
  __syncthreads();
  const int slice = sm_slice;
  if (slice < 0) return;
  // Merge. Thread groups: when a CTA has more threads than float4 outputs (G * D / 4), ngrp groups take
  // every ngrp-th split and add their partial sums through shared memory (the last NWARP * 128 floats of
  // sm_o). Warp w first issues the loads of head w's LSEs (lanes over splits), each thread those of its partial
  // outputs (up to KF splits), all in the same L2 round trip; then warp w, for heads h = w, w + NWARP, ..., writes
  // their weights w[s][h] = 2^(lse - max) / sum into shared memory (sm_o's first NS * G floats; the plan keeps
  // NS * G <= NWARP * (8 D - 128)): one barrier between the arrival and the sums. Fifty-third session: the LSEs used
  // to be staged in shared memory behind a barrier of their own, and the step was 2-3x longer code with longer
  // dependent chains (exp2f, IEEE division, loops the compiler unrolled).
  constexpr int KF = 12;  // partial outputs in flight per thread
  float* w = &sm_o[0][0][0];
  float4* red = reinterpret_cast<float4*>(&sm_o[0][0][0] + NWARP * (8 * D - 128));
  // (small_div, shifts: no integer division, ~20 instructions each, on this path)
  const int i_lo = small_div(slice * nitem, NSL), nit = small_div((slice + 1) * nitem, NSL) - i_lo;  // its outputs
  // groups: the largest power of two <= min(NT / nit, NSb), so that per >= nit when ngrp > 1
  const int ngrp = nit >= NT ? 1 : 1 << (31 - __clz(min(small_div(NT, nit), NSb)));
  const int gsh = __ffs(ngrp) - 1;
  const int per = NT >> gsh;  // threads per group
  const int grp = threadIdx.x >> (31 - __clz(per));
  const int item0 = threadIdx.x & (per - 1);
  const bool active = grp < ngrp && item0 < nit;
  // the LSEs of this warp's first head (h = warp; splits lane and lane + 32), issued before the partial outputs:
  // the weights below wait for them, the sums only later for the outputs
  const auto lse_at = [&](int s, int h) { return s < NSb ? lse_of(s, h) : -INFINITY; };
  float v0 = -INFINITY, v1 = -INFINITY;
  if (warp < G) {
    v0 = lse_at(lane, warp);
    v1 = lse_at(lane + 32, warp);
  }
  float4 o[KF];
  if (active) {
    // slot grp + j ngrp's item: one base, 32-bit steps (NS G D floats per (sequence, KV head) stay below 2^31)
    const float4* src = reinterpret_cast<const float4*>(obase + (int64_t)grp * G * D) + i_lo + item0;
    const int step = ngrp * G * D / 4;
#pragma unroll
    for (int j = 0; j < KF; j++)
      if (grp + j * ngrp < NSb) o[j] = __ldcg(src + j * step);
  }
  TRACE(5);
#pragma unroll 1
  for (int h = warp; h < G; h += NWARP) {
    // splits lane and lane + 32 in registers; beyond 64 splits (not planned at batch 1) a loop through w
    if (h != warp) {  // a further head of this warp (G > NWARP)
      v0 = lse_at(lane, h);
      v1 = lse_at(lane + 32, h);
    }
    float mx = fmaxf(v0, v1);
    bool nan = isnan(v0) || isnan(v1);  // fmaxf drops NaN: a NaN lse must make the whole head NaN (issue 11)
#pragma unroll 1
    for (int s = lane + 64; s < NSb; s += 32) {
      const float v = lse_of(s, h);
      w[s * G + h] = v;
      mx = fmaxf(mx, v);
      nan |= isnan(v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    nan = __any_sync(0xffffffffu, nan);
    const bool none = mx == -INFINITY;  // every split empty: weights 0
    const float e0 = none ? 0.f : ex2(v0 - mx), e1 = none ? 0.f : ex2(v1 - mx);
    float den = e0 + e1;
#pragma unroll 1
    for (int s = lane + 64; s < NSb; s += 32) den += none ? 0.f : ex2(w[s * G + h] - mx);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    // den >= 1 unless none (the max split contributes 1)
    const float inv = nan ? __int_as_float(0x7fc00000) : den > 0.f ? __fdividef(1.f, den) : 0.f;
    if (lane < NSb) w[lane * G + h] = e0 * inv;
    if (lane + 32 < NSb) w[(lane + 32) * G + h] = e1 * inv;
#pragma unroll 1
    for (int s = lane + 64; s < NSb; s += 32) w[s * G + h] = (none ? 0.f : ex2(w[s * G + h] - mx)) * inv;
  }
  __syncthreads();
  TRACE(6);
  if (active) {
    for (int i4 = i_lo + item0; i4 < i_lo + nit; i4 += per) {
      const int h = (i4 * 4) / D;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      int s0 = grp;
      if (i4 == i_lo + item0) {  // the loads issued before the weights
        const float* wg = w + grp * G + h;  // split grp + j ngrp's weight: wg[j * wstep]
        const int wstep = ngrp * G;
#pragma unroll
        for (int j = 0; j < KF; j++)
          if (grp + j * ngrp < NSb) addw(acc, wg[j * wstep], o[j]);
        s0 = grp + KF * ngrp;
      }
      // further splits (or further items when G * D / 4 > NT), up to 8 loads in flight
      for (; s0 < NSb; s0 += 8 * ngrp) {
        float4 v[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (s0 + j * ngrp < NSb) v[j] = opart_at(s0 + j * ngrp, i4);
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (s0 + j * ngrp < NSb) addw(acc, w[(s0 + j * ngrp) * G + h], v[j]);
      }
      if (ngrp == 1) store(i4, acc);
      else red[grp * nit + i4 - i_lo] = acc;
    }
  }
  if (ngrp > 1) {
    __syncthreads();
    if (threadIdx.x < nit) {
      float4 acc = red[threadIdx.x];
#pragma unroll 1
      for (int r = 1; r < ngrp; r++) addw(acc, 1.f, red[r * nit + threadIdx.x]);
      store(i_lo + threadIdx.x, acc);
    }
  }
  if (threadIdx.x == 0 && sm_reset) p.counters[bh] = 0;
#ifdef OSCARKV_TRACE
  __syncthreads();  // every thread's stores issued (trace builds only)
  TRACE(7);
#endif
  }  // CX == 0
}

// ------------------------------------------------------------------------------------------------------
// Append: (a) copy new rows into hp slots, (b) quantize whole 16-token pages into tile16 int2 blocks, each
// row taken from the hp pool (demotion) or from the new rows (prefill straight into INT2). Same arithmetic
// as oscarkv.quant.format.quantize (fp32, IEEE division, scale/zero rounded to fp16 before coding). The clip
// threshold tau = sort(|x|)[k] is found by a 31-step radix select over the bits of |x| (exact; no d x d
// comparison).

// sc / zr: the row's stored scale and zero (SF 0: __half; SF 1, log8: uint8 e and zq + 128, with the format's table
// log8 and the side's scale_top `top`, exactly as oscarkv.quant.format.group_scale_zero)
template <int D, int SF>
__device__ __forceinline__ void quant_row(float x[D / 32], int clip, int lane, uint8_t* codes_row, void* sc, void* zr,
                                          const float* log8, int top) {
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
    // largest res with #{|x| < res} <= clip, two bits per step (three independent counts; |x| < 2^31)
    uint32_t res = 0;
    for (int bit = 29; bit >= 1; bit -= 2) {
      int c[3] = {0, 0, 0};
#pragma unroll
      for (int j = 0; j < 3; j++) {
        const uint32_t cand = res | ((uint32_t)(j + 1) << bit);
#pragma unroll
        for (int e = 0; e < E; e++) c[j] += a[e] < cand;
      }
      const int c1 = __reduce_add_sync(0xffffffffu, c[0]), c2 = __reduce_add_sync(0xffffffffu, c[1]),
                c3 = __reduce_add_sync(0xffffffffu, c[2]);
      res |= (uint32_t)(c3 <= clip ? 3 : c2 <= clip ? 2 : c1 <= clip ? 1 : 0) << bit;
    }
    {  // bit 0
      int c = 0;
#pragma unroll
      for (int e = 0; e < E; e++) c += a[e] < (res | 1u);
      if (__reduce_add_sync(0xffffffffu, c) <= clip) res |= 1u;
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
  const float raw = bad ? __int_as_float(0x7fc00000) : __fdiv_rn(fmaxf(hi - lo, 1e-8f), 3.0f);
  float sf, zf;
  uint32_t sbits, zbits;  // what is stored
  if constexpr (SF == 1) {
    // e = the count of the format's midpoints (descending, log8[256 ..]) above raw 2^-top: 8 steps of a binary search
    const float sn = __fmul_rn(raw, __int_as_float((127 - top) << 23));
    const float* mids = log8 + 256;
    int e = 0;
#pragma unroll
    for (int step = 128; step > 0; step >>= 1)
      if (e + step <= 255 && __ldg(mids + e + step - 1) > sn) e += step;
    e = bad ? 255 : min(e, 254);
    sf = __fmul_rn(__ldg(log8 + e), __int_as_float((127 + top) << 23));
    const float zq = fminf(fmaxf(rintf(__fdiv_rn(4.f * lo, sf)), -128.f), 127.f);
    zf = __fmul_rn(sf, zq) * 0.25f;
    sbits = (uint32_t)e;
    zbits = (uint32_t)((int)zq + 128) & 0xffu;
  } else {
    const __half s = __float2half_rn(raw);
    const __half z = __float2half_rn(lo);
    sf = __half2float(s), zf = __half2float(z);
    sbits = __half_as_ushort(s);
    zbits = __half_as_ushort(z);
  }
#pragma unroll
  for (int e = 0; e < E; e++) {
    const float u = __fdiv_rn(x[e] - zf, sf);
    const float c = fminf(fmaxf(floorf(u + 0.5f), 0.f), 3.f);
    codes_row[lane + 32 * e] = (uint8_t)c;
  }
  if (lane == 0) {
    if constexpr (SF == 1) {
      *static_cast<uint8_t*>(sc) = (uint8_t)sbits;
      *static_cast<uint8_t*>(zr) = (uint8_t)zbits;
    } else {
      *static_cast<unsigned short*>(sc) = (unsigned short)sbits;
      *static_cast<unsigned short*>(zr) = (unsigned short)zbits;
    }
  }
}

constexpr int kAppendWarps = 16;  // one warp per row of a page
constexpr int64_t kNullBlock = 0;  // kernels/paged.py NULL_BLOCK: never a page's destination, padding only
constexpr int kRotCols = 32;      // columns (K rows and queries) per rotation CTA of the append (2 m-tiles)

// x @ R for one row held by a warp (lane l holds elements l + 32 e), R [D, D] fp32 in global memory: the rare
// page of the append that is quantized straight from new rows (a MixedKVCache without a recent window) when R_K
// is fused into the append; the rotation CTAs below do every other row with tensor cores
template <typename T, int D>
__device__ __forceinline__ void rotate_row(float (&x)[D / 32], const float* R, int lane) {
  constexpr int E = D / 32;
  using M = MmaType<T>;
  float y[E];
#pragma unroll
  for (int e = 0; e < E; e++) y[e] = 0.f;
#pragma unroll
  for (int ei = 0; ei < E; ei++)
    for (int src = 0; src < 32; src++) {
      const float xi = __shfl_sync(0xffffffffu, x[ei], src);
      const float* Ri = R + (32 * ei + src) * D + lane;
#pragma unroll
      for (int e = 0; e < E; e++) y[e] = fmaf(xi, __ldg(Ri + 32 * e), y[e]);
    }
#pragma unroll
  for (int e = 0; e < E; e++) x[e] = M::to_float(M::from_float(y[e]));
}

// The rotation CTAs of the append (R_K fused, AppendParams::rot): Y = X R for kRotCols rows of X ("columns" of the
// CTA's work, from c0 on) of KV head h: X rows 0 .. n_rows - 1 are the new K rows (Y goes to their hp slot), then
// with q the group's queries (row r, head h * group + j is X row n_rows + r * group + j; Y goes to q_out). Tensor
// cores, m16n8k16: X rows on M (16 per m-tile), R on B, one warp per 8 output dims (n-tile) holding its columns of R
// as B fragments for the whole CTA, split into T halves hi + lo (R - hi rounded again), so that the fp32 sums
// x hi + x lo are R's fp32 products to ~2^-16 before the one rounding to T (the reference rounds an fp32 matmul
// once). The R loads come before the PDL wait (a weight no kernel of the step writes), the trigger of the next
// kernel before them. After the wait the CTA stages its X rows in shared memory, every 32-bit load of the CTA in
// flight at once, and the MMAs read their A fragments from there: one memory round trip for X. (Until 2026-12-05
// each warp loaded its A fragments from global memory two k-steps ahead of its MMAs, ~5 round trips per m-tile,
// and 64 columns per CTA put 4 m-tiles one after the other at batch 59: the append with R_K took 18.95 us per step
// against 3.36 without, H200, bench/results/2026-12-05_s28b_*.) 32 columns per CTA keep the staged words (4 per
// thread) and R's 32 floats within the kernel's 64 registers without a spill (2 CTAs per SM for the page CTAs).
template <typename T, int D>
__device__ __forceinline__ void rotate_cta(const AppendParams& p, int h, int c0) {
  using M = MmaType<T>;
  constexpr int KS = D / 16, NTO = D / 8, NG = kAppendWarps / NTO;  // k-steps, output n-tiles, warps per n-tile
  constexpr int XW = D / 2 + 4;  // words per staged row: element pairs + 4 (conflict-free fragment reads)
  constexpr int PER = kRotCols * (D / 2) / (kAppendWarps * 32);  // staged words per thread
  static_assert(PER * kAppendWarps * 32 == kRotCols * (D / 2), "X tile words must divide among the threads");
  __shared__ uint32_t xs[kRotCols][XW];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int nt = warp % NTO, grp = warp / NTO;
  const float* R = p.rot + (p.rot_heads > 1 ? h : 0) * D * D;
  pdl_trigger();  // the decode kernel may be scheduled now (it waits for this whole grid before reading q)
  // B = R: b0 = R[16 ks + 2 t (+ 1)][8 nt + g], b1 = R[16 ks + 2 t + 8 (+ 1)][8 nt + g], loaded before the PDL wait
  // (R is a weight that no kernel of the step writes), while the row table below is built; split into hi / lo
  // after the X loads are issued (not before the wait: where the previous kernel does not trigger early, the
  // split would then wait for R before the X loads could go out)
  float rf[KS][2][2];
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const float* Rk = R + (16 * ks + 2 * t + 8 * i) * D + 8 * nt + g;
      rf[ks][i][0] = __ldg(Rk);
      rf[ks][i][1] = __ldg(Rk + D);
    }
  // Each X row's source and destination (nullptr: no row / no hp slot), one thread per row, into shared memory
  // before the PDL wait: they depend on the plan (hp_slots: host copies, as page_dst) and on the launch
  // parameters only, never on a kernel of the step; so their integer divisions (by the GQA group) overlap the
  // previous kernel instead of following the wait, and every thread below reads a pointer instead of dividing.
  __shared__ const T* x_src[kRotCols];
  __shared__ T* x_dst[kRotCols];
  const int nx = p.n_rows * (1 + (p.q ? p.group : 0));  // rows of X
  if (threadIdx.x < kRotCols) {
    const int x = c0 + threadIdx.x;
    const T* src = nullptr;
    T* dst = nullptr;
    if (x < p.n_rows) {  // a new K row: to its hp slot
      src = reinterpret_cast<const T*>(p.k) + x * p.k_sr + h * p.k_sh;
      const int64_t slot = p.hp_slots[x];
      if (slot >= 0) dst = reinterpret_cast<T*>(p.k_hp) + (slot / kTile) * p.h_sblk + h * p.h_sh + (slot % kTile) * p.h_srow;
    } else if (x < nx) {  // query j % group of row j / group: to q_out
      const int j = x - p.n_rows, r = j / p.group, hq = h * p.group + j % p.group;
      src = reinterpret_cast<const T*>(p.q) + r * p.q_sr + hq * p.q_sh;
      dst = reinterpret_cast<T*>(p.q_out) + ((int64_t)r * p.hkv * p.group + hq) * D;
    }
    x_src[threadIdx.x] = src;
    x_dst[threadIdx.x] = dst;
  }
  __syncthreads();
  pdl_wait();
  // stage X rows c0 .. c0 + kRotCols - 1 (zeros past nx): all loads first, then the stores
  uint32_t w[PER];
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int e = threadIdx.x + i * kAppendWarps * 32;
    const T* src = x_src[e / (D / 2)];
    w[i] = src ? __ldcg(reinterpret_cast<const unsigned int*>(src) + e % (D / 2)) : 0u;  // global, via L2
  }
  // hi = R rounded to T (one paired conversion), lo = (R - hi) rounded to T (another): the unpacked hi are exact
  // floats from bit shifts, so two conversions per pair of R's elements instead of four (ptxas places them after the
  // X stores' barrier, whatever the source order: 32 F2FP per thread, ~0.5 us of the SM's conversion unit per CTA)
  uint32_t bhi[KS][2], blo[KS][2];
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const float r0 = rf[ks][i][0], r1 = rf[ks][i][1];
      float h0, h1;
      bhi[ks][i] = M::pack(r0, r1);
      M::unpack(bhi[ks][i], h0, h1);
      blo[ks][i] = M::pack(r0 - h0, r1 - h1);
    }
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int e = threadIdx.x + i * kAppendWarps * 32;
    xs[e / (D / 2)][e % (D / 2)] = w[i];
  }
  __syncthreads();
  // the warp's m-tiles (kRotCols / 16 / NG: 2 at head_dim 128) side by side, so that their MMA chains overlap;
  // rows past nx are staged zeros, computed and not stored
  constexpr int MW = kRotCols / 16 / NG;
  if (c0 + 16 * grp >= nx) return;
  float acc[MW][4];
#pragma unroll
  for (int m = 0; m < MW; m++) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int m = 0; m < MW; m++) {
      // A = X: a0 = X[16 mt + g][16 ks + 2 t (+ 1)], a1 = row + 8, a2 / a3 = dims + 8 (word 8 ks + t (+ 4) of the
      // row), m-tile mt = grp + m NG
      const uint32_t* x0 = xs[16 * (grp + m * NG) + g];
      const uint32_t* x1 = x0 + 8 * XW;
      const uint32_t a[4] = {x0[8 * ks + t], x1[8 * ks + t], x0[8 * ks + t + 4], x1[8 * ks + t + 4]};
      M::mma(acc[m], a, bhi[ks][0], bhi[ks][1]);
      M::mma(acc[m], a, blo[ks][0], blo[ks][1]);
    }
  // C: acc[0], acc[1] = Y[16 mt + g][8 nt + 2 t (+ 1)], acc[2], acc[3] = row + 8: one 32-bit store per row
#pragma unroll
  for (int m = 0; m < MW; m++) {
    T* d0 = x_dst[16 * (grp + m * NG) + g];
    T* d1 = x_dst[16 * (grp + m * NG) + g + 8];
    if (d0) *reinterpret_cast<uint32_t*>(d0 + 8 * nt + 2 * t) = M::pack(acc[m][0], acc[m][1]);
    if (d1) *reinterpret_cast<uint32_t*>(d1 + 8 * nt + 2 * t) = M::pack(acc[m][2], acc[m][3]);
  }
}

// grid (2 n_pages + row CTAs, hkv): CTA 2 pg + which quantizes the K (which = 0) or V page pg of one head; at most
// 64 registers (two 16-warp CTAs per SM, which the page CTAs of a demotion step at a large batch need)
template <typename T, int D, int SF>
__global__ void __launch_bounds__(kAppendWarps * 32, 2) append_kernel(const AppendParams p) {
  constexpr int E = D / 32;
  constexpr int NW = D / 32;
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  using M = MmaType<T>;
  const int row_ctas = p.do_rows ? (p.n_rows + kAppendWarps - 1) / kAppendWarps : 0;
  const int rc = (int)blockIdx.x - (p.do_pages ? 2 * p.n_pages : 0);  // index past the page CTAs
  if (p.rot && p.do_rows && rc >= row_ctas) {  // the rotation CTAs (R_K fused): after the row copies' CTAs
    rotate_cta<T, D>(p, h, (rc - row_ctas) * kRotCols);
    return;
  }
  // a padded page of a graph-captured step's fixed page table (WritePlan.fill_page_view: the null block, no
  // sources) does nothing (until 2026-12-05 each was quantized into the null block: the Qwen3-8B step's append
  // at batch 59, 32K, took 5.4 of 28.4 ms on an H100, bench/results/2026-12-05_s23a_*). page_dst comes from host copies,
  // never from a kernel of the step, so it is read before the wait; a CTA that exits lets the next kernel start.
  const bool page_cta = p.do_pages && (int)blockIdx.x < 2 * p.n_pages;
  const int64_t blk = page_cta ? p.page_dst[blockIdx.x >> 1] : kNullBlock;  // this page CTA's int2 block
  if (page_cta && blk == kNullBlock) return;
  pdl_begin();
  if (page_cta) {
    const int pg = blockIdx.x >> 1, which = blockIdx.x & 1;
    __shared__ uint8_t codes[kTile][D];
    using S = std::conditional_t<SF == 1, uint8_t, unsigned short>;  // a stored scale / zero
    __shared__ S scz[2][kTile];
    for (int r = warp; r < kTile; r += kAppendWarps) {
      const int64_t src = p.page_src[pg * kTile + r];
      const T* xr;
      if (src >= 0) {
        const int64_t off = (src / kTile) * p.h_sblk + h * p.h_sh + (src % kTile) * p.h_srow;
        xr = reinterpret_cast<const T*>(which ? p.v_hp : p.k_hp) + off;
      } else {
        const int64_t row = -(src + 1);
        xr = which ? reinterpret_cast<const T*>(p.v) + row * p.v_sr + h * p.v_sh
                   : reinterpret_cast<const T*>(p.k) + row * p.k_sr + h * p.k_sh;
      }
      float x[E];
#pragma unroll
      for (int e = 0; e < E; e++) x[e] = M::to_float(xr[lane + 32 * e]);
      if (src < 0 && which == 0 && p.rot) rotate_row<T, D>(x, p.rot + (p.rot_heads > 1 ? h : 0) * D * D, lane);
      // tile16 token order for scale / zero: K stored index 2 (r % 8) + r / 8 (order 0, 8, 1, 9, ...);
      // V stored index 4 ((r % 8) / 2) + 2 (r / 8) + r % 2 (order 0, 1, 8, 9, 2, 3, 10, 11, ...)
      const int si = which ? 4 * ((r & 7) >> 1) + 2 * (r >> 3) + (r & 1) : 2 * (r & 7) + (r >> 3);
      quant_row<D, SF>(x, which ? p.clip_v : p.clip_k, lane, codes[r], &scz[0][si], &scz[1][si], p.log8,
                       which ? p.v_top : p.k_top);
    }
    __syncthreads();
    if (warp == 0) {  // pack the page's codes into lane fragments
      const int g = lane >> 2, t = lane & 3;
      uint32_t words[NW];
#pragma unroll
      for (int w = 0; w < NW; w++) {
        uint32_t word = 0;
        if (which == 0) {  // K: byte j, field P at bit 8j + 2P (layout.py has the same map)
#pragma unroll
          for (int j = 0; j < 4; j++)
#pragma unroll
            for (int P = 0; P < 4; P++)
              word |= (uint32_t)codes[g + 8 * (w & 1)][(D / 4) * P + 16 * (w >> 1) + 4 * t + j] << (8 * j + 2 * P);
          words[w] = word;
          continue;
        }
        // V: field (read variant sv, half e, position P) at bit 16e + 2P (sv = 0), 8 + 2P (sv = 1, e = 0),
        // (24 + 2P) mod 32 (sv = 1, e = 1); u = (P - 1) >> 1, x = (P - 1) & 1 (layout.py has the same map)
#pragma unroll
        for (int sv = 0; sv < 2; sv++)
#pragma unroll
          for (int e = 0; e < 2; e++)
#pragma unroll
            for (int P = 1; P <= 4; P++) {
              const int u = (P - 1) >> 1, x = (P - 1) & 1;
              const int bit = sv == 0 ? 16 * e + 2 * P : (e == 0 ? 8 + 2 * P : (24 + 2 * P) & 31);
              const uint32_t c = codes[2 * t + 8 * sv + e][16 * (2 * w + u) + 8 * x + g];
              word |= c << bit;
            }
        words[w] = word;
      }
      uint8_t* dst = (which == 0 ? p.k_codes : p.v_codes) + blk * p.c_sblk + h * p.c_sh + lane * (NW * 4);
      uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);
#pragma unroll
      for (int w = 0; w < NW; w++) d32[w] = words[w];
    } else if (warp == 1 && lane < kTile) {
      const int64_t so = blk * p.s_sblk + h * p.s_sh + lane;
      static_cast<S*>(which ? p.v_scale : p.k_scale)[so] = scz[0][lane];
      static_cast<S*>(which ? p.v_zero : p.k_zero)[so] = scz[1][lane];
    }
    return;
  }
  if (!p.do_rows) return;
  // row copies: one warp per (row, head) (with R_K fused only V: the rotation CTAs store the rotated K rows)
  const int r = rc * kAppendWarps + warp;
  if (r >= p.n_rows) return;
  // the row and its slot are independent loads: both in flight at once (one memory round trip, not two)
  const T* kr = reinterpret_cast<const T*>(p.k) + r * p.k_sr + h * p.k_sh;
  const T* vr = reinterpret_cast<const T*>(p.v) + r * p.v_sr + h * p.v_sh;
  T xk[E], xv[E];
#pragma unroll
  for (int e = 0; e < E; e++) { xk[e] = kr[lane + 32 * e]; xv[e] = vr[lane + 32 * e]; }
  const int64_t slot = p.hp_slots[r];
  if (slot < 0) return;
  const int64_t off = (slot / kTile) * p.h_sblk + h * p.h_sh + (slot % kTile) * p.h_srow;
  T* kd = reinterpret_cast<T*>(p.k_hp) + off;
  T* vd = reinterpret_cast<T*>(p.v_hp) + off;
#pragma unroll
  for (int e = 0; e < E; e++) {
    if (!p.rot) kd[lane + 32 * e] = xk[e];
    vd[lane + 32 * e] = xv[e];
  }
}

// launch with (pdl = 1) or without the programmatic-dependent-launch attribute, in clusters of cx CTAs along x
// (cx = 0: no clusters)
template <typename... A>
int launch_ex(void (*kernel)(A...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, int pdl, int cx,
              A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cx > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cx;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
  return e != cudaSuccess ? (int)e : (int)cudaGetLastError();
}
template <typename... A>
int launch(void (*kernel)(A...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, int pdl, A... args) {
  return launch_ex(kernel, grid, block, smem, stream, pdl, 0, args...);
}

// dynamic shared memory of a decode CTA: the cp.async ring (NWARP x STAGES tiles) or, after the loop, the
// per-warp partial outputs (NWARP x 8 heads x D floats), whichever is larger, + 128 bytes to place it at kRingPhase
template <int D, int NWARP, int STAGES, int SF>
constexpr int decode_smem_bytes() {
  constexpr int TB = 8 * D + (SF ? 64 : 128);  // the kernel's tile record
  return 128 + (NWARP * STAGES * TB > NWARP * 8 * D * 4 ? NWARP * STAGES * TB : NWARP * 8 * D * 4);
}

// opt in to more than 48 KB of dynamic shared memory (once per instantiation and device: the attribute is
// per device; not a stream operation, so also fine while a CUDA graph is being captured)
template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int decode_prepare() {
  static bool done[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return (int)cudaErrorInvalidDevice;
  if (done[dev]) return 0;
  int err = (int)cudaFuncSetAttribute(int2_decode_kernel<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, decode_smem_bytes<D, NWARP, STAGES, SF>());
  if (err == 0 && CX > 8)  // clusters above the portable 8 CTAs (Hopper allows 16)
    err = (int)cudaFuncSetAttribute(int2_decode_kernel<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>,
                                    cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  done[dev] = err == 0;
  return err;
}

template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int launch_decode(const DecodeParams& p, int batch, cudaStream_t stream, int pdl) {
  if (int e = decode_prepare<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>()) return e;
  dim3 grid(p.n_hp + p.n_int2, batch * p.hkv);
  if (CX > 0 && (int)grid.x != CX) return (int)cudaErrorInvalidValue;  // the cluster is all splits of a head
  return launch_ex(int2_decode_kernel<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>, grid, dim3(NWARP * 32),
                   (size_t)decode_smem_bytes<D, NWARP, STAGES, SF>(), stream, pdl, CX, p);
}

template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int warps_per_cta() {
  return NWARP;
}

template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int cluster_size() {
  return CX;
}

// clusters of this variant the GPU can hold at once (0: it cannot co-schedule one; -1: error); 0 for CX = 0
template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int max_clusters() {
  if (CX == 0) return 0;
  if (decode_prepare<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>()) return -1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(CX, 1);
  cfg.blockDim = dim3(NWARP * 32);
  cfg.dynamicSmemBytes = decode_smem_bytes<D, NWARP, STAGES, SF>();
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = CX;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  int n = 0;
  return cudaOccupancyMaxActiveClusters(&n, int2_decode_kernel<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>, &cfg) == cudaSuccess ? n : -1;
}

template <typename T, int D, int NWARP, int MINB, int STAGES, int CX, int PAIR = 0, int SF = 0>
int occupancy() {
  int n = 0;
  if (decode_prepare<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>()) return -1;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, int2_decode_kernel<T, D, NWARP, MINB, STAGES, CX, PAIR, SF>, NWARP * 32,
                                                decode_smem_bytes<D, NWARP, STAGES, SF>());
  return n;
}

}  // namespace

// Variants: how deep each warp's cp.async ring is (tiles in flight per warp): 0 = 4, 1 = 8, 2 = 6, 3 = 10
// with 4 warps per CTA; 4 = 4 with 8 warps per CTA (half the splits, so half the merge, for the same
// occupancy); 10 / 11 = 0 / 4 with paired tiles (PAIR: group <= 4 only, the host checks). Head_dim 128 only, added
// in the thirty-seventh session after the 8-deep 8-warp ring (7) was the fastest at 128K batch 1 and 472+ pairs:
// 12 / 13 = 7 with rings 12 / 10 deep (two CTAs per SM still fit: 2 x 110.6 KB at 12), 14 = 7 with paired tiles.
// dtype: 0 = bf16, 1 = fp16.
#define OSCAR_TABLE(F, T, SF)                                               \
  if (head_dim == 128 && variant == 0) return F<T, 128, 4, 4, 4, 0, 0, SF>ARGS;   \
  if (head_dim == 128 && variant == 1) return F<T, 128, 4, 4, 8, 0, 0, SF>ARGS;   \
  if (head_dim == 128 && variant == 2) return F<T, 128, 4, 4, 6, 0, 0, SF>ARGS;   \
  if (head_dim == 128 && variant == 3) return F<T, 128, 4, 3, 10, 0, 0, SF>ARGS;  \
  if (head_dim == 64 && variant == 0) return F<T, 64, 4, 4, 4, 0, 0, SF>ARGS;     \
  if (head_dim == 64 && variant == 1) return F<T, 64, 4, 4, 8, 0, 0, SF>ARGS;     \
  if (head_dim == 64 && variant == 2) return F<T, 64, 4, 4, 6, 0, 0, SF>ARGS;     \
  if (head_dim == 64 && variant == 3) return F<T, 64, 4, 4, 10, 0, 0, SF>ARGS;     \
  if (head_dim == 128 && variant == 4) return F<T, 128, 8, 2, 4, 0, 0, SF>ARGS;    \
  if (head_dim == 64 && variant == 4) return F<T, 64, 8, 2, 4, 0, 0, SF>ARGS;     \
  if (head_dim == 128 && variant == 5) return F<T, 128, 16, 1, 4, 0, 0, SF>ARGS;   \
  if (head_dim == 64 && variant == 5) return F<T, 64, 16, 1, 4, 0, 0, SF>ARGS;     \
  if (head_dim == 128 && variant == 6) return F<T, 128, 16, 1, 8, 0, 0, SF>ARGS;   \
  if (head_dim == 64 && variant == 6) return F<T, 64, 16, 1, 8, 0, 0, SF>ARGS;     \
  if (head_dim == 128 && variant == 7) return F<T, 128, 8, 2, 8, 0, 0, SF>ARGS;    \
  if (head_dim == 64 && variant == 7) return F<T, 64, 8, 2, 8, 0, 0, SF>ARGS;    \
  if (head_dim == 128 && variant == 8) return F<T, 128, 16, 1, 4, 16, 0, SF>ARGS; \
  if (head_dim == 64 && variant == 8) return F<T, 64, 16, 1, 4, 16, 0, SF>ARGS;   \
  if (head_dim == 128 && variant == 9) return F<T, 128, 8, 2, 4, 8, 0, SF>ARGS;   \
  if (head_dim == 64 && variant == 9) return F<T, 64, 8, 2, 4, 8, 0, SF>ARGS;     \
  if (head_dim == 128 && variant == 10) return F<T, 128, 4, 4, 4, 0, 1, SF>ARGS; \
  if (head_dim == 64 && variant == 10) return F<T, 64, 4, 4, 4, 0, 1, SF>ARGS;   \
  if (head_dim == 128 && variant == 11) return F<T, 128, 8, 2, 4, 0, 1, SF>ARGS; \
  if (head_dim == 64 && variant == 11) return F<T, 64, 8, 2, 4, 0, 1, SF>ARGS;   \
  if (head_dim == 128 && variant == 12) return F<T, 128, 8, 2, 12, 0, 0, SF>ARGS;  \
  if (head_dim == 128 && variant == 13) return F<T, 128, 8, 2, 10, 0, 0, SF>ARGS;  \
  if (head_dim == 128 && variant == 14) return F<T, 128, 8, 2, 8, 0, 1, SF>ARGS;

// sf: the records' scale format (0 fp16, 1 log8), as the template SF
extern "C" int oscar_int2_decode(const DecodeParams* p, int batch, int dtype, int head_dim, int variant, void* stream,
                                 int pdl, int sf) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
#define ARGS (*p, batch, s, pdl)
  if (dtype == 0 && sf == 0) { OSCAR_TABLE(launch_decode, __nv_bfloat16, 0) }
  if (dtype == 1 && sf == 0) { OSCAR_TABLE(launch_decode, __half, 0) }
  if (dtype == 0 && sf == 1) { OSCAR_TABLE(launch_decode, __nv_bfloat16, 1) }
  if (dtype == 1 && sf == 1) { OSCAR_TABLE(launch_decode, __half, 1) }
#undef ARGS
  return -1;
}

#define OSCAR_QUERY(NAME, F)                                           \
  extern "C" int NAME(int dtype, int head_dim, int variant, int sf) { \
    if (dtype == 0 && sf == 0) { OSCAR_TABLE(F, __nv_bfloat16, 0) }    \
    if (dtype == 1 && sf == 0) { OSCAR_TABLE(F, __half, 0) }           \
    if (dtype == 0 && sf == 1) { OSCAR_TABLE(F, __nv_bfloat16, 1) }    \
    if (dtype == 1 && sf == 1) { OSCAR_TABLE(F, __half, 1) }           \
    return -1;                                                         \
  }
#define ARGS ()
OSCAR_QUERY(oscar_int2_decode_occupancy, occupancy)
OSCAR_QUERY(oscar_int2_decode_warps, warps_per_cta)
OSCAR_QUERY(oscar_int2_decode_cluster, cluster_size)  // CTAs per cluster, 0 = none
OSCAR_QUERY(oscar_int2_decode_max_clusters, max_clusters)
#undef ARGS
#undef OSCAR_QUERY

extern "C" int oscar_append(const AppendParams* p, int dtype, int head_dim, void* stream, int pdl, int sf) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const int cols = p->n_rows * (1 + (p->q ? p->group : 0));  // rotation CTAs' columns (append_kernel)
  const int row_ctas = p->do_rows ? (p->n_rows + kAppendWarps - 1) / kAppendWarps + (p->rot ? (cols + kRotCols - 1) / kRotCols : 0) : 0;
  const int page_ctas = p->do_pages ? 2 * p->n_pages : 0;
  if (row_ctas + page_ctas == 0) return 0;
  dim3 grid(row_ctas + page_ctas, p->hkv), block(kAppendWarps * 32);
#define OSCAR_APPEND(SF)                                                                                          \
  if (dtype == 0 && head_dim == 128) return launch(append_kernel<__nv_bfloat16, 128, SF>, grid, block, 0, s, pdl, *p); \
  if (dtype == 0 && head_dim == 64) return launch(append_kernel<__nv_bfloat16, 64, SF>, grid, block, 0, s, pdl, *p);   \
  if (dtype == 1 && head_dim == 128) return launch(append_kernel<__half, 128, SF>, grid, block, 0, s, pdl, *p);        \
  if (dtype == 1 && head_dim == 64) return launch(append_kernel<__half, 64, SF>, grid, block, 0, s, pdl, *p);
  if (sf == 0) { OSCAR_APPEND(0) }
  if (sf == 1) { OSCAR_APPEND(1) }
#undef OSCAR_APPEND
  return -1;
}

// Read floor (issue 7's measured bound, bench_decode.py --read-floor): the fastest one launch reads n16
// 16-byte words with nothing else to do (grid-stride, 8 independent 16-byte loads in flight per thread,
// bypassing L1); sink is written only if the XOR of everything read equals a magic value (never, in practice),
// so the loads cannot be removed. Not used by the library.
namespace {
__global__ void read_floor_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t* sink) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t x = 0;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = __ldcs(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; j++) x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(src + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9E3779B9u) sink[0] = x;
}
// The same bytes read as one contiguous stream per warp (a probe of the DRAM access pattern, issue 7: does
// reading many separate streams at once, as the decode kernel's splits do, cost more time or power than the
// grid-wide sweep above?): warp w reads words [w per, (w + 1) per), 512 contiguous bytes per load
// instruction, 8 in flight per lane.
__global__ void read_streams_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t* sink) {
  const int64_t nwarp = (int64_t)gridDim.x * blockDim.x / 32;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int64_t per = (n16 + 32 * nwarp - 1) / (32 * nwarp) * 32;
  const int64_t hi = min(n16, (w + 1) * per);
  int64_t i = w * per + (threadIdx.x & 31);
  uint32_t x = 0;
  for (; i + 7 * 32 < hi; i += 8 * 32) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = __ldcs(src + i + 32 * j);
#pragma unroll
    for (int j = 0; j < 8; j++) x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < hi; i += 32) {
    const uint4 v = __ldcs(src + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9E3779B9u) sink[0] = x;
}
}  // namespace

// pattern 0: grid-stride sweep (the read floor); 1: one contiguous stream per warp
extern "C" int oscar_read_pattern(const void* src, int64_t n16, uint32_t* sink, int ctas, int threads, int pattern,
                                  void* stream) {
  if (pattern == 1)
    read_streams_kernel<<<ctas, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const uint4*>(src), n16, sink);
  else
    read_floor_kernel<<<ctas, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const uint4*>(src), n16, sink);
  return (int)cudaGetLastError();
}

// Records read (issue 7, batch 1: does the pool's access pattern cap the decode kernel's stream?): every
// (block, KV head) record of a block table read the way the decode kernel's lanes read a tile (16 bytes per
// lane at +0, +4D (head_dim 128) and +8D (lanes 0..7)), one record per warp and step, 8 records in flight per
// warp, each warp a contiguous range of the order: 0 = block-outer (consecutive records are the KV heads of
// one block: contiguous memory), 1 = head-outer (consecutive records are one KV head's blocks in table order:
// the decode kernel's order within a split, 1152 bytes every 9216 for 8 KV heads). Not used by the library.
namespace {
template <int D>
__global__ void read_records_kernel(const uint8_t* rec, const int32_t* table, int n, int hkv, int64_t c_sblk,
                                    int64_t c_sh, int order, int tail_lanes, uint32_t* sink) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarp = (int64_t)gridDim.x * blockDim.x / 32;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int64_t total = (int64_t)n * hkv;
  const int64_t per = (total + nwarp - 1) / nwarp;
  const int64_t hi = min(total, (w + 1) * per);
  uint32_t x = 0;
  for (int64_t i = w * per; i < hi; i += 8) {
    uint4 v[8][3];
#pragma unroll
    for (int j = 0; j < 8; j++) {
      v[j][0] = v[j][1] = v[j][2] = make_uint4(0u, 0u, 0u, 0u);
      const int64_t r = i + j;
      if (r < hi) {
        const int64_t b = order == 0 ? r / hkv : r % n, h = order == 0 ? r % hkv : r / n;
        const uint8_t* a = rec + (int64_t)table[b] * c_sblk + h * c_sh + 16 * lane;
        v[j][0] = __ldcs(reinterpret_cast<const uint4*>(a));
        if (D == 128) v[j][1] = __ldcs(reinterpret_cast<const uint4*>(a + 4 * D));
        if (lane < tail_lanes) v[j][2] = __ldcs(reinterpret_cast<const uint4*>(a + 8 * D));
      }
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int k = 0; k < 3; k++) x ^= v[j][k].x ^ v[j][k].y ^ v[j][k].z ^ v[j][k].w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}
}  // namespace

extern "C" int oscar_read_records(const void* rec, const int32_t* table, int n, int hkv, int64_t c_sblk, int64_t c_sh,
                                  int head_dim, int order, void* sink, int ctas, int threads, void* stream, int sf) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const uint8_t* r = reinterpret_cast<const uint8_t*>(rec);
  uint32_t* k = reinterpret_cast<uint32_t*>(sink);
  const int tl = sf ? 4 : 8;  // lanes of the record's scale / zero tail (64 or 128 bytes)
  if (head_dim == 128) read_records_kernel<128><<<ctas, threads, 0, s>>>(r, table, n, hkv, c_sblk, c_sh, order, tl, k);
  else if (head_dim == 64) read_records_kernel<64><<<ctas, threads, 0, s>>>(r, table, n, hkv, c_sblk, c_sh, order, tl, k);
  else return -1;
  return (int)cudaGetLastError();
}

// the trace buffers of an OSCARKV_TRACE build copied to the host, one after the other: g_trace (kTraceCtas x 2 x 8
// eight-byte words), g_trace_warp (kTraceCtas x 16 words), g_trace_sm (kTraceCtas ints); clear = 1 zeroes them
// instead. -1 in a normal build.
extern "C" int oscar_trace(void* host, int clear) {
#ifdef OSCARKV_TRACE
  void *a, *w, *m;
  if (cudaGetSymbolAddress(&a, g_trace) || cudaGetSymbolAddress(&w, g_trace_warp) ||
      cudaGetSymbolAddress(&m, g_trace_sm))
    return -2;
  const size_t na = sizeof(g_trace), nw = sizeof(g_trace_warp), nm = sizeof(g_trace_sm);
  if (clear) {
    int e = (int)cudaMemset(a, 0, na);
    if (!e) e = (int)cudaMemset(w, 0, nw);
    if (!e) e = (int)cudaMemset(m, 0, nm);
    return e ? e : (int)cudaDeviceSynchronize();
  }
  char* h = static_cast<char*>(host);
  int e = (int)cudaMemcpy(h, a, na, cudaMemcpyDeviceToHost);
  if (!e) e = (int)cudaMemcpy(h + na, w, nw, cudaMemcpyDeviceToHost);
  if (!e) e = (int)cudaMemcpy(h + na + nw, m, nm, cudaMemcpyDeviceToHost);
  return e;
#else
  (void)host;
  (void)clear;
  return -1;
#endif
}

extern "C" int oscar_params_sizes(int* out2) {
  out2[0] = (int)sizeof(DecodeParams);
  out2[1] = (int)sizeof(AppendParams);
  return 0;
}
