// The project's own additions to the faiss-node addon (docs/vector-index.md, "The sketch index").
//
// Two classes, registered beside faiss-node's own (build-faiss.sh patches faiss-node's Init to call
// ProjectExtensionsInit):
//
//   SketchIndex  binary codes of unit vectors: centre (the trained mean), rotate with FAISS's
//                RandomRotationMatrix (d -> nbits), keep the sign bits. An exhaustive Hamming scan
//                of every live code returns the best `k` candidate rows; dead rows (tombstones) are
//                skipped inside the scan. Typed arrays in and out, labels are row positions (stable:
//                rows are only ever appended).
//   VectorStore  the exact float32 vectors, for the exact re-rank: a read-only memory-mapped base file
//                plus an in-memory overlay of rows appended since. The base file is either a
//                snapshot's sealed rows (each row its own AES-256-GCM record, sealed-rows.cc: only
//                the rows a query re-ranks are decrypted, the page cache holds ciphertext) or a
//                clear float32 file (the benchmarks' datasets).
//
// Why a scan of our own instead of faiss::IndexBinaryFlat: Debian's libfaiss is compiled for baseline
// x86-64, where __builtin_popcountl is a library call (about 10x slower than the POPCNT instruction), and
// its search cannot skip tombstones. The kernel below is compiled twice (generic and
// popcnt+avx2) and picked at run time, so the addon still loads on an older processor.
#include <napi.h>

#include "sealed-rows.h"

#include <faiss/VectorTransform.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL (handled)
#endif

namespace {

constexpr int kProjectBindingVersion = 8;

bool HasFastIsa() {
  static const bool fast = __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fast;
}

// ---- Hamming scan kernel ----------------------------------------------------------------------------
// Codes are stored in groups of 8 rows, word-interleaved: group g holds, for each word w of the code,
// the 8 rows' word w side by side (8 x uint64 = one 512-bit vector). So one vector load brings the same
// word of 8 rows, and an AVX-512 kernel computes 8 Hamming distances with vertical XOR + VPOPCNTQ + add,
// no horizontal sums. Row r, word w: codes[(r / 8) * W * 8 + w * 8 + r % 8].
//
// Selection with a running threshold: each query keeps a buffer of candidate rows (row order) and a
// threshold `thr`: a row is pushed only when its distance is < thr. When the buffer is full it is
// compacted to the k best (distance, then row) and thr becomes the k-th best distance t (a later row
// at distance t loses the tie to the k earlier ones). After the first few thousand rows almost every
// row costs its XOR/POPCNT sum and one compare; dead rows (tombstones) and the padding of the last
// group are checked only on a push. A batch of queries shares one pass over the codes: each block of
// codes (kBlockRows rows, L1-sized) is scanned for every query before the next block is read, so
// memory traffic is paid once per batch.
constexpr size_t kGroup = 8;

// 64-byte aligned storage for the codes (one group's word = one aligned 512-bit load).
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const Aligned64<U>&) const { return true; }
  template <class U>
  bool operator!=(const Aligned64<U>&) const { return false; }
};
#ifndef SKETCH_BLOCK_ROWS
#define SKETCH_BLOCK_ROWS 256
#endif
#ifndef SKETCH_PREFETCH_HINT
#define SKETCH_PREFETCH_HINT _MM_HINT_T1
#endif
constexpr size_t kBlockRows = SKETCH_BLOCK_ROWS;

struct TopK {
  size_t k = 0, cap = 0, count = 0;
  uint32_t thr = 0;  // push only distances < thr
  bool estimated = false;  // thr started from a sample's estimate (see EstimateThresholds)
  int words = 0;
  // Not zero-filled (std::unique_ptr<T[]>(new T[n])): only [0, count) is ever read.
  std::unique_ptr<int32_t[]> rows;
  std::unique_ptr<uint16_t[]> dist;
  std::unique_ptr<uint64_t[]> codes;  // each candidate's code (row-major), for the refine step
  size_t allocated = 0;  // slots held (buffers are kept between searches: no page faults per search)
  void Init(size_t k_, int nbits) {
    k = k_;
    words = nbits / 64;
    // A small slack: compactions are cheap and each one tightens the threshold (fewer kept rows).
    cap = k + std::max<size_t>(k / 4, 256);
    count = 0;
    thr = static_cast<uint32_t>(nbits) + 1;
    estimated = false;
    if (cap > allocated) {
      rows.reset(new int32_t[cap]);
      dist.reset(new uint16_t[cap]);
      codes.reset(new uint64_t[cap * words]);
      allocated = cap;
    }
  }
  // Keeps the k best (distance, row) of the buffer, in row order; thr = the k-th best distance.
  void Compact(int nbits) {
    if (count < k) return;
    std::vector<uint32_t> h(static_cast<size_t>(nbits) + 2, 0);
    for (size_t i = 0; i < count; i++) h[dist[i]]++;
    size_t below = 0;
    uint32_t t = 0;
    for (;; t++) {
      if (below + h[t] >= k) break;
      below += h[t];
    }
    size_t at_t = k - below, o = 0;  // rows at distance t still kept (the first ones)
    for (size_t i = 0; i < count; i++) {
      const uint16_t dv = dist[i];
      if (dv < t || (dv == t && at_t > 0)) {
        if (dv == t) at_t--;
        rows[o] = rows[i];
        dist[o] = dv;
        if (o != i)
          for (int w = 0; w < words; w++) codes[o * words + w] = codes[i * words + w];
        o++;
      }
    }
    count = o;
    thr = t;
  }
  // Row r (lane `lane` of the group at `group`, word-interleaved) at distance d.
  __attribute__((noinline)) void Push(size_t r, uint32_t d, size_t n, const uint8_t* dead, int nbits, const uint64_t* group, size_t lane) {
    if (r >= n || d >= thr || dead[r]) return;
    rows[count] = static_cast<int32_t>(r);
    dist[count] = static_cast<uint16_t>(d);
    for (int w = 0; w < words; w++) codes[count * words + w] = group[w * kGroup + lane];
    // The next push writes the next slots: fetch them now (a batch's buffers do not stay in cache
    // while the codes stream through it, and a store miss per push was most of a push's cost).
    for (int w = 0; w < words; w += 8) __builtin_prefetch(&codes[(count + 1) * words + w], 1, 3);
    if (++count == cap) Compact(nbits);
  }
};

// A starting threshold from a sample, so that a scan does not begin by pushing (and compacting)
// thousands of rows while its running threshold is still loose: the distances of about 16k live rows
// (16 runs spread over the codes) give, per query, the distance t below which about 1.5 k rows of the
// whole population are expected (at least 48 sampled rows; at 1M and k = 2000 the count under t then
// falls below k in about 1 % of queries by the sampling error alone, and measured in none of 2 x 1000).
// The scan then starts with thr = t + 1. Exactness does not depend on the estimate: if fewer than k
// live rows turn out to be at distance <= t, the caller scans that query again from scratch (Search).
template <int W>
__attribute__((always_inline)) inline void EstimateThresholds(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq,
                                                              TopK* tops, int nbits) {
  const size_t groups = (n + kGroup - 1) / kGroup;
  // 16 runs of 128 consecutive groups (streaming reads), spread evenly over the codes.
  constexpr size_t kRuns = 16, kRunGroups = 128, kSampleGroups = kRuns * kRunGroups;
  if (nq < 1 || groups < 4 * kSampleGroups) return;
  const size_t run_stride = groups / kRuns, k = tops[0].k;
  const size_t sampled = kSampleGroups * kGroup;
  const size_t want = std::max<size_t>(48, (3 * k * sampled + 2 * n - 1) / (2 * n));  // ceil(1.5 k sampled / n)
  std::vector<uint32_t> hist(static_cast<size_t>(nbits) + 2);
  for (int qi = 0; qi < nq; qi++) {
    const uint64_t* q = qc + static_cast<size_t>(qi) * W;
    std::fill(hist.begin(), hist.end(), 0);
    size_t live = 0;
    for (size_t s = 0; s < kSampleGroups; s++) {
      const size_t g = (s / kRunGroups) * run_stride + s % kRunGroups;
      const uint64_t* c = codes + g * W * kGroup;
      for (size_t l = 0; l < kGroup; l++) {
        const size_t r = g * kGroup + l;
        if (r >= n || dead[r]) continue;
        uint32_t h = 0;
        for (int w = 0; w < W; w++) h += static_cast<uint32_t>(__builtin_popcountll(c[w * kGroup + l] ^ q[w]));
        hist[h]++;
        live++;
      }
    }
    if (want >= live) continue;  // too few live rows sampled to estimate: start loose
    size_t cum = 0;
    uint32_t t = 0;
    for (; t <= static_cast<uint32_t>(nbits); t++) {
      cum += hist[t];
      if (cum >= want) break;
    }
    if (t < static_cast<uint32_t>(nbits)) {
      tops[qi].thr = t + 1;
      tops[qi].estimated = true;
    }
  }
}

