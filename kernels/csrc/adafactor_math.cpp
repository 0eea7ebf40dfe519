// optbench's fused CPU Adafactor step: torch.optim.Adafactor's math (see kernels/adafactor.py).
//
// A tensor of two or more dimensions, B slices of n x m, is cut into fixed tiles (rows x columns, never
// across a slice). Three passes over g, each a phase of independent tiles:
//   1. per row and per (column, row block): sum of g^2;
//   -- the O(n + m) factor update: row_var, col_var lerped in double and rounded once into the state;
//      ra_i = 1/sqrt(row_var_i / max(mean(row_var), eps1)), rc_j = 1/sqrt(col_var_j);
//   2. per tile: sums of u^2 and of p^2, u = g * min(ra_i * rc_j, 1/eps1) = g / sqrt(max(v_ij, eps1^2));
//   -- alpha / max(1, RMS(u) / d);
//   3. p = p * (1 - lr * wd) - (alpha / denom) * u, rounded once into p.
// A param group's step is one parallel region (see `run`): threads take tiles as they come free. A
// column-major tensor (slices) is stepped in place through its transpose (see Factored); any other
// non-contiguous tensor through a contiguous copy, written back.
// Elementwise work is in opmath (float; double for float64). Sums are in double (float squares summed at
// most 8 to a vector lane in float first; float64 squares compensated), kept per row, tile or row block and
// reduced in a fixed order: a step's result does not depend on the number of threads. Vectors and
// 0-dim tensors (`variance`) take two passes in double. Built with -ffp-contract=off, so the arithmetic
// is the same whatever vector ISA the compiler targets.
//
// This file is the arithmetic, in plain C++ over raw memory (no Tensor, no Python): it compiles beside
// adafactor.cpp, the binding (tensors in, checks, copies). Both include only torch's stable-ABI and header-only
// headers: a cold build takes 3.7 s on the 2-core CI machine (10.3 s with ATen's and pybind11's headers).
#include "adafactor_math.h"

#include <torch/csrc/stable/c/shim.h>  // torch_parallel_for, torch_get_num_threads: torch's stable C ABI
#include <torch/headeronly/util/shim_utils.h>  // TORCH_SUCCESS
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>
#ifdef __AVX__
#include <immintrin.h>
#endif

namespace optbench_adafactor {
namespace {

typedef float vf __attribute__((vector_size(32)));
typedef double vd __attribute__((vector_size(32)));

template <typename A> struct Vec;
template <> struct Vec<float> { using type = vf; static constexpr int W = 8; };
template <> struct Vec<double> { using type = vd; static constexpr int W = 4; };

template <typename S> using opmath_t = std::conditional_t<std::is_same_v<S, double>, double, float>;

constexpr int64_t kTileElems = int64_t(1) << 16;  // elements per tile (at least kMinTileRows rows)
constexpr int64_t kMinTileRows = 64;               // bounds the per-row-block column partials to N / 8 bytes
constexpr int64_t kMaxTileCols = 8192;
constexpr int64_t kVectorTile = int64_t(1) << 14;  // elements per tile of an unfactored tensor
// Passes 1 and 2 prefetch this far ahead: hardware prefetchers stop at 4 KiB pages (measured: pass 1 a
// quarter faster, pass 2 a little).
constexpr int64_t kPrefetchBytes = 4096;

template <typename T>
inline void prefetch(const T* p) {
  __builtin_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, 0, 3);
}

// W elements of S as an opmath vector (exact widening or a plain load)
template <typename S, typename A>
inline typename Vec<A>::type vload(const S* p) {
  typename Vec<A>::type v;
  if constexpr (std::is_same_v<S, A>) {
    std::memcpy(&v, p, sizeof(v));
  } else {
    A tmp[Vec<A>::W];
    for (int k = 0; k < Vec<A>::W; ++k) tmp[k] = static_cast<A>(p[k]);
    std::memcpy(&v, tmp, sizeof(v));
  }
  return v;
}

template <typename S, typename A>
inline void vstore(S* p, typename Vec<A>::type v) {
  if constexpr (std::is_same_v<S, A>) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    A tmp[Vec<A>::W];
    std::memcpy(tmp, &v, sizeof(v));
    for (int k = 0; k < Vec<A>::W; ++k) p[k] = static_cast<S>(tmp[k]);  // round to nearest even
  }
}

