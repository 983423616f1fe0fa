// emu_check.cpp: runs every kernel of radgen.cu under emu_simt.h against a
// double-precision reference (the same cases as internal/cuda's GPU tests).
// Build and run: g++ -std=c++20 -O1 -pthread emu_check.cpp -o emu && ./emu
#include "emu_simt.h"
#include "radgen.cu"
#include <random>
static std::mt19937 rng(1);
static std::vector<float> rnd(size_t n, double s) { std::uniform_real_distribution<double> d(-s, s); std::vector<float> v(n); for (auto& x : v) x = d(rng); return v; }
static int fails = 0;
static void check(const char* name, const std::vector<float>& g, const std::vector<double>& w, double rel = 1e-5, double abs = 1e-6) {
  double worst = 0; for (size_t i = 0; i < g.size(); i++) { double d = std::fabs(g[i] - w[i]); if (!(d <= rel * std::fabs(w[i]) + abs)) { printf("FAIL %s[%zu] got %g want %g\n", name, i, g[i], w[i]); fails++; return; } worst = std::max(worst, d / (std::fabs(w[i]) + 0.1)); }
  printf("ok   %-28s n=%zu worst=%.2g\n", name, g.size(), worst);
}
static dim3 rb(int cols) { unsigned b = cols <= 32 ? 32 : cols <= 64 ? 64 : cols <= 128 ? 128 : cols <= 2048 ? 256 : 512; return {b,1,1}; }