template <int W>
__attribute__((always_inline)) inline void ScanGroupsScalar(const uint64_t* codes, size_t g0, size_t g1, size_t n, const uint8_t* dead,
                                                            const uint64_t* q, TopK& top, int nbits) {
  for (size_t g = g0; g < g1; g++) {
    const uint64_t* c = codes + g * W * kGroup;
    for (size_t l = 0; l < kGroup; l++) {
      uint32_t h = 0;
      for (int w = 0; w < W; w++) h += static_cast<uint32_t>(__builtin_popcountll(c[w * kGroup + l] ^ q[w]));
      if (__builtin_expect(h < top.thr, 0)) top.Push(g * kGroup + l, h, n, dead, nbits, c, l);
    }
  }
}

template <int W>
__attribute__((always_inline)) inline void ScanScalarImpl(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq,
                                                          TopK* tops, int nbits, bool estimate) {
  if (estimate) EstimateThresholds<W>(codes, n, dead, qc, nq, tops, nbits);
  const size_t groups = (n + kGroup - 1) / kGroup, per_block = kBlockRows / kGroup;
  for (size_t g0 = 0; g0 < groups; g0 += per_block) {
    const size_t g1 = std::min(groups, g0 + per_block);
    for (int qi = 0; qi < nq; qi++) ScanGroupsScalar<W>(codes, g0, g1, n, dead, qc + static_cast<size_t>(qi) * W, tops[qi], nbits);
  }
}

template <int W>
__attribute__((target("popcnt,avx2,fma"))) void ScanFast(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq,
                                                         TopK* tops, int nbits, bool estimate) {
  ScanScalarImpl<W>(codes, n, dead, qc, nq, tops, nbits, estimate);
}

template <int W>
void ScanGeneric(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq, TopK* tops, int nbits, bool estimate) {
  ScanScalarImpl<W>(codes, n, dead, qc, nq, tops, nbits, estimate);
}

// AVX-512 with VPOPCNTDQ: 8 rows per vector, the query's words broadcast once per query and block.
template <int W>
__attribute__((target("avx512f,avx512vpopcntdq,popcnt,avx2,fma"))) void ScanAvx512(const uint64_t* codes, size_t n, const uint8_t* dead,
                                                                                    const uint64_t* qc, int nq, TopK* tops, int nbits,
                                                                                    bool estimate) {
  if (estimate) EstimateThresholds<W>(codes, n, dead, qc, nq, tops, nbits);
  const size_t groups = (n + kGroup - 1) / kGroup, per_block = kBlockRows / kGroup;
  alignas(64) uint64_t dv[kGroup];
  // Queries go through a block two at a time when their words fit in registers (W <= 8): two
  // independent XOR/POPCNT/ADD chains per group, one set of loads.
  constexpr int kPair = W <= 8 ? 2 : 1;
  const int passes = (nq + kPair - 1) / kPair;
  // The block after next is prefetched into L2 while the batch works on this one, spread over every
  // pass (one line per group and pass at 4 passes): a batch computes long enough on each block for
  // the hardware prefetcher to fall idle, and memory reads then overlap the compute.
  const size_t block_lines = per_block * W, lines_per_it = (W + passes - 1) / passes;
  const uint64_t* codes_end = codes + groups * W * kGroup;
  for (size_t g0 = 0; g0 < groups; g0 += per_block) {
    const size_t g1 = std::min(groups, g0 + per_block);
    for (int pass = 0; pass < passes; pass++) {
      const int qa = pass * kPair, qb_ = std::min(nq - 1, qa + kPair - 1);  // qb_ == qa: a single query
      TopK& ta = tops[qa];
      TopK& tb = tops[qb_];
      __m512i wa[W], wb[W];
      for (int w = 0; w < W; w++) {
        wa[w] = _mm512_set1_epi64(static_cast<long long>(qc[static_cast<size_t>(qa) * W + w]));
        wb[w] = _mm512_set1_epi64(static_cast<long long>(qc[static_cast<size_t>(qb_) * W + w]));
      }
      __m512i thra = _mm512_set1_epi64(ta.thr), thrb = _mm512_set1_epi64(tb.thr);
      for (size_t g = g0; g < g1; g++) {
        const uint64_t* c = codes + g * W * kGroup;
        {
          const size_t it = static_cast<size_t>(pass) * per_block + (g - g0), first = it * lines_per_it;
          for (size_t l = first; l < first + lines_per_it && l < block_lines; l++) {
            const uint64_t* nb = codes + (g0 + 2 * per_block) * W * kGroup + l * kGroup;
            if (nb < codes_end) _mm_prefetch(reinterpret_cast<const char*>(nb), SKETCH_PREFETCH_HINT);
          }
        }
        __m512i x = _mm512_load_si512(c);
        __m512i acca = _mm512_popcnt_epi64(_mm512_xor_si512(x, wa[0]));
        __m512i accb = _mm512_popcnt_epi64(_mm512_xor_si512(x, wb[0]));
        for (int w = 1; w < W; w++) {
          x = _mm512_load_si512(c + w * kGroup);
          acca = _mm512_add_epi64(acca, _mm512_popcnt_epi64(_mm512_xor_si512(x, wa[w])));
          accb = _mm512_add_epi64(accb, _mm512_popcnt_epi64(_mm512_xor_si512(x, wb[w])));
        }
        __mmask8 ma = _mm512_cmplt_epu64_mask(acca, thra);
        __mmask8 mb = qb_ != qa ? _mm512_cmplt_epu64_mask(accb, thrb) : 0;
        if (__builtin_expect((ma | mb) != 0, 0)) {
          if (ma) {
            _mm512_store_si512(dv, acca);
            while (ma) {
              const int l = __builtin_ctz(ma);
              ma &= ma - 1;
              ta.Push(g * kGroup + l, static_cast<uint32_t>(dv[l]), n, dead, nbits, c, l);
            }
            thra = _mm512_set1_epi64(ta.thr);
          }
          if (mb) {
            _mm512_store_si512(dv, accb);
            while (mb) {
              const int l = __builtin_ctz(mb);
              mb &= mb - 1;
              tb.Push(g * kGroup + l, static_cast<uint32_t>(dv[l]), n, dead, nbits, c, l);
            }
            thrb = _mm512_set1_epi64(tb.thr);
          }
        }
      }
    }
  }
}

using ScanFn = void (*)(const uint64_t*, size_t, const uint8_t*, const uint64_t*, int, TopK*, int, bool);

bool HasAvx512Popcnt() {
  static const bool ok = HasFastIsa() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq");
  return ok;
}

ScanFn PickScan(int words) {
  const bool fast = HasFastIsa(), wide = HasAvx512Popcnt() && !std::getenv("SKETCH_NO_AVX512");
  switch (words) {
    case 4: return wide ? ScanAvx512<4> : fast ? ScanFast<4> : ScanGeneric<4>;
    case 8: return wide ? ScanAvx512<8> : fast ? ScanFast<8> : ScanGeneric<8>;
    case 16: return wide ? ScanAvx512<16> : fast ? ScanFast<16> : ScanGeneric<16>;
    case 32: return wide ? ScanAvx512<32> : fast ? ScanFast<32> : ScanGeneric<32>;
    default: return nullptr;
  }
}

const char* ScanIsa() {
  return HasAvx512Popcnt() && !std::getenv("SKETCH_NO_AVX512") ? "avx512-vpopcntdq" : HasFastIsa() ? "popcnt-avx2" : "generic";
}

__attribute__((always_inline)) inline float DotImpl(const float* a, const float* b, int d) {
  float s = 0;
  for (int i = 0; i < d; i++) s += a[i] * b[i];
  return s;
}
__attribute__((target("avx2,fma"))) float DotFast(const float* a, const float* b, int d) {
  // 32 partial sums (four independent 8-wide FMA chains) let the compiler vectorise without
  // -ffast-math and hide the FMA latency.
  float s[32] = {0};
  int i = 0;
  for (; i + 32 <= d; i += 32)
    for (int j = 0; j < 32; j++) s[j] += a[i + j] * b[i + j];
  for (int j = 8; j < 32; j++) s[j & 7] += s[j];
  float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < d; i++) t += a[i] * b[i];
  return t;
}
float DotGeneric(const float* a, const float* b, int d) { return DotImpl(a, b, d); }
__attribute__((target("avx512f,avx2,fma"))) float DotAvx512(const float* a, const float* b, int d) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 64 <= d; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
  }
  for (; i + 16 <= d; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  float t = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (; i < d; i++) t += a[i] * b[i];
  return t;
}

Napi::Float32Array ArgF32(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a Float32Array");
  return info[i].As<Napi::Float32Array>();
}
Napi::Int32Array ArgI32(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    throw Napi::TypeError::New(info.Env(), std::string(what) + " must be an Int32Array");
  return info[i].As<Napi::Int32Array>();
}
Napi::Uint8Array ArgU8(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a Uint8Array (or Buffer)");
  return info[i].As<Napi::Uint8Array>();
}
int64_t ArgInt(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsNumber()) throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a number");
  return info[i].As<Napi::Number>().Int64Value();
}

// ---- The asymmetric estimate of the refine step --------------------------------------------------------
// est[i] = sum of q[b] over the set bits b of candidate i's code (row-major, `words` words), exact int32.
// Portable: one table per code byte (lut[B * 256 + v] = sum of q over v's bits). AVX-512 BW: 16 masked
// int16 adds of 32 dimensions per 512 bits, then one widening sum. Same integers either way.
using EstimateFn = void (*)(const int16_t*, const uint64_t*, size_t, int, int32_t*, std::vector<int32_t>&);