inline vd dload(const double* p) { vd v; std::memcpy(&v, p, sizeof(v)); return v; }
inline void dstore(double* p, vd v) { std::memcpy(p, &v, sizeof(v)); }
inline double hsum(vd v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// Opmath vector -> doubles (exact).
inline void widen(vf x, vd* out) {
#ifdef __AVX__
  out[0] = (vd)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)x));
  out[1] = (vd)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)x, 1));
#else
  out[0] = vd{x[0], x[1], x[2], x[3]};
  out[1] = vd{x[4], x[5], x[6], x[7]};
#endif
}
inline void widen(vd x, vd* out) { out[0] = x; }

// Knuth's TwoSum: s + x with its rounding error added into c (s + c carries the exact running sum).
template <typename T>
inline void two_sum(T& s, T& c, T x) {
  const T t = s + x, z = t - s;
  c += (s - (t - z)) + (x - z);
  s = t;
}

// Compensated sum of the lanes of acc and accc (sums and their errors) and one more (s, c) pair.
inline double lanes_sum(const vd* acc, const vd* accc, double s, double c) {
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 4; ++l) two_sum(s, c, acc[k][l]), c += accc[k][l];
  return s + c;
}

// Double-opmath (float64) pass 1 over one row segment: returns the sum of g_j^2 and adds each square
// into col[j]; squares of doubles are rounded, so the sums are compensated (colc[j] is col[j]'s error).
inline double square_row(const double* g, int64_t len, double* col, double* colc) {
  vd acc[4] = {}, accc[4] = {};
  int64_t j = 0;
  for (; j + 16 <= len; j += 16) {
    prefetch(g + j);
    prefetch(g + j + 8);
    for (int k = 0; k < 4; ++k) {
      const vd x = dload(g + j + 4 * k), sq = x * x;
      vd cs = dload(col + j + 4 * k), cc = dload(colc + j + 4 * k);
      two_sum(acc[k], accc[k], sq);
      two_sum(cs, cc, sq);
      dstore(col + j + 4 * k, cs);
      dstore(colc + j + 4 * k, cc);
    }
  }
  double tail = 0.0, tailc = 0.0;
  for (; j < len; ++j) {
    two_sum(tail, tailc, g[j] * g[j]);
    two_sum(col[j], colc[j], g[j] * g[j]);
  }
  return lanes_sum(acc, accc, tail, tailc);
}

// Float-opmath pass 1 over one row segment: returns the sum of g_j^2 and adds each square into col[j].
// Squares are formed in float (exact for bfloat16 and float16) and go into double at once (columns) or
// after summing kFlush / 8 of them per lane in float (the row).
constexpr int64_t kFlush = 64;
template <typename S>
inline double square_row(const S* g, int64_t len, double* col) {
  vd racc = {};
  const int64_t vend = len - len % 8;
  int64_t j = 0;
  while (j < vend) {
    const int64_t bend = std::min(vend, j + kFlush);
    vf fr = {};
    for (; j < bend; j += 8) {
      if (j % 16 == 0) prefetch(g + j);  // (bfloat16 and float16: every 32 bytes)
      const vf x = vload<S, float>(g + j), sq = x * x;
      fr += sq;
      vd c[2];
      widen(sq, c);
      dstore(col + j, dload(col + j) + c[0]);
      dstore(col + j + 4, dload(col + j + 4) + c[1]);
    }
    vd w[2];
    widen(fr, w);
    racc += w[0] + w[1];
  }
  double tail = 0.0;
  for (; j < len; ++j) {
    const float x = static_cast<float>(g[j]), sq = x * x;
    tail += sq;
    col[j] += sq;
  }
  return hsum(racc) + tail;
}