// ---- training primitives and the optimiser ---------------------------------
static rg_dims dims(std::vector<int> d, std::vector<int> s1, std::vector<int> s2 = {}, int aux = 0) {
  rg_dims r{}; r.rank = (int)d.size() - aux; r.aux = aux;
  for (size_t i = 0; i < d.size(); i++) { r.dim[i] = d[i]; r.s1[i] = s1[i]; r.s2[i] = i < s2.size() ? s2[i] : 0; }
  return r;
}
// same: bitwise equality with a float reference that rounds as the host does.
static void same(const char* name, const std::vector<float>& g, const std::vector<float>& w) {
  for (size_t i = 0; i < g.size(); i++) if (std::memcmp(&g[i], &w[i], 4) != 0) { printf("FAIL %s[%zu] got %a want %a\n", name, i, g[i], w[i]); fails++; return; }
  printf("ok   %-28s n=%zu bitwise\n", name, g.size());
}
static std::vector<double> d64(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
// odometer: calls f(o, ia, ib) for every element of shape in row-major order.
template <class F> static void each(std::vector<int> shape, std::vector<int> sa, std::vector<int> sb, F f) {
  long long n = 1; for (int s : shape) n *= s; std::vector<int> idx(shape.size());
  for (long long o = 0; o < n; o++) { long long ia = 0, ib = 0; for (size_t d = 0; d < shape.size(); d++) { ia += (long long)idx[d]*sa[d]; ib += (long long)idx[d]*sb[d]; } f(o, ia, ib);
    for (int d = (int)shape.size()-1; d >= 0; d--) { if (++idx[d] < shape[d]) break; idx[d] = 0; } }
}
static unsigned pow2block(int cols) { return rb(cols).x; }
static rg_conv conv(int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
  auto out = [](int n, int k, int s, int p, int d) { int span = d*(k-1)+1; return n+2*p < span ? 0 : (n+2*p-span)/s+1; };
  return {H, W, KH, KW, SH, SW, PH, PW, DH, DW, out(H, KH, SH, PH, DH), out(W, KW, SW, PW, DW)};
}
static void training() {
  { // fill, axpy (in place on itself too), clamp
    int n = 1003; auto x = rnd(n, 5), y = rnd(n, 5); std::vector<float> d = y;
    launch({2}, {256}, [&] { rg_axpy_f32(d.data(), x.data(), -0.75f, n); });
    std::vector<double> w(n); for (int i = 0; i < n; i++) w[i] = (double)y[i] - 0.75*x[i]; check("axpy", d, w);
    launch({3}, {256}, [&] { rg_fill_f32(d.data(), 2.5f, n); }); check("fill", d, std::vector<double>(n, 2.5));
    auto c = rnd(n, 3); c[0] = NAN; c[1] = -0.f; c[2] = 1.5f; c[3] = -1.5f; std::vector<float> cw(n);
    for (int i = 0; i < n; i++) cw[i] = std::isnan(c[i]) ? c[i] : std::min(std::max(c[i], -1.5f), 1.5f);
    launch({2}, {256}, [&] { rg_clamp_f32(c.data(), 1.5f, n); });
    if (!std::isnan(c[0]) || !std::signbit(c[1])) { printf("FAIL clamp: NaN or -0 lost\n"); fails++; }
    c[0] = cw[0] = 0; same("clamp", c, cw);
  }
  { // binary: (3, 4, 5) against a (4, 1) operand and a transposed view; rank 0
    std::vector<int> shape = {3, 4, 5}, sa = {20, 5, 1}, sb = {0, 1, 0}, st = {1, 15, 3};
    auto a = rnd(60, 4), b = rnd(4, 4), t = rnd(60, 4); b[2] = 0; std::vector<float> d(60);
    const char* nm[] = {"binary/add", "binary/sub", "binary/mul", "binary/maskfill"};
    for (int op = 0; op < 4; op++) {
      launch({1}, {32}, [&] { rg_binary_f32(d.data(), a.data(), b.data(), 60, op, -7.f, dims(shape, sa, sb)); });
      std::vector<double> w(60); each(shape, sa, sb, [&](long long o, long long ia, long long ib) { double x = a[ia], y = b[ib];
        w[o] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : (b[ib] != 0 ? x : -7.0); });
      check(nm[op], d, w);
    }
    launch({2}, {32}, [&] { rg_binary_f32(d.data(), a.data(), t.data(), 60, 1, 0.f, dims(shape, sa, st)); });
    std::vector<double> w(60); each(shape, sa, st, [&](long long o, long long ia, long long ib) { w[o] = (double)a[ia] - t[ib]; }); check("binary/strided", d, w);
    std::vector<float> d0(1); launch({1}, {32}, [&] { rg_binary_f32(d0.data(), a.data(), b.data(), 1, 2, 0.f, dims({}, {})); });
    check("binary/rank0", d0, {(double)a[0] * b[0]});
  }
  { // permute (2, 3, 4, 5) by (2, 0, 3, 1)
    std::vector<int> shape = {2, 3, 4, 5}, perm = {2, 0, 3, 1}, cs = {60, 20, 5, 1}, os, ss;
    for (int p : perm) { os.push_back(shape[p]); ss.push_back(cs[p]); }
    auto x = rnd(120, 1); std::vector<float> y(120);
    launch({1}, {64}, [&] { rg_gather_strided_f32(y.data(), x.data(), 120, dims(os, ss)); });
    std::vector<double> w(120); each(os, ss, ss, [&](long long o, long long is, long long) { w[o] = x[is]; }); check("permute", y, w, 0, 0);
  }
  { // reduce-sum: serial and block kernels, over leading / inner / several dims, a transposed
    // destination, accumulate
    struct C { std::vector<int> shape, dst; const char* name; };
    for (auto c : {C{{3, 4, 5}, {0, 1, 0}, "sum(0,2)"}, C{{6, 700}, {1, 0}, "sum(1)"}, C{{900, 7}, {0, 1}, "sum(0)"},
                   C{{3, 4}, {1, 3}, "transpose"}, C{{2, 3, 50, 7}, {0, 0, 0, 0}, "all"}, C{{2, 3, 4}, {12, 4, 1}, "none"}}) {
      long long n = 1; for (int s : c.shape) n *= s; int nd = c.shape.size();
      std::vector<int> cs(nd); { int s = 1; for (int i = nd-1; i >= 0; i--) { cs[i] = s; s *= c.shape[i]; } }
      std::vector<int> kd, ks, kt, rd, rs; for (int i = 0; i < nd; i++) { if (c.dst[i]) { kd.push_back(c.shape[i]); ks.push_back(cs[i]); kt.push_back(c.dst[i]); } else { rd.push_back(c.shape[i]); rs.push_back(cs[i]); } }
      long long K = 1, R = 1; for (int v : kd) K *= v; for (int v : rd) R *= v;
      std::vector<int> ad = kd, as = ks, at = kt; ad.insert(ad.end(), rd.begin(), rd.end()); as.insert(as.end(), rs.begin(), rs.end()); at.resize(ad.size());
      rg_dims s = dims(ad, as, at, (int)rd.size());
      auto x = rnd(n, 2); long long m = 0; for (int i = 0; i < nd; i++) m += (long long)(c.shape[i]-1)*c.dst[i]; m++;
      std::vector<double> w(m, 0.0); each(c.shape, c.dst, c.dst, [&](long long o, long long id, long long) { w[id] += x[o]; });
      for (int acc = 0; acc < 2; acc++) for (int blk = 0; blk < 2; blk++) {
        auto d0 = rnd(m, 1); std::vector<float> d = d0; std::vector<double> ww = w; if (acc) for (long long i = 0; i < m; i++) ww[i] += d0[i];
        if (blk) launch({2}, {64}, [&] { rg_reduce_block_f32(d.data(), x.data(), K, R, acc, s); });
        else launch({1}, {32}, [&] { rg_reduce_serial_f32(d.data(), x.data(), K, R, acc, s); });
        char nm[80]; snprintf(nm, 80, "reduce/%s/%s%s", c.name, blk ? "block" : "serial", acc ? "/acc" : ""); check(nm, d, ww);
      }
    }
  }
  { // activation backward
    int n = 999; auto y = rnd(n, 1), g = rnd(n, 3), x0 = rnd(n, 1); const char* nm[] = {"actback/relu", "actback/tanh", "actback/sigmoid"};
    for (int act = 0; act < 3; act++) { auto x = x0; launch({2}, {256}, [&] { rg_act_backward_f32(x.data(), g.data(), y.data(), n, act); });
      std::vector<double> w(n); for (int i = 0; i < n; i++) { double v = y[i], d = g[i]; w[i] = x0[i] + (act == 0 ? (v > 0 ? d : 0) : act == 1 ? d*(1-v*v) : d*v*(1-v)); }
      check(nm[act], x, w); }
  }
  { // softmax / log-softmax backward
    for (int cols : {1, 33, 761, 3000}) for (int lg = 0; lg < 2; lg++) {
      int R = 3; auto z = rnd(R*cols, 3); std::vector<float> y(R*cols);
      for (int r = 0; r < R; r++) { double mx = -INFINITY, s = 0; for (int j = 0; j < cols; j++) mx = std::max(mx, (double)z[r*cols+j]); for (int j = 0; j < cols; j++) s += std::exp(z[r*cols+j]-mx);
        for (int j = 0; j < cols; j++) { double p = std::exp(z[r*cols+j]-mx)/s; y[r*cols+j] = lg ? std::log(p) : p; } }
      auto g = rnd(R*cols, 2), x0 = rnd(R*cols, 1), x = x0;
      launch({2}, rb(cols), [&] { rg_softmax_backward_f32(x.data(), g.data(), y.data(), R, cols, lg); });
      std::vector<double> w(R*cols); for (int r = 0; r < R; r++) { double s = 0; for (int j = 0; j < cols; j++) s += lg ? (double)g[r*cols+j] : (double)g[r*cols+j]*y[r*cols+j];
        for (int j = 0; j < cols; j++) { int i = r*cols+j; w[i] = x0[i] + (lg ? g[i] - std::exp((double)y[i])*s : y[i]*(g[i] - s)); } }
      char nm[64]; snprintf(nm, 64, "%ssoftmaxback/cols=%d", lg ? "log" : "", cols); check(nm, x, w, 1e-5, 1e-5);
    }
  }
  { // normalize and its backward, both kinds
    for (int cols : {1, 37, 512, 2500}) for (int r2 = 0; r2 < 2; r2++) {
      int R = 4; auto x = rnd(R*cols, 3); for (auto& e : x) e += 2.f; double eps = r2 ? 1e-6 : 1e-5;
      std::vector<float> y(R*cols), inv(R); launch({3}, rb(cols), [&] { rg_normalize_f32(y.data(), inv.data(), x.data(), R, cols, eps, r2); });
      std::vector<double> wy(R*cols), wi(R);
      for (int r = 0; r < R; r++) { double m = 0, ss = 0; for (int j = 0; j < cols; j++) m += x[r*cols+j]; m /= cols; for (int j = 0; j < cols; j++) ss += (x[r*cols+j]-m)*(x[r*cols+j]-m);
        double is = r2 ? 1/((cols > 1 ? std::sqrt(ss/(cols-1)) : NAN) + eps) : 1/std::sqrt(ss/cols+eps); wi[r] = is; for (int j = 0; j < cols; j++) wy[r*cols+j] = (x[r*cols+j]-m)*is; }
      char nm[64];
      if (r2 && cols == 1) { bool nan = std::isnan(inv[0]) && std::isnan(y[0]); printf("%s normalize/r2gen/cols=1 is NaN (torch.std of one element)\n", nan ? "ok  " : "FAIL"); fails += !nan; continue; }
      snprintf(nm, 64, "normalize/%s/cols=%d", r2 ? "r2gen" : "std", cols); check(nm, y, wy); snprintf(nm, 64, "normalize/%s/inv/cols=%d", r2 ? "r2gen" : "std", cols); check(nm, inv, wi);
      auto g = rnd(R*cols, 2), dx0 = rnd(R*cols, 1), dx = dx0;
      launch({3}, rb(cols), [&] { rg_normalize_backward_f32(dx.data(), g.data(), y.data(), inv.data(), R, cols, eps, r2); });
      // Reference: the gradient of x̂ = (x − μ)/σ from first principles, in float64 on x.
      std::vector<double> w(R*cols);
      for (int r = 0; r < R; r++) { double m = 0, ss = 0; for (int j = 0; j < cols; j++) m += x[r*cols+j]; m /= cols; for (int j = 0; j < cols; j++) ss += (x[r*cols+j]-m)*(x[r*cols+j]-m);
        double sd = r2 ? std::sqrt(ss/(cols-1)) : std::sqrt(ss/cols+eps), sig = r2 ? sd + eps : sd;
        double sg = 0, sgx = 0; for (int j = 0; j < cols; j++) { sg += g[r*cols+j]; sgx += g[r*cols+j]*(x[r*cols+j]-m); }
        // dσ/dx_j = (x_j − μ)/(k·sd), k = n−1 (r2gen) or n (std); dx_j = g_j/σ − Σg/(nσ) − Σ g(x−μ)/σ² · dσ/dx_j
        double k = r2 ? cols-1 : cols;
        for (int j = 0; j < cols; j++) { double xm = x[r*cols+j]-m; w[r*cols+j] = dx0[r*cols+j] + g[r*cols+j]/sig - sg/(cols*sig) - sgx/(sig*sig)*xm/(k*sd); } }
      snprintf(nm, 64, "normback/%s/cols=%d", r2 ? "r2gen" : "std", cols); check(nm, dx, w, 1e-4, 1e-5);
    }
  }
  { // copy rows: strided, a repeated row, accumulate
    int rows = 7, cols = 13, ldd = 20, lds = 16; auto s = rnd(rows*lds, 1), d0 = rnd(rows*ldd, 1);
    for (int acc = 0; acc < 2; acc++) for (int rep = 0; rep < 2; rep++) { auto d = d0; int l = rep ? 0 : lds;
      launch({1}, {32}, [&] { rg_copy_rows_f32(d.data(), ldd, s.data(), l, rows, cols, acc); });
      auto w = d64(d0); for (int r = 0; r < rows; r++) for (int c = 0; c < cols; c++) w[r*ldd+c] = (acc ? w[r*ldd+c] : 0.0) + s[r*l+c];
      char nm[64]; snprintf(nm, 64, "copyrows/%s%s", rep ? "repeat" : "strided", acc ? "/acc" : ""); check(nm, d, w); }
  }
  { // scatter-add with repeated and out-of-range ids: the host's order, bitwise
    int V = 11, dim = 40; std::vector<int> ids = {3, 0, 10, 3, -1, 11, 3, 7, 0, 5}; int n = ids.size(); auto s = rnd(n*dim, 1), d0 = rnd(V*dim, 1), d = d0;
    launch({2, 3}, {32}, [&] { rg_scatter_add_f32(d.data(), s.data(), ids.data(), n, V, dim); });
    auto w = d0; for (int i = 0; i < n; i++) if (ids[i] >= 0 && ids[i] < V) for (int j = 0; j < dim; j++) w[ids[i]*dim+j] += s[i*dim+j];
    same("scatteradd", d, w);
  }
  { // im2col / col2im: strides, padding, dilation, a wider leading dimension
    for (auto g : {conv(7, 6, 3, 2, 2, 1, 1, 1, 1, 2), conv(5, 5, 3, 3, 1, 1, 1, 1, 1, 1), conv(9, 8, 2, 3, 3, 2, 0, 2, 2, 1)}) {
      int c = 3, npix = g.Ho*g.Wo, rows = c*g.KH*g.KW, ld = npix + 5; auto x = rnd(c*g.H*g.W, 1); std::vector<float> col(rows*ld, 42.f);
      launch({3}, {64}, [&] { rg_im2col_f32(col.data(), ld, x.data(), c, g); });
      std::vector<double> w(rows*ld, 42.0), adj(c*g.H*g.W, 0.0); auto cin = rnd(rows*ld, 1);
      for (int ch = 0; ch < c; ch++) for (int ky = 0; ky < g.KH; ky++) for (int kx = 0; kx < g.KW; kx++) for (int oy = 0; oy < g.Ho; oy++) for (int ox = 0; ox < g.Wo; ox++) {
        int row = (ch*g.KH+ky)*g.KW+kx, iy = oy*g.SH-g.PH+ky*g.DH, ix = ox*g.SW-g.PW+kx*g.DW; bool in = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
        w[row*ld+oy*g.Wo+ox] = in ? x[(ch*g.H+iy)*g.W+ix] : 0.0; if (in) adj[(ch*g.H+iy)*g.W+ix] += cin[row*ld+oy*g.Wo+ox]; }
      char nm[64]; snprintf(nm, 64, "im2col/%dx%d k%dx%d", g.H, g.W, g.KH, g.KW); check(nm, col, w, 0, 0);
      auto dx0 = rnd(c*g.H*g.W, 1), dx = dx0; for (size_t i = 0; i < adj.size(); i++) adj[i] += dx0[i];
      launch({2}, {64}, [&] { rg_col2im_f32(dx.data(), cin.data(), ld, c, g); });
      snprintf(nm, 64, "col2im/%dx%d k%dx%d", g.H, g.W, g.KH, g.KW); check(nm, dx, adj);
    }
  }
  { // max pool: overlapping windows, a NaN, ties, windows of padding only; backward
    for (auto g : {conv(7, 9, 3, 3, 2, 2, 1, 1, 1, 1), conv(4, 4, 1, 1, 2, 2, 1, 1, 1, 1), conv(6, 6, 2, 2, 2, 2, 0, 0, 1, 1)}) {
      int P = 3, np = g.Ho*g.Wo; auto x = rnd(P*g.H*g.W, 1); x[5] = NAN; x[g.H*g.W+3] = x[g.H*g.W+4] = 2.f;
      std::vector<float> y(P*np); std::vector<int> arg(P*np);
      launch({2}, {32}, [&] { rg_maxpool_f32(y.data(), arg.data(), x.data(), P, g); });
      std::vector<double> w(P*np); std::vector<int> wa(P*np); bool argok = true;
      for (int p = 0; p < P; p++) for (int oy = 0; oy < g.Ho; oy++) for (int ox = 0; ox < g.Wo; ox++) { float best = 0; int at = -1;
        for (int ky = 0; ky < g.KH; ky++) for (int kx = 0; kx < g.KW; kx++) { int iy = oy*g.SH-g.PH+ky*g.DH, ix = ox*g.SW-g.PW+kx*g.DW; if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
          float v = x[(p*g.H+iy)*g.W+ix]; if (at < 0 || v > best || v != v) { best = v; at = iy*g.W+ix; } }
        int o = (p*g.Ho+oy)*g.Wo+ox; w[o] = at < 0 ? -INFINITY : best; wa[o] = at; argok &= arg[o] == at; }
      char nm[64]; snprintf(nm, 64, "maxpool/%dx%d k%d s%d p%d", g.H, g.W, g.KH, g.SH, g.PH);
      for (int i = 0; i < P*np; i++) if ((std::isnan(w[i]) && std::isnan(y[i])) || (std::isinf(w[i]) && w[i] == y[i])) w[i] = y[i] = 0; // NaN propagates, −∞ for padding only: equal
      check(nm, y, w, 0, 0); if (!argok) { printf("FAIL %s: argmax\n", nm); fails++; }
      auto dy = rnd(P*np, 1), dx0 = rnd(P*g.H*g.W, 1), dx = dx0;
      launch({1}, {32}, [&] { rg_maxpool_backward_f32(dx.data(), dy.data(), arg.data(), P, g.H*g.W, np); });
      auto wd = dx0; for (int p = 0; p < P; p++) for (int i = 0; i < np; i++) if (wa[p*np+i] >= 0) wd[p*g.H*g.W+wa[p*np+i]] += dy[p*np+i];
      snprintf(nm, 64, "maxpoolback/%dx%d k%d s%d p%d", g.H, g.W, g.KH, g.SH, g.PH); same(nm, dx, wd);
    }
  }
  { // Adam, AMSGrad, AdamW, L2 decay: bitwise against internal/kernels.Adam's rounding, and
    // within 1e-5 of the same update in float64
    struct K { float wd, decay; int decoupled; float b1, omb1, b2, omb2, bc2, eps, neg; int ams; const char* name; };
    float lr = 1e-3f; int t = 3; double b1 = 0.9, b2 = 0.999;
    float bc1 = (float)(1 - std::pow(b1, t)), bc2s = (float)std::sqrt(1 - std::pow(b2, t)), neg = -lr / bc1;
    for (auto k : {K{0, 1, 0, 0.9f, 0.1f, 0.999f, 0.001f, bc2s, 1e-8f, neg, 0, "adam"}, K{0, 1, 0, 0.9f, 0.1f, 0.999f, 0.001f, bc2s, 1e-8f, neg, 1, "amsgrad"},
                   K{0, 1 - lr*0.01f, 1, 0.9f, 0.1f, 0.999f, 0.001f, bc2s, 1e-8f, neg, 0, "adamw"}, K{5e-4f, 1, 0, 0.9f, 0.1f, 0.999f, 0.001f, bc2s, 1e-8f, neg, 1, "adam+l2+amsgrad"}}) {
      int n = 2001; auto p = rnd(n, 1), g = rnd(n, 1), m = rnd(n, 0.1), v = rnd(n, 0.01), vm = rnd(n, 0.01);
      for (auto& e : v) e = std::fabs(e); for (auto& e : vm) e = std::fabs(e);
      auto P = p, M = m, V = v, VM = vm;
      launch({3}, {256}, [&] { rg_adam_f32(P.data(), g.data(), M.data(), V.data(), VM.data(), n, k.wd, k.decay, k.decoupled, k.b1, k.omb1, k.b2, k.omb2, k.bc2, k.eps, k.neg, k.ams); });
      auto wp = p, wm = m, wv = v, wvm = vm; std::vector<double> dp(n);
      for (int i = 0; i < n; i++) {
        float gi = g[i], pi = p[i]; if (k.decoupled) pi = pi * k.decay; else if (k.wd != 0) gi = std::fma(pi, k.wd, gi);
        float mi = std::fma(gi, k.omb1, m[i]*k.b1); float t1 = v[i]*k.b2, t2 = k.omb2*gi; t2 = t2*gi; float vi = t1 + t2; wm[i] = mi; wv[i] = vi;
        if (k.ams) { vi = std::max(vm[i], vi); wvm[i] = vi; }
        float den = std::sqrt(vi); den = den / k.bc2; den = den + k.eps; float st = k.neg*mi; st = st / den; wp[i] = pi + st;
        double G = g[i], Pp = p[i]; if (k.decoupled) Pp *= k.decay; else G += (double)k.wd*p[i];
        double Mi = (double)k.b1*m[i] + (double)k.omb1*G, Vi = (double)k.b2*v[i] + (double)k.omb2*G*G; if (k.ams) Vi = std::max((double)vm[i], Vi);
        dp[i] = Pp + (double)k.neg*Mi/(std::sqrt(Vi)/k.bc2 + k.eps);
      }
      char nm[64]; snprintf(nm, 64, "adam/%s/p", k.name); same(nm, P, wp); snprintf(nm, 64, "adam/%s/m", k.name); same(nm, M, wm);
      snprintf(nm, 64, "adam/%s/v", k.name); same(nm, V, wv); if (k.ams) { snprintf(nm, 64, "adam/%s/vmax", k.name); same(nm, VM, wvm); }
      snprintf(nm, 64, "adam/%s/p~f64", k.name); check(nm, P, dp, 1e-5, 1e-6);
    }
  }
}
int main() {
  { // unary
    int n = 1000; auto x = rnd(n, 8); std::vector<float> y(n); std::vector<double> w(n);
    launch({2}, {256}, [&] { rg_sigmoid_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = 1/(1+std::exp(-(double)x[i])); check("sigmoid", y, w);
    launch({2}, {256}, [&] { rg_tanh_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = std::tanh((double)x[i]); check("tanh", y, w);
    launch({2}, {256}, [&] { rg_relu_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = std::max(0.0, (double)x[i]); check("relu", y, w);
    launch({2}, {256}, [&] { rg_scale_f32(y.data(), x.data(), 2.5f, n); }); for (int i = 0; i < n; i++) w[i] = 2.5*x[i]; check("scale", y, w);
  }
  { // softmax / log-softmax: rows of every block size
    for (int cols : {1, 33, 761, 3000}) { int R = 3; auto x2 = rnd(R*cols, 10); std::vector<float> y2(R*cols);
      launch({(unsigned)R}, rb(cols), [&] { rg_softmax_f32(y2.data(), x2.data(), R, cols); });
      std::vector<double> w(R*cols); for (int r = 0; r < R; r++) { double mx = -INFINITY, s = 0; for (int j = 0; j < cols; j++) mx = std::max(mx, (double)x2[r*cols+j]); for (int j = 0; j < cols; j++) s += std::exp(x2[r*cols+j]-mx); for (int j = 0; j < cols; j++) w[r*cols+j] = std::exp(x2[r*cols+j]-mx)/s; }
      char nm[64]; snprintf(nm, 64, "softmax/cols=%d", cols); check(nm, y2, w);
      launch({(unsigned)R}, rb(cols), [&] { rg_log_softmax_f32(y2.data(), x2.data(), R, cols); });
      for (auto& e : w) e = std::log(e); snprintf(nm, 64, "logsoftmax/cols=%d", cols); check(nm, y2, w);
    }
  }
  { // gather
    int V = 50, dim = 33; auto tab = rnd(V*dim, 1); std::vector<int> ids = {0, 49, 7, -1, 50, 7, 3}; int n = ids.size(); std::vector<float> y(n*dim);
    launch({2}, rb(dim), [&] { rg_gather_f32(y.data(), tab.data(), ids.data(), n, V, dim, 3.0f); });
    std::vector<double> w(n*dim); for (int i = 0; i < n; i++) if (ids[i] >= 0 && ids[i] < V) for (int j = 0; j < dim; j++) w[i*dim+j] = 3.0*tab[ids[i]*dim+j];
    check("gather", y, w);
  }
  training();
  printf(fails ? "FAILED %d\n" : "ALL OK\n", fails);
  return fails != 0;
}
