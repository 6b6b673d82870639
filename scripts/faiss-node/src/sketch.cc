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
//                (a snapshot's vectors.f32) plus an in-memory overlay of rows appended since.
//
// Why a scan of our own instead of faiss::IndexBinaryFlat: Debian's libfaiss is compiled for baseline
// x86-64, where __builtin_popcountl is a library call (about 10x slower than the POPCNT instruction), and
// its search cannot skip tombstones. The kernel below is compiled twice (generic and
// popcnt+avx2) and picked at run time, so the addon still loads on an older processor.
#include <napi.h>

#include <faiss/VectorTransform.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kProjectBindingVersion = 2;

bool HasFastIsa() {
  static const bool fast = __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fast;
}

// ---- Hamming scan kernel ----------------------------------------------------------------------------
// For each query q (codes qc[q]), each live row r in [0, n): dist[q * n + r] = hamming(qc[q], code[r]),
// and hist[q][dist]++. Dead rows get the sentinel `nbits + 1` and are not counted. Rows are read in
// blocks so that a batch of queries shares one pass over the codes (micro-batching).
template <int W>
__attribute__((always_inline)) inline void ScanImpl(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq,
                                                    uint16_t* dist, uint32_t* hist, int nbits) {
  constexpr size_t kBlock = 1024;
  const uint16_t sentinel = static_cast<uint16_t>(nbits + 1);
  const size_t bins = static_cast<size_t>(nbits) + 2;
  // Four interleaved histograms per query: neighbouring rows often share a distance, and one counter
  // per bin would serialise on the store-to-load latency of that counter.
  std::vector<uint32_t> hists(static_cast<size_t>(nq) * 4 * bins, 0);
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t b1 = std::min(n, b0 + kBlock);
    for (int q = 0; q < nq; q++) {
      const uint64_t* a = qc + static_cast<size_t>(q) * W;
      uint64_t aw[W];
      for (int w = 0; w < W; w++) aw[w] = a[w];
      uint16_t* dq = dist + static_cast<size_t>(q) * n;
      uint32_t* hq = hists.data() + static_cast<size_t>(q) * 4 * bins;
      for (size_t r = b0; r < b1; r++) {
        const uint64_t* c = codes + r * W;
        int h = 0;
        for (int w = 0; w < W; w++) h += __builtin_popcountll(aw[w] ^ c[w]);
        const uint16_t v = dead[r] ? sentinel : static_cast<uint16_t>(h);
        dq[r] = v;
        hq[(r & 3) * bins + v]++;
      }
    }
  }
  for (int q = 0; q < nq; q++) {
    const uint32_t* hq = hists.data() + static_cast<size_t>(q) * 4 * bins;
    uint32_t* out = hist + static_cast<size_t>(q) * bins;
    for (size_t b = 0; b < bins; b++) out[b] = hq[b] + hq[bins + b] + hq[2 * bins + b] + hq[3 * bins + b];
    out[nbits + 1] = 0;  // dead rows
  }
}

template <int W>
__attribute__((target("popcnt,avx2,fma"))) void ScanFast(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq,
                                                         uint16_t* dist, uint32_t* hist, int nbits) {
  ScanImpl<W>(codes, n, dead, qc, nq, dist, hist, nbits);
}

template <int W>
void ScanGeneric(const uint64_t* codes, size_t n, const uint8_t* dead, const uint64_t* qc, int nq, uint16_t* dist, uint32_t* hist,
                 int nbits) {
  ScanImpl<W>(codes, n, dead, qc, nq, dist, hist, nbits);
}

using ScanFn = void (*)(const uint64_t*, size_t, const uint8_t*, const uint64_t*, int, uint16_t*, uint32_t*, int);