// Pass 2 over one row segment: usum += sum of u_j^2, psum += sum of p_j^2, where
// u_j = g_j * min(ra * rc_j, ie) in opmath. Float: squares summed in float over 8 per lane, then double.
template <typename S, typename A>
inline void square_u_p(const S* g, const S* p, A ra, const A* rc, int64_t len, A ie, double& usum, double& psum) {
  using V = typename Vec<A>::type;
  constexpr int W = Vec<A>::W, H = W / 4;
  const V iev = V{} + ie;
  vd ua = {}, pa = {};
  const int64_t vend = len - len % (2 * W);
  int64_t j = 0;
  while (j < vend) {
    const int64_t bend = std::min(vend, j + 16 * W);
    V u0{}, u1{}, p0{}, p1{};
    for (; j < bend; j += 2 * W) {
      prefetch(g + j);
      prefetch(p + j);
      V s0 = ra * vload<A, A>(rc + j), s1 = ra * vload<A, A>(rc + j + W);
      s0 = (iev < s0) ? iev : s0;
      s1 = (iev < s1) ? iev : s1;
      const V x0 = vload<S, A>(g + j) * s0, x1 = vload<S, A>(g + j + W) * s1;
      const V q0 = vload<S, A>(p + j), q1 = vload<S, A>(p + j + W);
      u0 += x0 * x0;
      u1 += x1 * x1;
      p0 += q0 * q0;
      p1 += q1 * q1;
    }
    vd w[H];
    widen(u0 + u1, w);
    for (int h = 0; h < H; ++h) ua += w[h];
    widen(p0 + p1, w);
    for (int h = 0; h < H; ++h) pa += w[h];
  }
  double ut = 0.0, pt = 0.0;
  for (; j < len; ++j) {
    A s = ra * rc[j];
    s = (ie < s) ? ie : s;
    const A u = static_cast<A>(g[j]) * s, q = static_cast<A>(p[j]);
    ut += static_cast<double>(u * u);
    pt += static_cast<double>(q * q);
  }
  usum += hsum(ua) + ut;
  psum += hsum(pa) + pt;
}

// p = p * decay - coef * u over a row segment, in opmath, rounded once.
template <typename S, typename A>
inline void update_row(const S* g, S* p, A ra, const A* rc, int64_t len, A ie, A decay, A coef) {
  using V = typename Vec<A>::type;
  constexpr int W = Vec<A>::W;
  const V iev = V{} + ie;
  int64_t j = 0;
  for (; j + W <= len; j += W) {
    V s = ra * vload<A, A>(rc + j);
    s = (iev < s) ? iev : s;
    V u = vload<S, A>(g + j) * s;
    vstore<S, A>(p + j, vload<S, A>(p + j) * decay - coef * u);
  }
  for (; j < len; ++j) {
    A s = ra * rc[j];
    s = (ie < s) ? ie : s;
    A u = static_cast<A>(g[j]) * s;
    p[j] = static_cast<S>(static_cast<A>(p[j]) * decay - coef * u);
  }
}

// Python's max(a, b) (b only if b > a: a NaN b gives a) and clamp(x, min=lo) (NaN stays NaN).
inline double py_max(double a, double b) { return b > a ? b : a; }
inline double clamp_min(double x, double lo) { return x < lo ? lo : x; }

// alpha / max(1, RMS(u) / d), negated for maximize (u of -g), and the weight decay factor.
double step_scale(double psum, double usum, int64_t numel, const Scalars& sc, double& decay) {
  const double alpha = py_max(sc.eps2, std::sqrt(psum / numel)) * sc.rho;
  const double denom = py_max(1.0, std::sqrt(usum / numel) / sc.d);
  decay = 1.0 - sc.lr * sc.wd;
  return sc.maximize ? -(alpha / denom) : alpha / denom;
}