void EstimateGeneric(const int16_t* q, const uint64_t* codes, size_t count, int words, int32_t* est, std::vector<int32_t>& lut) {
  const size_t bytes = static_cast<size_t>(words) * 8;
  lut.resize(bytes * 256);
  for (size_t B = 0; B < bytes; B++) {
    int32_t* l = lut.data() + B * 256;
    l[0] = 0;
    for (int v = 1; v < 256; v++) l[v] = l[v & (v - 1)] + q[B * 8 + __builtin_ctz(v)];
  }
  for (size_t i = 0; i < count; i++) {
    const uint64_t* code = codes + i * words;
    int32_t e = 0;
    for (int w = 0; w < words; w++)
      for (int j = 0; j < 8; j++) e += lut[(static_cast<size_t>(w) * 8 + j) * 256 + ((code[w] >> (8 * j)) & 0xff)];
    est[i] = e;
  }
}

__attribute__((target("avx512f,avx512bw,popcnt,avx2,fma"))) void EstimateAvx512(const int16_t* q, const uint64_t* codes, size_t count, int words,
                                                                                int32_t* est, std::vector<int32_t>&) {
  const int chunks = words * 2;  // 32 dimensions each
  const __m512i ones = _mm512_set1_epi16(1);
  for (size_t i = 0; i < count; i++) {
    const uint32_t* c32 = reinterpret_cast<const uint32_t*>(codes + i * words);
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    int j = 0;
    for (; j + 1 < chunks; j += 2) {
      a0 = _mm512_mask_add_epi16(a0, static_cast<__mmask32>(c32[j]), a0, _mm512_loadu_si512(q + 32 * j));
      a1 = _mm512_mask_add_epi16(a1, static_cast<__mmask32>(c32[j + 1]), a1, _mm512_loadu_si512(q + 32 * (j + 1)));
    }
    for (; j < chunks; j++) a0 = _mm512_mask_add_epi16(a0, static_cast<__mmask32>(c32[j]), a0, _mm512_loadu_si512(q + 32 * j));
    // Each int16 lane of a0 / a1 sums `words` terms (chunks / 2), and |q| <= 32767 / words (Search):
    // no overflow; the two are widened to int32 before they are added.
    est[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(a0, ones), _mm512_madd_epi16(a1, ones)));
  }
}

EstimateFn PickEstimate() {
  static const bool ok = HasAvx512Popcnt() && __builtin_cpu_supports("avx512bw") && !std::getenv("SKETCH_NO_AVX512");
  return ok ? EstimateAvx512 : EstimateGeneric;
}