ScanFn PickScan(int words) {
  const bool fast = HasFastIsa();
  switch (words) {
    case 4: return fast ? ScanFast<4> : ScanGeneric<4>;
    case 8: return fast ? ScanFast<8> : ScanGeneric<8>;
    case 16: return fast ? ScanFast<16> : ScanGeneric<16>;
    case 32: return fast ? ScanFast<32> : ScanGeneric<32>;
    default: return nullptr;
  }
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
    rot_ = faiss::RandomRotationMatrix(d_, nbits_);
    rot_.init(seed);
    mean_.assign(d_, 0.0f);
  }

 private:
  int d_ = 0, nbits_ = 0, words_ = 0;
  ScanFn scan_ = nullptr;
  faiss::RandomRotationMatrix rot_;
  std::vector<float> mean_;
  std::vector<uint64_t> codes_;
  std::vector<uint8_t> dead_;
  size_t n_ = 0;

  void EncodeInto(const float* x, size_t n, uint64_t* out) {
    std::vector<float> centred(static_cast<size_t>(d_) * std::min<size_t>(n, 4096));
    std::vector<float> rotated(static_cast<size_t>(nbits_) * std::min<size_t>(n, 4096));
    for (size_t i0 = 0; i0 < n; i0 += 4096) {
      const size_t m = std::min<size_t>(4096, n - i0);
      for (size_t i = 0; i < m; i++)
        for (int j = 0; j < d_; j++) centred[i * d_ + j] = x[(i0 + i) * d_ + j] - mean_[j];
      rot_.apply_noalloc(static_cast<faiss::Index::idx_t>(m), centred.data(), rotated.data());
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
    codes_.resize((n_ + m) * words_);
    std::memcpy(codes_.data() + n_ * words_, c.Data(), m * bytes);
    dead_.resize(n_ + m, 0);
    n_ += m;
    return Napi::Number::New(info.Env(), static_cast<double>(first));
  }

  // getCodes(from, count) -> Uint8Array copy (snapshots)
  Napi::Value GetCodes(const Napi::CallbackInfo& info) {
    const int64_t from = ArgInt(info, 0, "from"), count = ArgInt(info, 1, "count");
    if (from < 0 || count < 0 || static_cast<size_t>(from + count) > n_) throw Napi::RangeError::New(info.Env(), "rows out of range");
    auto out = Napi::Uint8Array::New(info.Env(), static_cast<size_t>(count) * words_ * 8);
    std::memcpy(out.Data(), codes_.data() + static_cast<size_t>(from) * words_, out.ByteLength());
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

  // search(Float32Array nq*d, k) -> { labels: Int32Array nq*k (-1 padded), distances: Int32Array }
  // The k live rows of smallest Hamming distance per query, best first (ties in row order).
  Napi::Value Search(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto x = ArgF32(info, 0, "queries");
    const int64_t k64 = ArgInt(info, 1, "k");
    if (x.ElementLength() % d_) throw Napi::RangeError::New(env, "queries length is not a multiple of d");
    if (k64 < 1 || k64 > 1'000'000) throw Napi::RangeError::New(env, "k must be in 1..1e6");
    const int nq = static_cast<int>(x.ElementLength() / d_);
    const size_t k = static_cast<size_t>(k64);
    auto labels = Napi::Int32Array::New(env, nq * k);
    auto dists = Napi::Int32Array::New(env, nq * k);
    std::fill(labels.Data(), labels.Data() + nq * k, -1);
    std::fill(dists.Data(), dists.Data() + nq * k, -1);
    if (nq > 0 && n_ > 0) {
      std::vector<uint64_t> qc(static_cast<size_t>(nq) * words_);
      EncodeInto(x.Data(), nq, qc.data());
      std::vector<uint16_t> dist(static_cast<size_t>(nq) * n_);
      const int bins = nbits_ + 2;
      std::vector<uint32_t> hist(static_cast<size_t>(nq) * bins, 0);
      scan_(codes_.data(), n_, dead_.data(), qc.data(), nq, dist.data(), hist.data(), nbits_);
      std::vector<size_t> start(bins);
      for (int q = 0; q < nq; q++) {
        const uint32_t* h = hist.data() + static_cast<size_t>(q) * bins;
        // Threshold: the smallest t with count(dist <= t) >= k; rows at t fill what is left.
        size_t total = 0;
        int t = 0;
        for (; t <= nbits_; t++) {
          if (total + h[t] >= k) break;
          total += h[t];
        }
        // Counting sort into the output: bucket starts per distance <= t.
        size_t s = 0;
        for (int b = 0; b <= std::min(t, nbits_); b++) {
          start[b] = s;
          s += (b < t) ? h[b] : (k - total);
        }
        const size_t take = std::min(k, s);
        const uint16_t* dq = dist.data() + static_cast<size_t>(q) * n_;
        int32_t* lq = labels.Data() + static_cast<size_t>(q) * k;
        int32_t* oq = dists.Data() + static_cast<size_t>(q) * k;
        size_t filled = 0;
        const uint16_t limit = static_cast<uint16_t>(std::min(t, nbits_));
        std::vector<size_t> end_of(bins);
        for (int b = 0; b <= limit; b++) end_of[b] = (b < limit) ? start[b + 1] : take;
        for (size_t r = 0; r < n_ && filled < take; r++) {
          const uint16_t dv = dq[r];
          if (dv > limit) continue;
          if (start[dv] >= end_of[dv]) continue;  // bucket full (ties beyond k)
          const size_t o = start[dv]++;
          lq[o] = static_cast<int32_t>(r);
          oq[o] = dv;
          filled++;
        }
      }
    }
    auto out = Napi::Object::New(env);
    out.Set("labels", labels);
    out.Set("distances", dists);
    return out;
  }

  Napi::Value Ntotal(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(n_)); }

  Napi::Value MemoryBytes(const Napi::CallbackInfo& info) {
    const double bytes = codes_.capacity() * 8.0 + dead_.capacity() + rot_.A.size() * 4.0 + mean_.size() * 4.0;
    return Napi::Number::New(info.Env(), bytes);
  }
};