// Pass 1's partial sums, shared by the tensors of a step: only one tensor is ever in pass 1 or its
// factor update at a time (see run).
struct Pass1Scratch {
  std::vector<double> rowpart, colpart, colcomp, rowsum, colsum, rv;
};

// A tensor's step: phases of independent tiles; between two phases, a serial stage.
struct Job {
  virtual ~Job() = default;
  virtual int phases() const = 0;
  virtual int64_t tiles() const = 0;
  virtual void tile(int phase, int64_t t) = 0;
  virtual void between(int phase) = 0;
};

struct Tile {
  int64_t b, rb, cb, r0, r1, c0, c1;  // slice, row block (rows r0..r1), column block (columns c0..c1)
};

struct Tiling {
  int64_t B, n, m, br, bc, nrb, ncb, T;
  Tiling(int64_t B_, int64_t n_, int64_t m_) : B(B_), n(n_), m(m_) {
    bc = m <= kMaxTileCols ? m : kMaxTileCols / 2;
    ncb = (m + bc - 1) / bc;
    br = std::min(n, std::max(kMinTileRows, kTileElems / bc));
    nrb = (n + br - 1) / br;
    T = B * nrb * ncb;
  }
  Tile operator[](int64_t t) const {
    const int64_t rb = (t / ncb) % nrb, cb = t % ncb;
    return {t / (nrb * ncb), rb, cb, rb * br, std::min(n, (rb + 1) * br), cb * bc, std::min(m, (cb + 1) * bc)};
  }
};

// A tensor of two or more dimensions: pass 1, factors, pass 2, scale, pass 3. Its memory holds B slices of
// n x m, row-major, or (`transposed`, as a column-major weight's does) of m x n: tiles run over the rows
// and columns of the memory, the factors are the parameter's; ra_i * rc_j is the same product either way.
template <typename S>
struct Factored final : Job {
  using A = opmath_t<S>;
  S* p;
  const S* g;
  S *row_var, *col_var;
  const int64_t n, m;
  const bool transposed;
  const Tiling tl;  // over the memory: tl.n rows of tl.m
  const Scalars sc;
  Pass1Scratch& s;
  std::vector<A> ra, rc;  // by parameter row (B * n) and column (B * m)
  const A *frow, *fcol;   // the same by memory row and column
  std::vector<double> tile_u, tile_p;
  const A ie;
  A decay = 1, coef = 0;

  Factored(S* p_, const S* g_, S* rv, S* cv, int64_t B, int64_t n_, int64_t m_, bool tr, const Scalars& sc_,
           Pass1Scratch& s_)
      : p(p_), g(g_), row_var(rv), col_var(cv), n(n_), m(m_), transposed(tr), tl(B, tr ? m_ : n_, tr ? n_ : m_),
        sc(sc_), s(s_), ra(B * n_), rc(B * m_), frow(tr ? rc.data() : ra.data()), fcol(tr ? ra.data() : rc.data()),
        tile_u(tl.T), tile_p(tl.T), ie(static_cast<A>(1.0 / sc_.eps1)) {}
  static void reserve(Pass1Scratch& s, int64_t B, int64_t rows, int64_t cols) {
    const Tiling tl(B, rows, cols);
    auto grow = [](std::vector<double>& v, int64_t size) { v.resize(std::max<int64_t>(v.size(), size)); };
    grow(s.rowpart, tl.ncb * B * rows);
    grow(s.colpart, B * tl.nrb * cols);
    grow(s.colcomp, std::is_same_v<S, double> ? B * tl.nrb * cols : 0);
    grow(s.rowsum, B * rows);
    grow(s.colsum, B * cols);
    grow(s.rv, B * std::max(rows, cols));
  }
  int phases() const override { return 3; }
  int64_t tiles() const override { return tl.T; }