// ---- SketchIndex ------------------------------------------------------------------------------------
class SketchIndex : public Napi::ObjectWrap<SketchIndex> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SketchIndex",
                       {
                           InstanceMethod("setMean", &SketchIndex::SetMean),
                           InstanceMethod("getMean", &SketchIndex::GetMean),
                           InstanceMethod("encode", &SketchIndex::Encode),
                           InstanceMethod("addCodes", &SketchIndex::AddCodes),
                           InstanceMethod("getCodes", &SketchIndex::GetCodes),
                           InstanceMethod("setDead", &SketchIndex::SetDead),
                           InstanceMethod("search", &SketchIndex::Search),
                           InstanceMethod("ntotal", &SketchIndex::Ntotal),
                           InstanceMethod("memoryBytes", &SketchIndex::MemoryBytes),
                           InstanceMethod("rescans", &SketchIndex::Rescans),
                       });
  }

  // new SketchIndex(d, nbits, seed)
  explicit SketchIndex(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SketchIndex>(info) {
    Napi::Env env = info.Env();
    d_ = static_cast<int>(ArgInt(info, 0, "d"));
    nbits_ = static_cast<int>(ArgInt(info, 1, "nbits"));
    const int seed = static_cast<int>(ArgInt(info, 2, "seed"));
    if (d_ < 1 || d_ > 4096) throw Napi::RangeError::New(env, "d must be in 1..4096");
    if (nbits_ != 256 && nbits_ != 512 && nbits_ != 1024 && nbits_ != 2048) throw Napi::RangeError::New(env, "nbits must be 256, 512, 1024 or 2048");
    words_ = nbits_ / 64;
    scan_ = PickScan(words_);
    estimate_ = PickEstimate();
    rot_ = faiss::RandomRotationMatrix(d_, nbits_);
    rot_.init(seed);
    mean_.assign(d_, 0.0f);
  }

 private:
  int d_ = 0, nbits_ = 0, words_ = 0;
  ScanFn scan_ = nullptr;
  EstimateFn estimate_ = nullptr;
  faiss::RandomRotationMatrix rot_;
  std::vector<float> mean_;
  std::vector<uint64_t, Aligned64<uint64_t>> codes_;  // groups of 8 rows, word-interleaved (see the kernel)
  std::vector<uint8_t> dead_;
  size_t n_ = 0;
  double rescans_ = 0;  // queries scanned twice (estimated threshold too tight)
  std::vector<TopK> pool_;  // candidate buffers, one per query of the largest batch so far

  // Codes of n vectors into out (n * words_); with `rotated_out`, also the rotated centred vectors
  // (n * nbits_ floats: the asymmetric scores of the refine step use them).
  void EncodeInto(const float* x, size_t n, uint64_t* out, float* rotated_out = nullptr) {
    std::vector<float> centred(static_cast<size_t>(d_) * std::min<size_t>(n, 4096));
    std::vector<float> rotated(static_cast<size_t>(nbits_) * std::min<size_t>(n, 4096));
    for (size_t i0 = 0; i0 < n; i0 += 4096) {
      const size_t m = std::min<size_t>(4096, n - i0);
      for (size_t i = 0; i < m; i++)
        for (int j = 0; j < d_; j++) centred[i * d_ + j] = x[(i0 + i) * d_ + j] - mean_[j];
      rot_.apply_noalloc(static_cast<faiss::Index::idx_t>(m), centred.data(), rotated.data());
      if (rotated_out) std::memcpy(rotated_out + i0 * nbits_, rotated.data(), sizeof(float) * m * nbits_);
      for (size_t i = 0; i < m; i++) {
        uint64_t* c = out + (i0 + i) * words_;
        const float* r = rotated.data() + i * nbits_;
        for (int w = 0; w < words_; w++) {
          uint64_t word = 0;
          for (int b = 0; b < 64; b++) word |= static_cast<uint64_t>(r[w * 64 + b] > 0) << b;
          c[w] = word;
        }
      }
    }
  }

  // setMean(Float32Array d): the training result (codes are signs of rotate(x - mean)).
  Napi::Value SetMean(const Napi::CallbackInfo& info) {
    auto m = ArgF32(info, 0, "mean");
    if (static_cast<int>(m.ElementLength()) != d_) throw Napi::RangeError::New(info.Env(), "mean has the wrong dimension");
    std::memcpy(mean_.data(), m.Data(), sizeof(float) * d_);
    return info.Env().Undefined();
  }

  Napi::Value GetMean(const Napi::CallbackInfo& info) {
    auto out = Napi::Float32Array::New(info.Env(), d_);
    std::memcpy(out.Data(), mean_.data(), sizeof(float) * d_);
    return out;
  }

  // encode(Float32Array n*d) -> Uint8Array n*nbits/8 (does not add)
  Napi::Value Encode(const Napi::CallbackInfo& info) {
    auto x = ArgF32(info, 0, "vectors");
    if (x.ElementLength() % d_) throw Napi::RangeError::New(info.Env(), "vectors length is not a multiple of d");
    const size_t n = x.ElementLength() / d_;
    auto out = Napi::Uint8Array::New(info.Env(), n * words_ * 8);
    if (n) EncodeInto(x.Data(), n, reinterpret_cast<uint64_t*>(out.Data()));
    return out;
  }

  // addCodes(Uint8Array m*nbits/8) -> first row position
  Napi::Value AddCodes(const Napi::CallbackInfo& info) {
    auto c = ArgU8(info, 0, "codes");
    const size_t bytes = static_cast<size_t>(words_) * 8;
    if (c.ByteLength() % bytes) throw Napi::RangeError::New(info.Env(), "codes length is not a multiple of the code size");
    const size_t m = c.ByteLength() / bytes;
    const size_t first = n_;
    const size_t groups = (n_ + m + kGroup - 1) / kGroup;
    codes_.resize(groups * kGroup * words_, 0);
    const uint8_t* src = c.Data();
    for (size_t i = 0; i < m; i++) {
      const size_t r = n_ + i;
      uint64_t* g = codes_.data() + (r / kGroup) * words_ * kGroup + (r % kGroup);
      for (int w = 0; w < words_; w++) std::memcpy(g + w * kGroup, src + i * bytes + w * 8, 8);
    }
    dead_.resize(n_ + m, 0);
    n_ += m;
    return Napi::Number::New(info.Env(), static_cast<double>(first));
  }

  // getCodes(from, count) -> Uint8Array copy, row-major (snapshots)
  Napi::Value GetCodes(const Napi::CallbackInfo& info) {
    const int64_t from = ArgInt(info, 0, "from"), count = ArgInt(info, 1, "count");
    if (from < 0 || count < 0 || static_cast<size_t>(from + count) > n_) throw Napi::RangeError::New(info.Env(), "rows out of range");
    const size_t bytes = static_cast<size_t>(words_) * 8;
    auto out = Napi::Uint8Array::New(info.Env(), static_cast<size_t>(count) * bytes);
    for (int64_t i = 0; i < count; i++) {
      const size_t r = static_cast<size_t>(from + i);
      const uint64_t* g = codes_.data() + (r / kGroup) * words_ * kGroup + (r % kGroup);
      for (int w = 0; w < words_; w++) std::memcpy(out.Data() + i * bytes + w * 8, g + w * kGroup, 8);
    }
    return out;
  }

  // setDead(Int32Array positions, dead: boolean)
  Napi::Value SetDead(const Napi::CallbackInfo& info) {
    auto p = ArgI32(info, 0, "positions");
    const bool dead = info.Length() < 2 || info[1].ToBoolean().Value();
    for (size_t i = 0; i < p.ElementLength(); i++) {
      const int32_t r = p[i];
      if (r < 0 || static_cast<size_t>(r) >= n_) throw Napi::RangeError::New(info.Env(), "position out of range");
      dead_[r] = dead ? 1 : 0;
    }
    return info.Env().Undefined();
  }

  // search(Float32Array nq*d, k[, refine]) -> { labels: Int32Array nq*m (-1 padded), distances: Int32Array }
  // The k live rows of smallest Hamming distance per query, best first (ties in row order); m = k.
  // With 0 < refine < k, those k candidates are then ordered by the asymmetric estimate of the inner
  // product (the float rotated query against each candidate's sign bits: sum of +-q'_i) and only the
  // best `refine` are returned (m = refine; ties: Hamming distance, then row). The estimate is far
  // closer to the exact score than the Hamming distance, so the exact re-rank needs fewer rows.
  Napi::Value Search(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto x = ArgF32(info, 0, "queries");
    const int64_t k64 = ArgInt(info, 1, "k");
    const int64_t refine64 = info.Length() > 2 && !info[2].IsUndefined() ? ArgInt(info, 2, "refine") : 0;
    if (x.ElementLength() % d_) throw Napi::RangeError::New(env, "queries length is not a multiple of d");
    if (k64 < 1 || k64 > 1'000'000) throw Napi::RangeError::New(env, "k must be in 1..1e6");
    if (refine64 < 0) throw Napi::RangeError::New(env, "refine must be >= 0");
    const int nq = static_cast<int>(x.ElementLength() / d_);
    const size_t k = static_cast<size_t>(k64);
    const bool refine = refine64 > 0 && static_cast<size_t>(refine64) < k;
    const size_t m = refine ? static_cast<size_t>(refine64) : k;
    auto labels = Napi::Int32Array::New(env, nq * m);
    auto dists = Napi::Int32Array::New(env, nq * m);
    std::fill(labels.Data(), labels.Data() + nq * m, -1);
    std::fill(dists.Data(), dists.Data() + nq * m, -1);
    if (nq > 0 && n_ > 0) {
      std::vector<uint64_t> qc(static_cast<size_t>(nq) * words_);
      std::vector<float> qr(refine ? static_cast<size_t>(nq) * nbits_ : 0);
      EncodeInto(x.Data(), nq, qc.data(), refine ? qr.data() : nullptr);
      // The candidate buffers of earlier searches are reused (a fresh 256 KB buffer per query was a
      // page fault per 4 KB and a zeroed page each; Search never runs re-entrantly).
      if (pool_.size() < static_cast<size_t>(nq)) pool_.resize(nq);
      TopK* tops = pool_.data();
      for (int q = 0; q < nq; q++) tops[q].Init(k, nbits_);
      scan_(codes_.data(), n_, dead_.data(), qc.data(), nq, tops, nbits_, true);
      for (int q = 0; q < nq; q++) {
        // The estimated starting threshold was too tight (fewer than k live rows under it): scan this
        // query again from a loose start. Rare; the answer is exact either way.
        if (!tops[q].estimated || tops[q].count >= k) continue;
        tops[q].Init(k, nbits_);
        scan_(codes_.data(), n_, dead_.data(), qc.data() + static_cast<size_t>(q) * words_, 1, &tops[q], nbits_, false);
        rescans_++;
      }
      std::vector<uint32_t> order, bucket;
      std::vector<int32_t> lut, est;
      std::vector<int16_t> q16;
      for (int q = 0; q < nq; q++) {
        TopK& t = tops[q];
        if (t.count > k) t.Compact(nbits_);
        // Best first: distance, then row (the buffer is in row order; a counting sort keeps it).
        order.resize(t.count);
        bucket.assign(static_cast<size_t>(nbits_) + 2, 0);
        for (size_t i = 0; i < t.count; i++) bucket[t.dist[i] + 1]++;
        for (int b = 1; b <= nbits_ + 1; b++) bucket[b] += bucket[b - 1];
        for (size_t i = 0; i < t.count; i++) order[bucket[t.dist[i]]++] = static_cast<uint32_t>(i);
        if (refine && t.count > m) {
          // The estimate in integers: q' quantised to int16 (|q| <= min(2047, 32767 / words), so that
          // the `words` terms an int16 lane of EstimateAvx512 sums cannot overflow), S = sum of q over the candidate's set bits (the estimate sum(bit ? +q : -q) is
          // 2 S - sum(q), the same order). Exact integer sums: the same value on every code path.
          const float* r = qr.data() + static_cast<size_t>(q) * nbits_;
          float mx = 0;
          for (int i = 0; i < nbits_; i++) mx = std::max(mx, std::fabs(r[i]));
          const float scale = mx > 0 ? static_cast<float>(std::min(2047, 32767 / words_)) / mx : 0.0f;
          q16.resize(nbits_);
          for (int i = 0; i < nbits_; i++) q16[i] = static_cast<int16_t>(std::lrintf(r[i] * scale));
          est.resize(t.count);
          estimate_(q16.data(), t.codes.get(), t.count, words_, est.data(), lut);
          // order holds the Hamming order; keep the best m by estimate (ties: that order).
          std::vector<uint32_t> rank(t.count);
          for (size_t i = 0; i < t.count; i++) rank[order[i]] = static_cast<uint32_t>(i);
          const auto better = [&](uint32_t a, uint32_t b) { return est[a] > est[b] || (est[a] == est[b] && rank[a] < rank[b]); };
          std::nth_element(order.begin(), order.begin() + (m - 1), order.end(), better);
          std::sort(order.begin(), order.begin() + m, better);
          order.resize(m);
        }
        int32_t* lq = labels.Data() + static_cast<size_t>(q) * m;
        int32_t* oq = dists.Data() + static_cast<size_t>(q) * m;
        for (size_t i = 0; i < order.size() && i < m; i++) {
          lq[i] = t.rows[order[i]];
          oq[i] = t.dist[order[i]];
        }
      }
    }
    auto out = Napi::Object::New(env);
    out.Set("labels", labels);
    out.Set("distances", dists);
    return out;
  }

  Napi::Value Ntotal(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(n_)); }

  Napi::Value Rescans(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), rescans_); }

  Napi::Value MemoryBytes(const Napi::CallbackInfo& info) {
    double bytes = codes_.capacity() * 8.0 + dead_.capacity() + rot_.A.size() * 4.0 + mean_.size() * 4.0;
    for (const auto& t : pool_) bytes += t.allocated * (4.0 + 2.0 + 8.0 * t.words);
    return Napi::Number::New(info.Env(), bytes);
  }
};

// ---- VectorStore ------------------------------------------------------------------------------------
//
// A sealed base file (a snapshot's vectors.sealed) is `header | record 0 | record 1 | ...`, each record
// `nonce (12) | tag (16) | AES-256-GCM(row r's d float32)` under the snapshot's row key, with associated
// data `<prefix><r>:<hex of the row's 16-byte user id>` (the prefix names the purpose, the snapshot and
// the file). So a row opens only at its own position, in its own snapshot, for its own user: a flipped
// bit, two rows swapped, a row copied from another snapshot or given another user's id do not
// authenticate, and the search that would read one fails (code SNAPSHOT_ROW_NOT_AUTHENTIC) instead of
// using it. The file is mapped shared and read-only: the page cache holds only ciphertext, shared by
// every process that maps the same snapshot and evictable; a re-rank decrypts its candidate rows one at
// a time into a 2 KB scratch row.
class VectorStore;