// ---- VectorStore ------------------------------------------------------------------------------------
class VectorStore : public Napi::ObjectWrap<VectorStore> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "VectorStore",
                       {
                           InstanceMethod("append", &VectorStore::Append),
                           InstanceMethod("scores", &VectorStore::Scores),
                           InstanceMethod("read", &VectorStore::Read),
                           InstanceMethod("rows", &VectorStore::Rows),
                           InstanceMethod("baseRows", &VectorStore::BaseRows),
                           InstanceMethod("overlayBytes", &VectorStore::OverlayBytes),
                           InstanceMethod("close", &VectorStore::Close),
                           InstanceMethod("exactSearch", &VectorStore::ExactSearch),
                       });
  }

  // new VectorStore(d, basePath | null, baseRows)
  explicit VectorStore(const Napi::CallbackInfo& info) : Napi::ObjectWrap<VectorStore>(info) {
    Napi::Env env = info.Env();
    d_ = static_cast<int>(ArgInt(info, 0, "d"));
    if (info.Length() > 1 && info[1].IsString()) {
      const std::string path = info[1].As<Napi::String>().Utf8Value();
      base_rows_ = static_cast<size_t>(ArgInt(info, 2, "baseRows"));
      const size_t bytes = base_rows_ * d_ * sizeof(float);
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw Napi::Error::New(env, "cannot open " + path + ": " + std::strerror(errno));
      struct stat st;
      if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
        ::close(fd);
        throw Napi::Error::New(env, path + " is shorter than " + std::to_string(base_rows_) + " rows");
      }
      if (bytes > 0) {
        void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
          ::close(fd);
          throw Napi::Error::New(env, "mmap " + path + ": " + std::strerror(errno));
        }
        madvise(p, bytes, MADV_RANDOM);
        base_ = static_cast<const float*>(p);
        base_bytes_ = bytes;
      }
      ::close(fd);
    }
    dot_ = HasFastIsa() ? DotFast : DotGeneric;
  }

  ~VectorStore() override { Unmap(); }

 private:
  int d_ = 0;
  const float* base_ = nullptr;
  size_t base_bytes_ = 0, base_rows_ = 0;
  std::vector<float> overlay_;
  float (*dot_)(const float*, const float*, int) = DotGeneric;

  void Unmap() {
    if (base_) munmap(const_cast<float*>(base_), base_bytes_);
    base_ = nullptr;
    base_bytes_ = 0;
  }
  size_t RowsNow() const { return base_rows_ + overlay_.size() / d_; }
  const float* Row(size_t r) const { return r < base_rows_ ? base_ + r * d_ : overlay_.data() + (r - base_rows_) * d_; }

  // append(Float32Array m*d) -> first row position
  Napi::Value Append(const Napi::CallbackInfo& info) {
    auto x = ArgF32(info, 0, "vectors");
    if (x.ElementLength() % d_) throw Napi::RangeError::New(info.Env(), "vectors length is not a multiple of d");
    const size_t first = RowsNow();
    overlay_.insert(overlay_.end(), x.Data(), x.Data() + x.ElementLength());
    return Napi::Number::New(info.Env(), static_cast<double>(first));
  }

  // scores(Float32Array query d, Int32Array positions) -> Float32Array (inner products; NaN for -1)
  Napi::Value Scores(const Napi::CallbackInfo& info) {
    auto q = ArgF32(info, 0, "query");
    auto p = ArgI32(info, 1, "positions");
    if (static_cast<int>(q.ElementLength()) != d_) throw Napi::RangeError::New(info.Env(), "query has the wrong dimension");
    if (!base_ && base_rows_ > 0) throw Napi::Error::New(info.Env(), "the store is closed");
    const size_t n = RowsNow();
    auto out = Napi::Float32Array::New(info.Env(), p.ElementLength());
    for (size_t i = 0; i < p.ElementLength(); i++) {
      const int32_t r = p[i];
      if (r < 0) {
        out[i] = NAN;
        continue;
      }
      if (static_cast<size_t>(r) >= n) throw Napi::RangeError::New(info.Env(), "position out of range");
      out[i] = dot_(q.Data(), Row(r), d_);
    }
    return out;
  }

  // read(from, count) -> Float32Array copy of rows [from, from + count)
  Napi::Value Read(const Napi::CallbackInfo& info) {
    const int64_t from = ArgInt(info, 0, "from"), count = ArgInt(info, 1, "count");
    if (from < 0 || count < 0 || static_cast<size_t>(from + count) > RowsNow()) throw Napi::RangeError::New(info.Env(), "rows out of range");
    auto out = Napi::Float32Array::New(info.Env(), static_cast<size_t>(count) * d_);
    for (int64_t i = 0; i < count; i++) std::memcpy(out.Data() + i * d_, Row(from + i), sizeof(float) * d_);
    return out;
  }

  // exactSearch(Float32Array nq*d, k) -> { labels: Int32Array nq*k, scores: Float32Array }: the exact
  // top-k by inner product over every row (the benchmarks' reference; rows are read once per batch).
  Napi::Value ExactSearch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto x = ArgF32(info, 0, "queries");
    const int64_t k64 = ArgInt(info, 1, "k");
    if (x.ElementLength() % d_ || k64 < 1 || k64 > 10000) throw Napi::RangeError::New(env, "bad queries or k");
    const size_t nq = x.ElementLength() / d_, k = static_cast<size_t>(k64), n = RowsNow();
    std::vector<float> best(nq * k, -INFINITY);
    std::vector<int32_t> lab(nq * k, -1);
    constexpr size_t kBlock = 512;
    for (size_t b0 = 0; b0 < n; b0 += kBlock) {
      const size_t b1 = std::min(n, b0 + kBlock);
      for (size_t q = 0; q < nq; q++) {
        const float* qv = x.Data() + q * d_;
        float* bq = best.data() + q * k;
        int32_t* lq = lab.data() + q * k;
        for (size_t r = b0; r < b1; r++) {
          const float s = dot_(qv, Row(r), d_);
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

  Napi::Value Rows(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(RowsNow())); }
  Napi::Value BaseRows(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(base_rows_)); }
  Napi::Value OverlayBytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(overlay_.capacity() * sizeof(float)));
  }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    Unmap();
    base_rows_ = 0;
    overlay_.clear();
    overlay_.shrink_to_fit();
    return info.Env().Undefined();
  }
};

}  // namespace

// Called from faiss-node's Init (build-faiss.sh adds the call to the copied faiss.cc).
Napi::Object ProjectExtensionsInit(Napi::Env env, Napi::Object exports) {
  exports.Set("SketchIndex", SketchIndex::Define(env));
  exports.Set("VectorStore", VectorStore::Define(env));
  exports.Set("projectBindingVersion", Napi::Number::New(env, kProjectBindingVersion));
  exports.Set("fastIsa", Napi::Boolean::New(env, HasFastIsa()));
  return exports;
}