  void tile(int phase, int64_t t) override {
    const int64_t rows = tl.n, cols = tl.m;
    const Tile k = tl[t];
    const int64_t len = k.c1 - k.c0, first = k.b * rows * cols + k.c0;  // the tile's memory row 0, column c0
    if (phase == 0) {  // pass 1: row and column sums of g^2
      const int64_t at = (k.b * tl.nrb + k.rb) * cols + k.c0;
      double *col = s.colpart.data() + at, *row = s.rowpart.data() + k.cb * tl.B * rows + k.b * rows;
      std::fill(col, col + len, 0.0);
      if constexpr (std::is_same_v<S, double>) {
        double* colc = s.colcomp.data() + at;
        std::fill(colc, colc + len, 0.0);
        for (int64_t i = k.r0; i < k.r1; ++i) row[i] = square_row(g + first + i * cols, len, col, colc);
      } else {
        for (int64_t i = k.r0; i < k.r1; ++i) row[i] = square_row(g + first + i * cols, len, col);
      }
    } else if (phase == 1) {  // pass 2: sums of u^2 and p^2
      double usum = 0.0, psum = 0.0;
      for (int64_t i = k.r0; i < k.r1; ++i)
        square_u_p<S, A>(g + first + i * cols, p + first + i * cols, frow[k.b * rows + i], fcol + k.b * cols + k.c0,
                         len, ie, usum, psum);
      tile_u[t] = usum;
      tile_p[t] = psum;
    } else {  // pass 3: the update
      for (int64_t i = k.r0; i < k.r1; ++i)
        update_row<S, A>(g + first + i * cols, p + first + i * cols, frow[k.b * rows + i], fcol + k.b * cols + k.c0,
                         len, ie, decay, coef);
    }
  }

  void between(int phase) override {
    const int64_t B = tl.B, rows = tl.n, cols = tl.m;
    if (phase == 1) {  // alpha / denom
      double usum = 0.0, psum = 0.0, d;
      for (int64_t t = 0; t < tl.T; ++t) usum += tile_u[t], psum += tile_p[t];
      const double c = step_scale(psum, usum, B * rows * cols, sc, d);
      decay = static_cast<A>(d);
      coef = static_cast<A>(c);
      return;
    }
    // Sums of g^2 by memory row (over column blocks) and by memory column (over row blocks, in order).
    for (int64_t r = 0; r < B * rows; ++r) {
      double sum = 0.0;
      for (int64_t cb = 0; cb < tl.ncb; ++cb) sum += s.rowpart[cb * B * rows + r];
      s.rowsum[r] = sum;
    }
    for (int64_t b = 0; b < B; ++b) {
      double* sum = s.colpart.data() + b * tl.nrb * cols;  // row block 0's partials take in the others'
      for (int64_t rb = 1; rb < tl.nrb; ++rb) {
        if constexpr (std::is_same_v<S, double>) {
          double* err = s.colcomp.data() + b * tl.nrb * cols;
          for (int64_t j = 0; j < cols; ++j) two_sum(sum[j], err[j], sum[rb * cols + j]), err[j] += err[rb * cols + j];
        } else {
          for (int64_t j = 0; j < cols; ++j) sum[j] += sum[rb * cols + j];
        }
      }
      for (int64_t j = 0; j < cols; ++j) {
        s.colsum[b * cols + j] = sum[j];
        if constexpr (std::is_same_v<S, double>) s.colsum[b * cols + j] += s.colcomp[b * tl.nrb * cols + j];
      }
    }
    // row_var, col_var (rounded once into the state); ra and rc from the unrounded values.
    const double *row_sum = transposed ? s.colsum.data() : s.rowsum.data();
    const double *col_sum = transposed ? s.rowsum.data() : s.colsum.data();
    for (int64_t b = 0; b < B; ++b) {
      double total = 0.0, err = 0.0;
      for (int64_t i = b * n; i < (b + 1) * n; ++i) {
        const double old = static_cast<double>(row_var[i]), v = old + (row_sum[i] / m - old) * sc.w;
        row_var[i] = static_cast<S>(v);
        s.rv[i] = v;
        two_sum(total, err, v);
      }
      const double den = clamp_min((total + err) / n, sc.eps1);
      for (int64_t i = b * n; i < (b + 1) * n; ++i) ra[i] = static_cast<A>(1.0 / std::sqrt(s.rv[i] / den));
      for (int64_t j = b * m; j < (b + 1) * m; ++j) {
        const double old = static_cast<double>(col_var[j]), v = old + (col_sum[j] / n - old) * sc.w;
        col_var[j] = static_cast<S>(v);
        rc[j] = static_cast<A>(1.0 / std::sqrt(v));
      }
    }
  }
};