// Decrypts every sealed row once (no plaintext kept) on several threads: the check a snapshot passes
// at open, off the JavaScript thread. Resolves to the first row that does not authenticate, or -1.
class VerifyWorker : public Napi::AsyncWorker {
 public:
  VerifyWorker(Napi::Env env, VectorStore* store, Napi::Object self, size_t rows, bool background)
      : Napi::AsyncWorker(env), store_(store), rows_(rows), background_(background), deferred_(Napi::Promise::Deferred::New(env)) {
    self_ = Napi::Persistent(self);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  VectorStore* store_;
  size_t rows_;  // the base rows when verify() was called (close() zeroes the store's count meanwhile)
  bool background_;
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
  int64_t bad_ = -1;
};

class VectorStore : public Napi::ObjectWrap<VectorStore> {
  friend class VerifyWorker;

 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "VectorStore",
                       {
                           InstanceMethod("append", &VectorStore::Append),
                           InstanceMethod("adopt", &VectorStore::Adopt),
                           InstanceMethod("scores", &VectorStore::Scores),
                           InstanceMethod("rerank", &VectorStore::Rerank),
                           InstanceMethod("read", &VectorStore::Read),
                           InstanceMethod("rows", &VectorStore::Rows),
                           InstanceMethod("baseRows", &VectorStore::BaseRows),
                           InstanceMethod("populated", &VectorStore::Populated),
                           InstanceMethod("sealed", &VectorStore::Sealed),
                           InstanceMethod("verify", &VectorStore::Verify),
                           InstanceMethod("overlayBytes", &VectorStore::OverlayBytes),
                           InstanceMethod("close", &VectorStore::Close),
                           InstanceMethod("exactSearch", &VectorStore::ExactSearch),
                       });
  }

  // new VectorStore(d, basePath | null, baseRows[, sealed: { key, associatedData, ids, headerBytes }])
  explicit VectorStore(const Napi::CallbackInfo& info) : Napi::ObjectWrap<VectorStore>(info) {
    Napi::Env env = info.Env();
    d_ = static_cast<int>(ArgInt(info, 0, "d"));
    if (d_ < 1 || d_ > 4096) throw Napi::RangeError::New(env, "d must be in 1..4096");
    scratch_.resize(d_);
    if (info.Length() > 1 && info[1].IsString()) {
      const std::string path = info[1].As<Napi::String>().Utf8Value();
      base_rows_ = static_cast<size_t>(ArgInt(info, 2, "baseRows"));
      size_t bytes = base_rows_ * d_ * sizeof(float);
      if (info.Length() > 3 && info[3].IsObject()) {
        auto o = info[3].As<Napi::Object>();
        auto key = o.Get("key"), ad = o.Get("associatedData"), ids = o.Get("ids");
        if (!key.IsTypedArray() || key.As<Napi::Uint8Array>().ByteLength() != 32) throw Napi::TypeError::New(env, "sealed.key must be 32 bytes");
        if (!ad.IsTypedArray() || !ids.IsTypedArray()) throw Napi::TypeError::New(env, "sealed.associatedData and sealed.ids must be Uint8Arrays");
        if (ids.As<Napi::Uint8Array>().ByteLength() < base_rows_ * 16) throw Napi::RangeError::New(env, "sealed.ids has fewer than 16 bytes per row");
        std::memcpy(key_, key.As<Napi::Uint8Array>().Data(), 32);
        auto adv = ad.As<Napi::Uint8Array>();
        ad_prefix_.assign(adv.Data(), adv.Data() + adv.ByteLength());
        ids_ref_ = Napi::Persistent(ids);
        ids_ = ids.As<Napi::Uint8Array>().Data();
        header_ = static_cast<size_t>(o.Get("headerBytes").As<Napi::Number>().Int64Value());
        record_ = sealed_rows::kRecordOverhead + d_ * sizeof(float);
        cipher_.reset(new sealed_rows::RowCipher(key_));
        sealed_ = true;
        bytes = header_ + base_rows_ * record_;
      }
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw Napi::Error::New(env, "cannot open " + path + ": " + std::strerror(errno));
      struct stat st;
      if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes || (sealed_ && static_cast<size_t>(st.st_size) != bytes)) {
        ::close(fd);
        throw Napi::Error::New(env, path + " does not hold exactly " + std::to_string(base_rows_) + " rows");
      }
      if (bytes > 0) {
        // Map every page up front when the file is small next to the machine's RAM (at 1M rows:
        // 2 GB): the re-rank reads ~200 random rows per query, and a page fault per row not yet
        // mapped in this process costs more than the read itself (measured: docs/performance.md §2).
        // A larger file (10M: 20 GB) is mapped lazily, as the page cache cannot hold it anyway.
        // SKETCH_POPULATE=0/1 overrides. The mapping is shared and file-backed either way: its pages
        // are the page cache's, counted once per machine, and evictable.
        // A sealed file is not populated here but by verify(), which reads it anyway: in large
        // sequential reads on its threads, then maps each verified chunk's pages from the page cache
        // (populating here would read it a second time, 128 KB at a time, on the JavaScript thread).
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        const char* force = std::getenv("SKETCH_POPULATE");
        populated_ = force ? std::string(force) == "1" : (pages > 0 && page > 0 && bytes <= static_cast<size_t>(pages) * page / 4);
        void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | (populated_ && !sealed_ ? MAP_POPULATE : 0), fd, 0);
        if (p == MAP_FAILED) {
          ::close(fd);
          throw Napi::Error::New(env, "mmap " + path + ": " + std::strerror(errno));
        }
        madvise(p, bytes, MADV_RANDOM);
        // How a lazily mapped file's candidate rows are asked for before a search reads them
        // (RowsWillNeed; SKETCH_RERANK_HINT=0 | fadvise | madvise, for comparison).
        const char* hint = std::getenv("SKETCH_RERANK_HINT");
        const std::string h = hint ? hint : "";
        hint_ = h == "0" ? kHintOff : h == "madvise" ? kHintMadvise : h == "fadvise" ? kHintFadvise : kHintVector;
        map_ = static_cast<const uint8_t*>(p);
        map_bytes_ = bytes;
        if (!sealed_) base_ = reinterpret_cast<const float*>(map_);
      }
      // verify() reads a sealed file through this descriptor (the file opened here, not whatever the
      // path names later); closed when the store closes.
      if (sealed_ && bytes > 0)
        fd_ = fd;
      else
        ::close(fd);
    }
    dot_ = HasAvx512Popcnt() ? DotAvx512 : HasFastIsa() ? DotFast : DotGeneric;
  }

  ~VectorStore() override { Unmap(); }

 private:
  int d_ = 0;
  const float* base_ = nullptr;  // a clear base (mapped or adopted)
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0, base_rows_ = 0;
  int fd_ = -1;  // a sealed base file's descriptor, for verify()'s reads
  bool populated_ = false;
  // How RowsWillNeed asks for a lazily mapped file's rows, and its reused buffers; pidfd_: this
  // process's pidfd for process_madvise (-2 not opened yet, -1 unavailable).
  enum { kHintOff, kHintMadvise, kHintFadvise, kHintVector } hint_ = kHintVector;
  int pidfd_ = -2;
  std::vector<std::pair<size_t, size_t>> hint_pages_;
  std::vector<struct iovec> hint_runs_;
  std::vector<float> overlay_;
  // Rows adopted from a JavaScript buffer: held by this reference, read in place, never copied.
  Napi::Reference<Napi::Value> adopted_;
  size_t adopted_bytes_ = 0;
  // Sealed base: the row key, the associated data's prefix, the rows' user ids (16 bytes each, a
  // JavaScript array held by reference), the header size and the record size.
  bool sealed_ = false;
  uint8_t key_[32] = {};
  std::vector<uint8_t> ad_prefix_;
  Napi::Reference<Napi::Value> ids_ref_;
  const uint8_t* ids_ = nullptr;
  size_t header_ = 0, record_ = 0;
  std::unique_ptr<sealed_rows::RowCipher> cipher_;
  std::vector<uint8_t> ad_;
  std::vector<float> scratch_;
  bool verifying_ = false, close_pending_ = false;
  // Set by a close during the check: its threads stop at their next chunk (a store nobody will search
  // need not be read to the end).
  std::atomic<bool> verify_abandoned_{false};
  float (*dot_)(const float*, const float*, int) = DotGeneric;

  void Unmap() {
    if (verifying_) {
      close_pending_ = true;  // the verifying threads read the mapping; unmapped when they finish
      verify_abandoned_ = true;
      return;
    }
    if (map_ && map_bytes_ > 0) munmap(const_cast<uint8_t*>(map_), map_bytes_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (pidfd_ >= 0) ::close(pidfd_);
    pidfd_ = -1;
    if (!adopted_.IsEmpty()) adopted_.Reset();
    if (!ids_ref_.IsEmpty()) ids_ref_.Reset();
    std::memset(key_, 0, sizeof key_);
    cipher_.reset();
    map_ = nullptr;
    base_ = nullptr;
    ids_ = nullptr;
    map_bytes_ = 0;
    adopted_bytes_ = 0;
  }
  bool Closed() const { return base_rows_ > 0 && !base_ && !(sealed_ && cipher_); }
  size_t RowsNow() const { return base_rows_ + overlay_.size() / d_; }
  const uint8_t* Record(size_t r) const { return map_ + header_ + r * record_; }

  // Asks the kernel to read base rows [r0, r1) of a mapped file ahead, in large requests: the mapping
  // is MADV_RANDOM (a re-rank reads scattered rows: no readahead), so a pass over many consecutive rows
  // (exactSearch, read) would otherwise fault them in 4 KB at a time from disk.
  void WillNeed(size_t r0, size_t r1) const {
    if (!map_ || populated_) return;
    r1 = std::min(r1, base_rows_);
    if (r0 >= r1) return;
    const size_t row = sealed_ ? record_ : d_ * sizeof(float);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t from = (header_ + r0 * row) / page * page, to = std::min(map_bytes_, header_ + r1 * row);
    madvise(const_cast<uint8_t*>(map_) + from, to - from, MADV_WILLNEED);
  }

  // Asks the kernel, before a re-rank (or scores) reads them one by one, for the pages of every base
  // row in `pos` (-1 and overlay rows skipped) of a lazily mapped file: the mapping is MADV_RANDOM, so
  // each row not in the page cache would otherwise be a page fault waiting for its own 4 KB disk read
  // (~200 per query, one after the other). Asked for together, the disk serves them with a deep queue
  // while the first rows are decrypted. The rows' pages are sorted and adjacent ones merged (a row can
  // span two pages), then given to one process_madvise(MADV_WILLNEED) call (up to 1024 runs a call);
  // where that is refused (no MADV_WILLNEED there before Linux 5.12; CAP_SYS_NICE asked even of a
  // process advising itself before 6.13), one posix_fadvise(WILLNEED) per run on the descriptor (madvise on the mapping for a clear
  // file). All of these only start page cache readahead: nothing is mapped or checked here, rows are
  // read and authenticated through the mapping as before. A page already cached costs a lookup
  // (measured: docs/performance.md, section 2). Nothing to do for a populated or adopted base.
  // SKETCH_RERANK_HINT=0 turns it off; =fadvise or =madvise use the per-run calls.
  void RowsWillNeed(const int32_t* pos, size_t count) {
    if (!map_ || populated_ || hint_ == kHintOff || count == 0) return;
    const size_t row = sealed_ ? record_ : d_ * sizeof(float);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    hint_pages_.clear();
    for (size_t i = 0; i < count; i++) {
      if (pos[i] < 0 || static_cast<size_t>(pos[i]) >= base_rows_) continue;
      const size_t from = header_ + static_cast<size_t>(pos[i]) * row;
      hint_pages_.emplace_back(from / page, (from + row - 1) / page);
    }
    if (hint_pages_.empty()) return;
    std::sort(hint_pages_.begin(), hint_pages_.end());
    hint_runs_.clear();
    size_t first = hint_pages_[0].first, last = hint_pages_[0].second;
    const auto run = [&] {
      const size_t off = first * page;
      hint_runs_.push_back({const_cast<uint8_t*>(map_) + off, std::min(map_bytes_, (last + 1) * page) - off});
    };
    for (size_t i = 1; i < hint_pages_.size(); i++) {
      if (hint_pages_[i].first <= last + 1) {
        last = std::max(last, hint_pages_[i].second);
        continue;
      }
      run();
      first = hint_pages_[i].first;
      last = hint_pages_[i].second;
    }
    run();
    if (hint_ == kHintVector) {
      if (pidfd_ == -2) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
      bool ok = pidfd_ >= 0;
      for (size_t i = 0; ok && i < hint_runs_.size(); i += 1024)
        ok = syscall(SYS_process_madvise, pidfd_, hint_runs_.data() + i, std::min<size_t>(1024, hint_runs_.size() - i), MADV_WILLNEED, 0) >= 0;
      if (ok) return;
      if (pidfd_ >= 0) ::close(pidfd_);
      pidfd_ = -1;
      hint_ = kHintFadvise;  // refused: the per-run calls from now on (this time too)
    }
    for (const auto& r : hint_runs_) {
      const size_t off = static_cast<const uint8_t*>(r.iov_base) - map_;
      if (hint_ == kHintFadvise && fd_ >= 0)
        posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(r.iov_len), POSIX_FADV_WILLNEED);
      else
        madvise(r.iov_base, r.iov_len, MADV_WILLNEED);
    }
  }

  // The associated data of sealed row r, into `ad`.
  static void RowAd(const std::vector<uint8_t>& prefix, const uint8_t* ids, size_t r, std::vector<uint8_t>& ad) {
    static const char kHex[] = "0123456789abcdef";
    ad.assign(prefix.begin(), prefix.end());
    const std::string pos = std::to_string(r);
    ad.insert(ad.end(), pos.begin(), pos.end());
    ad.push_back(':');
    const uint8_t* id = ids + r * 16;
    for (int i = 0; i < 16; i++) {
      ad.push_back(kHex[id[i] >> 4]);
      ad.push_back(kHex[id[i] & 15]);
    }
  }

  // Row r's floats: in place (a clear base, the overlay) or decrypted into `buf`; nullptr when a sealed
  // row does not authenticate.
  const float* RowInto(size_t r, float* buf) {
    if (r >= base_rows_) return overlay_.data() + (r - base_rows_) * d_;
    if (!sealed_) return base_ + r * d_;
    RowAd(ad_prefix_, ids_, r, ad_);
    return cipher_->Open(Record(r), d_ * sizeof(float), ad_.data(), ad_.size(), reinterpret_cast<uint8_t*>(buf)) ? buf : nullptr;
  }
  const float* RowOrThrow(Napi::Env env, size_t r, float* buf) {
    const float* row = RowInto(r, buf);
    if (!row) {
      auto e = Napi::Error::New(env, "snapshot vectors row " + std::to_string(r) +
                                         " does not authenticate (altered, or moved from another row, snapshot or user)");
      e.Set("code", Napi::String::New(env, "SNAPSHOT_ROW_NOT_AUTHENTIC"));
      e.Set("row", Napi::Number::New(env, static_cast<double>(r)));
      throw e;
    }
    return row;
  }

  // append(Float32Array m*d) -> first row position
  Napi::Value Append(const Napi::CallbackInfo& info) {
    auto x = ArgF32(info, 0, "vectors");
    if (x.ElementLength() % d_) throw Napi::RangeError::New(info.Env(), "vectors length is not a multiple of d");
    const size_t first = RowsNow();
    overlay_.insert(overlay_.end(), x.Data(), x.Data() + x.ElementLength());
    return Napi::Number::New(info.Env(), static_cast<double>(first));
  }

  // adopt(Float32Array rows*d): an empty store takes these rows as its base, read in place (the
  // array is referenced, not copied); later appends go to the overlay as usual.
  Napi::Value Adopt(const Napi::CallbackInfo& info) {
    auto x = ArgF32(info, 0, "vectors");
    if (x.ElementLength() % d_) throw Napi::RangeError::New(info.Env(), "vectors length is not a multiple of d");
    if (map_ || base_ || base_rows_ > 0 || !overlay_.empty()) throw Napi::Error::New(info.Env(), "adopt needs an empty store");
    adopted_ = Napi::Persistent(info[0]);
    base_ = x.Data();
    base_rows_ = x.ElementLength() / d_;
    adopted_bytes_ = x.ElementLength() * sizeof(float);
    populated_ = true;
    return info.Env().Undefined();
  }

  // scores(Float32Array query d, Int32Array positions) -> Float32Array (inner products; NaN for -1)
  Napi::Value Scores(const Napi::CallbackInfo& info) {
    auto q = ArgF32(info, 0, "query");
    auto p = ArgI32(info, 1, "positions");
    if (static_cast<int>(q.ElementLength()) != d_) throw Napi::RangeError::New(info.Env(), "query has the wrong dimension");
    if (Closed()) throw Napi::Error::New(info.Env(), "the store is closed");
    const size_t n = RowsNow();
    auto out = Napi::Float32Array::New(info.Env(), p.ElementLength());
    RowsWillNeed(p.Data(), p.ElementLength());
    for (size_t i = 0; i < p.ElementLength(); i++) {
      const int32_t r = p[i];
      if (r < 0) {
        out[i] = NAN;
        continue;
      }
      if (static_cast<size_t>(r) >= n) throw Napi::RangeError::New(info.Env(), "position out of range");
      out[i] = dot_(q.Data(), RowOrThrow(info.Env(), r, scratch_.data()), d_);
    }
    return out;
  }

  // Prefetches row r (2 KB at d = 512, plus 28 bytes sealed: the re-rank reads rows in random order,
  // so the hardware prefetcher cannot guess the next one; asking a few rows ahead keeps several reads
  // in flight).
  void PrefetchRow(int32_t r, size_t n) const {
    if (r < 0 || static_cast<size_t>(r) >= n) return;
    const bool sealed = sealed_ && static_cast<size_t>(r) < base_rows_;
    const char* p = sealed ? reinterpret_cast<const char*>(Record(r))
                           : reinterpret_cast<const char*>(static_cast<size_t>(r) < base_rows_ ? base_ + r * d_ : overlay_.data() + (r - base_rows_) * d_);
    const size_t bytes = sealed ? record_ : d_ * sizeof(float);
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
  }
  void PrefetchFirstLine(int32_t r) const {
    if (r < 0) return;
    if (static_cast<size_t>(r) >= base_rows_) return;
    __builtin_prefetch(sealed_ ? reinterpret_cast<const void*>(Record(r)) : reinterpret_cast<const void*>(base_ + r * d_), 0, 3);
  }

  // rerank(Float32Array queries nq*d, Int32Array positions nq*kc, k) -> { labels: Int32Array nq*k,
  // scores: Float32Array nq*k }: per query, the k best of its kc candidate rows by inner product,
  // best first (ties: lower row first); -1 candidates are skipped, missing results are -1 / NaN.
  // A sealed row that does not authenticate fails the whole call (SNAPSHOT_ROW_NOT_AUTHENTIC).
  Napi::Value Rerank(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto x = ArgF32(info, 0, "queries");
    auto p = ArgI32(info, 1, "positions");
    const int64_t k64 = ArgInt(info, 2, "k");
    if (x.ElementLength() % d_ || x.ElementLength() == 0) throw Napi::RangeError::New(env, "queries length is not a positive multiple of d");
    const size_t nq = x.ElementLength() / d_;
    if (p.ElementLength() % nq) throw Napi::RangeError::New(env, "positions length is not a multiple of the query count");
    if (k64 < 1 || k64 > 1'000'000) throw Napi::RangeError::New(env, "k must be in 1..1e6");
    if (Closed()) throw Napi::Error::New(env, "the store is closed");
    const size_t kc = p.ElementLength() / nq, k = static_cast<size_t>(k64), n = RowsNow();
    for (size_t i = 0; i < p.ElementLength(); i++)
      if (p[i] >= 0 && static_cast<size_t>(p[i]) >= n) throw Napi::RangeError::New(env, "position out of range");
    auto labels = Napi::Int32Array::New(env, nq * k);
    auto scores = Napi::Float32Array::New(env, nq * k);
    std::fill(labels.Data(), labels.Data() + nq * k, -1);
    std::fill(scores.Data(), scores.Data() + nq * k, NAN);
    // Every query's candidates asked for from disk at once (a lazily mapped file), then read in turn.
    RowsWillNeed(p.Data(), p.ElementLength());
    constexpr size_t kAhead = 4;
    std::vector<float> sc(kc);
    std::vector<uint32_t> idx;
    idx.reserve(kc);
    for (size_t q = 0; q < nq; q++) {
      const float* qv = x.Data() + q * d_;
      const int32_t* pq = p.Data() + q * kc;
      // The first line of every candidate row first (their page walks and DRAM accesses overlap:
      // the rows are random), then whole rows a few ahead of the dot products.
      for (size_t i = 0; i < kc; i++) PrefetchFirstLine(pq[i]);
      for (size_t i = 0; i < std::min(kAhead, kc); i++) PrefetchRow(pq[i], n);
      idx.clear();
      for (size_t i = 0; i < kc; i++) {
        if (i + kAhead < kc) PrefetchRow(pq[i + kAhead], n);
        if (pq[i] < 0) continue;
        sc[i] = dot_(qv, RowOrThrow(env, pq[i], scratch_.data()), d_);
        idx.push_back(static_cast<uint32_t>(i));
      }
      const size_t take = std::min(k, idx.size());
      const auto better = [&](uint32_t a, uint32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && pq[a] < pq[b]); };
      std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), better);
      for (size_t i = 0; i < take; i++) {
        labels[q * k + i] = pq[idx[i]];
        scores[q * k + i] = sc[idx[i]];
      }
    }
    auto out = Napi::Object::New(env);
    out.Set("labels", labels);
    out.Set("scores", scores);
    return out;
  }

  // read(from, count) -> Float32Array copy of rows [from, from + count)
  Napi::Value Read(const Napi::CallbackInfo& info) {
    const int64_t from = ArgInt(info, 0, "from"), count = ArgInt(info, 1, "count");
    if (from < 0 || count < 0 || static_cast<size_t>(from + count) > RowsNow()) throw Napi::RangeError::New(info.Env(), "rows out of range");
    if (Closed()) throw Napi::Error::New(info.Env(), "the store is closed");
    auto out = Napi::Float32Array::New(info.Env(), static_cast<size_t>(count) * d_);
    WillNeed(static_cast<size_t>(from), static_cast<size_t>(from + count));
    for (int64_t i = 0; i < count; i++) {
      float* dst = out.Data() + i * d_;
      const float* row = RowOrThrow(info.Env(), from + i, dst);
      if (row != dst) std::memcpy(dst, row, sizeof(float) * d_);
    }
    return out;
  }

  // exactSearch(Float32Array nq*d, k) -> { labels: Int32Array nq*k, scores: Float32Array }: the exact
  // top-k by inner product over every row (the benchmarks' reference; rows are read, and sealed ones
  // decrypted, once per batch).
  Napi::Value ExactSearch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto x = ArgF32(info, 0, "queries");
    const int64_t k64 = ArgInt(info, 1, "k");
    if (x.ElementLength() % d_ || k64 < 1 || k64 > 10000) throw Napi::RangeError::New(env, "bad queries or k");
    if (Closed()) throw Napi::Error::New(env, "the store is closed");
    const size_t nq = x.ElementLength() / d_, k = static_cast<size_t>(k64), n = RowsNow();
    std::vector<float> best(nq * k, -INFINITY);
    std::vector<int32_t> lab(nq * k, -1);
    constexpr size_t kBlock = 512;
    std::vector<float> block(kBlock * d_);
    std::vector<const float*> rows(kBlock);
    constexpr size_t kAheadRows = 16 * kBlock;  // 16 MB of rows read ahead, asked for 8 MB at a time
    WillNeed(0, kAheadRows);
    for (size_t b0 = 0; b0 < n; b0 += kBlock) {
      const size_t b1 = std::min(n, b0 + kBlock);
      if (b0 % (kAheadRows / 2) == 0) WillNeed(b0 + kAheadRows / 2, b0 + kAheadRows);
      for (size_t r = b0; r < b1; r++) rows[r - b0] = RowOrThrow(env, r, block.data() + (r - b0) * d_);
      for (size_t q = 0; q < nq; q++) {
        const float* qv = x.Data() + q * d_;
        float* bq = best.data() + q * k;
        int32_t* lq = lab.data() + q * k;
        for (size_t r = b0; r < b1; r++) {
          const float s = dot_(qv, rows[r - b0], d_);
          if (s <= bq[k - 1]) continue;
          size_t p = k - 1;
          while (p > 0 && bq[p - 1] < s) {
            bq[p] = bq[p - 1];
            lq[p] = lq[p - 1];
            p--;
          }
          bq[p] = s;
          lq[p] = static_cast<int32_t>(r);
        }
      }
    }
    auto labels = Napi::Int32Array::New(env, nq * k);
    auto scores = Napi::Float32Array::New(env, nq * k);
    std::memcpy(labels.Data(), lab.data(), lab.size() * 4);
    std::memcpy(scores.Data(), best.data(), best.size() * 4);
    auto out = Napi::Object::New(env);
    out.Set("labels", labels);
    out.Set("scores", scores);
    return out;
  }

  // verify(background?: boolean) -> Promise<number>: every sealed base row decrypted once on up to 4
  // threads, nothing kept; the first row that does not authenticate, or -1 (also for a clear store).
  // `background`: the threads run at the lowest CPU priority (nice 19), for a check that runs while the
  // store already serves (its searches authenticate every row they read in any case).
  Napi::Value Verify(const Napi::CallbackInfo& info) {
    if (Closed()) throw Napi::Error::New(info.Env(), "the store is closed");
    if (verifying_) throw Napi::Error::New(info.Env(), "already verifying");
    const bool background = info.Length() > 0 && info[0].IsBoolean() && info[0].As<Napi::Boolean>().Value();
    auto* w = new VerifyWorker(info.Env(), this, info.This().As<Napi::Object>(), base_rows_, background);
    verifying_ = true;
    auto promise = w->Promise();
    w->Queue();
    return promise;
  }

  // The first sealed row in [0, rows) that does not authenticate, or -1 (off the JS thread).
  // Each thread takes one contiguous range of the file and reads it through the store's descriptor in
  // 8 MiB chunks, not through the mapping: that is MADV_RANDOM (a re-rank reads scattered rows), so it
  // faulted one 4 KB page, one disk read, per two rows (~24 s at 1M, 203 s at 10M from a cold page
  // cache). A file small next to RAM (populated_) is read through the page cache, the next chunk asked
  // for (POSIX_FADV_WILLNEED) while this one is decrypted, and each verified chunk's pages are then
  // mapped into the process. A larger one, which the page cache cannot keep anyway, is read with
  // O_DIRECT on twice as many threads as cores (one reads while another decrypts): through the cache,
  // filling and reclaiming pages took as much CPU as the cipher (measured at 10M). A row that cannot be
  // read whole (the file cut after open) counts as not authentic.
  int64_t FirstNotAuthentic(size_t rows, bool background) const {
    if (!sealed_ || rows == 0) return -1;
    if (fd_ < 0) return 0;
    constexpr size_t kChunkBytes = 8u << 20;
    constexpr size_t kAlign = 4096;
    int direct = -1;
    if (!populated_) direct = ::open(("/proc/self/fd/" + std::to_string(fd_)).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
    const size_t threads = std::max<size_t>(1, std::min<size_t>({direct >= 0 ? 8 : 4, direct >= 0 ? 2 * cores : cores, (rows + 4095) / 4096}));
    const size_t chunk_rows = std::max<size_t>(1, kChunkBytes / record_);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const auto offset = [&](size_t r) { return header_ + r * record_; };
    if (direct < 0) posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    std::vector<int64_t> bad(threads, -1);
    std::vector<std::thread> pool;
    const size_t per = (rows + threads - 1) / threads;
    for (size_t t = 0; t < threads; t++) {
      pool.emplace_back([&, t] {
        // Linux sets a nice value per thread (the thread id as the process id); lowering it needs no privilege.
        if (background) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
        sealed_rows::RowCipher cipher(key_);
        std::vector<uint8_t> ad;
        std::vector<float> row(d_);
        // Room for a chunk widened to kAlign at both ends (O_DIRECT reads aligned offsets and lengths
        // into an aligned buffer).
        const size_t cap = (chunk_rows * record_ + 2 * kAlign) / kAlign * kAlign;
        std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(std::aligned_alloc(kAlign, cap)), &std::free);
        if (!buf) {
          bad[t] = static_cast<int64_t>(std::min(rows, t * per));
          return;
        }
        // Reads [from, to) of the file into buf (at buf + (from - aligned start) when direct); returns
        // where the bytes start and how many of [from, to) were read.
        // A direct read the file system refuses (EINVAL) is done again through the page cache.
        std::function<const uint8_t*(size_t, size_t, size_t*, bool)> read = [&](size_t from, size_t to, size_t* avail, bool d) -> const uint8_t* {
          const size_t a0 = d ? from / kAlign * kAlign : from;
          const size_t a1 = d ? (to + kAlign - 1) / kAlign * kAlign : to;
          const int fd = d ? direct : fd_;
          size_t got = 0;
          while (got < a1 - a0) {
            const ssize_t k = pread(fd, buf.get() + got, a1 - a0 - got, static_cast<off_t>(a0 + got));
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && d && errno == EINVAL) return read(from, to, avail, false);
            if (k <= 0) break;
            got += static_cast<size_t>(k);
          }
          *avail = got > from - a0 ? std::min(to - from, got - (from - a0)) : 0;
          return buf.get() + (from - a0);
        };
        const size_t begin = std::min(rows, t * per), end = std::min(rows, (t + 1) * per);
        if (direct < 0 && begin < end) posix_fadvise(fd_, offset(begin), std::min(end - begin, chunk_rows) * record_, POSIX_FADV_WILLNEED);
        for (size_t c0 = begin; c0 < end; c0 += chunk_rows) {
          if (verify_abandoned_) return;
          const size_t c1 = std::min(end, c0 + chunk_rows);
          if (direct < 0 && c1 < end) posix_fadvise(fd_, offset(c1), (std::min(end, c1 + chunk_rows) - c1) * record_, POSIX_FADV_WILLNEED);
          size_t got = 0;
          const uint8_t* data = read(offset(c0), offset(c1), &got, direct >= 0);
          const size_t whole = got / record_;
          for (size_t i = 0; i < whole; i++) {
            RowAd(ad_prefix_, ids_, c0 + i, ad);
            if (!cipher.Open(data + i * record_, d_ * sizeof(float), ad.data(), ad.size(), reinterpret_cast<uint8_t*>(row.data()))) {
              bad[t] = static_cast<int64_t>(c0 + i);
              return;
            }
          }
          if (whole < c1 - c0) {
            bad[t] = static_cast<int64_t>(c0 + whole);
            return;
          }
          if (populated_) {
            const size_t from = offset(c0) / page * page, to = std::min(map_bytes_, offset(c1));
            uint8_t* p = const_cast<uint8_t*>(map_) + from;
            if (madvise(p, to - from, MADV_POPULATE_READ) != 0) {
              volatile uint8_t sink = 0;  // kernels before 5.14: touch one byte per page
              for (size_t o = 0; o < to - from; o += page) sink = sink + p[o];
            }
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    if (direct >= 0) ::close(direct);
    for (int64_t b : bad)
      if (b >= 0) return b;
    return -1;
  }
  void VerifyDone() {
    verifying_ = false;
    verify_abandoned_ = false;
    if (close_pending_) {
      close_pending_ = false;
      Unmap();
    }
  }

  Napi::Value Rows(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(RowsNow())); }
  Napi::Value Populated(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), populated_); }
  Napi::Value Sealed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), sealed_); }
  Napi::Value BaseRows(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(base_rows_)); }
  // Memory this store holds outside the page cache: the overlay and adopted rows (a mapped file's
  // pages are the page cache's).
  Napi::Value OverlayBytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(overlay_.capacity() * sizeof(float) + adopted_bytes_));
  }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    Unmap();
    base_rows_ = 0;
    overlay_.clear();
    overlay_.shrink_to_fit();
    return info.Env().Undefined();
  }
};