// A vector or 0-dim tensor: variance lerped and u formed in double, per element; pass A sums u^2 and
// p^2, pass B writes variance and p.
template <typename S>
struct Unfactored final : Job {
  S* p;
  const S* g;
  S* var;
  const int64_t N, T;
  const Scalars sc;
  std::vector<double> tile_u, tile_p;
  double decay = 1, coef = 0;

  Unfactored(S* p_, const S* g_, S* v, int64_t N_, const Scalars& sc_)
      : p(p_), g(g_), var(v), N(N_), T((N_ + kVectorTile - 1) / kVectorTile), sc(sc_), tile_u(T), tile_p(T) {}
  int phases() const override { return 2; }
  int64_t tiles() const override { return T; }

  double u_of(int64_t k, double& v) const {  // the new variance v and u of element k
    const double gv = static_cast<double>(g[k]), old = static_cast<double>(var[k]);
    v = old + (gv * gv - old) * sc.w;
    return gv / std::sqrt(clamp_min(v, sc.eps1 * sc.eps1));
  }
  void tile(int phase, int64_t t) override {
    const int64_t end = std::min(N, (t + 1) * kVectorTile);
    double usum = 0.0, psum = 0.0, v;
    for (int64_t k = t * kVectorTile; k < end; ++k) {
      const double u = u_of(k, v), pv = static_cast<double>(p[k]);
      if (phase == 0) {
        usum += u * u;
        psum += pv * pv;
      } else {
        var[k] = static_cast<S>(v);
        p[k] = static_cast<S>(pv * decay - coef * u);
      }
    }
    if (phase == 0) tile_u[t] = usum, tile_p[t] = psum;
  }
  void between(int) override {
    double usum = 0.0, psum = 0.0;
    for (int64_t t = 0; t < T; ++t) usum += tile_u[t], psum += tile_p[t];
    coef = step_scale(psum, usum, N, sc, decay);
  }
};

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// All jobs' phases in order, in one parallel region (torch's parallel_for: torch.get_num_threads() threads;
// one region per param group, not three per tensor). Each thread takes the next tile of the current phase
// while there is one; the thread that finishes a phase's last tile runs the serial stage and opens the
// next phase, for which the others wait. So no thread waits for one that holds no tile (a thread the OS
// has parked costs nothing unless it is in the middle of a tile), and where a tile ran does not change
// its result. A thread reaches pass 1 of a tensor only past the factor update of the one before, so
// Pass1Scratch serves one tensor at a time.
struct Phase {
  Job* job = nullptr;
  int index = 0;
  int64_t T = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> open{false};
};

// The tile for a phase's t-th take: the tiles are cut into `ways` runs, and successive takes go round the
// runs, so threads that take in turn each walk their own run of memory (which prefetching likes). A bijection.
inline int64_t spread(int64_t t, int64_t T, int64_t ways) {
  const int64_t run = t % ways, q = T / ways, rem = T % ways;
  return run * q + std::min(run, rem) + t / ways;
}

void run(std::vector<std::unique_ptr<Job>>& jobs) {
  size_t count = 0;
  for (auto& job : jobs) count += job->phases();
  std::unique_ptr<Phase[]> phases(new Phase[count]);
  size_t k = 0;
  for (auto& job : jobs) {
    for (int i = 0; i < job->phases(); ++i, ++k) {
      phases[k].job = job.get();
      phases[k].index = i;
      phases[k].T = job->tiles();
      phases[k].open.store(i == 0, std::memory_order_relaxed);
    }
  }
  uint32_t torch_threads = 1;
  if (torch_get_num_threads(&torch_threads) != TORCH_SUCCESS) torch_threads = 1;
  const int64_t threads = torch_threads, ways = std::max<int64_t>(threads, 1);
  auto worker = [&] {
    for (size_t q = 0; q < count; ++q) {
      Phase& ph = phases[q];
      for (int spins = 0; !ph.open.load(std::memory_order_acquire); ++spins) {
        if (spins < 256) relax();
        else std::this_thread::yield();
      }
      for (int64_t t = ph.next.fetch_add(1, std::memory_order_relaxed); t < ph.T;
           t = ph.next.fetch_add(1, std::memory_order_relaxed)) {
        ph.job->tile(ph.index, spread(t, ph.T, ways));
        if (ph.done.fetch_add(1, std::memory_order_acq_rel) + 1 == ph.T && ph.index + 1 < ph.job->phases()) {
          ph.job->between(ph.index);
          phases[q + 1].open.store(true, std::memory_order_release);
        }
      }
    }
  };
  // (inside another parallel region torch runs the loop inline: one worker takes every tile)
  if (threads <= 1) {
    worker();
    return;
  }
  const auto body = [](int64_t, int64_t, void* ctx) { (*static_cast<decltype(worker)*>(ctx))(); };
  if (torch_parallel_for(0, threads, 1, body, &worker) != TORCH_SUCCESS)
    throw std::runtime_error("optbench Adafactor: torch's parallel_for failed");
}

thread_local Pass1Scratch scratch;

template <typename S>
std::unique_ptr<Job> job_of(const TensorStep& t) {
  if (t.factored) {
    Factored<S>::reserve(scratch, t.B, t.transposed ? t.m : t.n, t.transposed ? t.n : t.m);
    return std::make_unique<Factored<S>>(static_cast<S*>(t.p), static_cast<const S*>(t.g), static_cast<S*>(t.row_var),
                                         static_cast<S*>(t.col_var), t.B, t.n, t.m, t.transposed, t.sc, scratch);
  }
  return std::make_unique<Unfactored<S>>(static_cast<S*>(t.p), static_cast<const S*>(t.g),
                                         static_cast<S*>(t.variance), t.numel, t.sc);
}

}  // namespace

double dtype_eps(Dtype t) {
  switch (t) {
    case Dtype::Double: return std::numeric_limits<double>::epsilon();
    case Dtype::Float: return std::numeric_limits<float>::epsilon();
    case Dtype::BFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::epsilon());
    case Dtype::Half: return static_cast<double>(std::numeric_limits<c10::Half>::epsilon());
  }
  return 0.0;
}

void run_steps(const std::vector<TensorStep>& steps) {
  std::vector<std::unique_ptr<Job>> jobs;
  for (const TensorStep& t : steps) {
    switch (t.dtype) {
      case Dtype::Double: jobs.push_back(job_of<double>(t)); break;
      case Dtype::Float: jobs.push_back(job_of<float>(t)); break;
      case Dtype::BFloat16: jobs.push_back(job_of<c10::BFloat16>(t)); break;
      case Dtype::Half: jobs.push_back(job_of<c10::Half>(t)); break;
    }
  }
  run(jobs);
}

}  // namespace optbench_adafactor