void VerifyWorker::Execute() { bad_ = store_->FirstNotAuthentic(rows_, background_); }
void VerifyWorker::OnOK() {
  store_->VerifyDone();
  deferred_.Resolve(Napi::Number::New(Env(), static_cast<double>(bad_)));
}
void VerifyWorker::OnError(const Napi::Error& e) {
  store_->VerifyDone();
  deferred_.Reject(e.Value());
}

// sealRows(key: Uint8Array(32), associatedData: Uint8Array (prefix), firstRow, ids: Uint8Array(16 m),
// vectors: Float32Array(m d), d) -> Uint8Array(m records): rows firstRow.. sealed as VectorStore reads them.
Napi::Value SealRows(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto key = ArgU8(info, 0, "key");
  auto ad = ArgU8(info, 1, "associatedData");
  const int64_t first = ArgInt(info, 2, "firstRow");
  auto ids = ArgU8(info, 3, "ids");
  auto x = ArgF32(info, 4, "vectors");
  const int64_t d = ArgInt(info, 5, "d");
  if (key.ByteLength() != 32) throw Napi::RangeError::New(env, "key must be 32 bytes");
  if (d < 1 || d > 4096 || x.ElementLength() % d) throw Napi::RangeError::New(env, "vectors length is not a multiple of d");
  const size_t m = x.ElementLength() / d;
  if (ids.ByteLength() != m * 16) throw Napi::RangeError::New(env, "ids must hold 16 bytes per row");
  if (first < 0) throw Napi::RangeError::New(env, "firstRow must be >= 0");
  const size_t record = sealed_rows::kRecordOverhead + d * sizeof(float);
  auto out = Napi::Uint8Array::New(env, m * record);
  sealed_rows::RowCipher cipher(key.Data());
  std::vector<uint8_t> prefix(ad.Data(), ad.Data() + ad.ByteLength()), a;
  for (size_t i = 0; i < m; i++) {
    // The same associated data as VectorStore::RowAd for row first + i (ids here start at row `first`).
    const uint8_t* id = ids.Data() + i * 16;
    a.assign(prefix.begin(), prefix.end());
    const std::string pos = std::to_string(first + i);
    a.insert(a.end(), pos.begin(), pos.end());
    a.push_back(':');
    static const char kHex[] = "0123456789abcdef";
    for (int j = 0; j < 16; j++) {
      a.push_back(kHex[id[j] >> 4]);
      a.push_back(kHex[id[j] & 15]);
    }
    if (!cipher.Seal(reinterpret_cast<const uint8_t*>(x.Data() + i * d), d * sizeof(float), a.data(), a.size(), out.Data() + i * record))
      throw Napi::Error::New(env, "sealing a row failed (OpenSSL)");
  }
  return out;
}

// openRow(key, associatedData (the whole), record: Uint8Array, d) -> Float32Array | null: one record
// opened on its own (tests check records sealed here against the key ring's primitive).
Napi::Value OpenRow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto key = ArgU8(info, 0, "key");
  auto ad = ArgU8(info, 1, "associatedData");
  auto rec = ArgU8(info, 2, "record");
  const int64_t d = ArgInt(info, 3, "d");
  if (key.ByteLength() != 32) throw Napi::RangeError::New(env, "key must be 32 bytes");
  if (d < 1 || d > 4096 || rec.ByteLength() != sealed_rows::kRecordOverhead + d * sizeof(float)) throw Napi::RangeError::New(env, "record has the wrong size");
  auto out = Napi::Float32Array::New(env, d);
  sealed_rows::RowCipher cipher(key.Data());
  if (!cipher.Open(rec.Data(), d * sizeof(float), ad.Data(), ad.ByteLength(), reinterpret_cast<uint8_t*>(out.Data()))) return env.Null();
  return out;
}

}  // namespace

// Called from faiss-node's Init (build-faiss.sh adds the call to the copied faiss.cc).
Napi::Object ProjectExtensionsInit(Napi::Env env, Napi::Object exports) {
  exports.Set("SketchIndex", SketchIndex::Define(env));
  exports.Set("VectorStore", VectorStore::Define(env));
  exports.Set("sealRows", Napi::Function::New(env, SealRows, "sealRows"));
  exports.Set("openRow", Napi::Function::New(env, OpenRow, "openRow"));
  exports.Set("sealedRowOverhead", Napi::Number::New(env, static_cast<double>(sealed_rows::kRecordOverhead)));
  exports.Set("projectBindingVersion", Napi::Number::New(env, kProjectBindingVersion));
  exports.Set("fastIsa", Napi::Boolean::New(env, HasFastIsa()));
  exports.Set("scanIsa", Napi::String::New(env, ScanIsa()));
  return exports;
}
