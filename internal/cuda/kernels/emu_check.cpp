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
int main() {
  { // add / mul with PerGroup(3,4), rows 12 cols 37, grid 3 (stride loop)
    int rows = 12, cols = 37, bR = 3, bD = 4; auto a = rnd(rows*cols, 3), b = rnd(bR*cols, 3); std::vector<float> d(rows*cols);
    launch({3}, {256}, [&] { rg_add_f32(d.data(), a.data(), b.data(), (long long)rows*cols, cols, bR, bD); });
    std::vector<double> w(rows*cols); for (int r = 0; r < rows; r++) for (int c = 0; c < cols; c++) w[r*cols+c] = (double)a[r*cols+c] + b[((r/bD)%bR)*cols+c];
    check("add/pergroup", d, w);
    launch({2}, {256}, [&] { rg_mul_f32(d.data(), a.data(), b.data(), (long long)rows*cols, cols, 4, 1); });
    for (int r = 0; r < rows; r++) for (int c = 0; c < cols; c++) w[r*cols+c] = (double)a[r*cols+c] * b[(r%4)*cols+c];
    check("mul/cyclic", d, w);
  }
  { // unary
    int n = 1000; auto x = rnd(n, 8); std::vector<float> y(n); std::vector<double> w(n);
    launch({2}, {256}, [&] { rg_sigmoid_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = 1/(1+std::exp(-(double)x[i])); check("sigmoid", y, w);
    launch({2}, {256}, [&] { rg_tanh_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = std::tanh((double)x[i]); check("tanh", y, w);
    launch({2}, {256}, [&] { rg_relu_f32(y.data(), x.data(), n); }); for (int i = 0; i < n; i++) w[i] = std::max(0.0, (double)x[i]); check("relu", y, w);
    launch({2}, {256}, [&] { rg_scale_f32(y.data(), x.data(), 2.5f, n); }); for (int i = 0; i < n; i++) w[i] = 2.5*x[i]; check("scale", y, w);
  }
  { // softmax: B=2 H=3 Tq=5 Tk=7, keypad + causal, one fully masked row via full mask
    int B = 2, H = 3, Tq = 5, Tk = 7, rows = B*H*Tq; auto x = rnd(rows*Tk, 6); std::vector<float> y(rows*Tk);
    std::vector<unsigned char> pad(B*Tk), full(B*Tq*Tk);
    for (int b = 0; b < B; b++) for (int j = 0; j < Tk; j++) { pad[b*Tk+j] = (b == 0 || j < Tk-3); for (int q = 0; q < Tq; q++) full[(b*Tq+q)*Tk+j] = pad[b*Tk+j] && j <= q; }
    full[(1*Tq+0)*Tk+0] = 0;
    auto ref = [&](auto masked) { std::vector<double> w(rows*Tk); for (int r = 0; r < rows; r++) { double mx = -INFINITY; std::vector<double> v(Tk); for (int j = 0; j < Tk; j++) { v[j] = masked(r, j) ? -1e9 : x[r*Tk+j]; mx = std::max(mx, v[j]); } double s = 0; for (auto& e : v) { e = std::exp(e - mx); s += e; } for (int j = 0; j < Tk; j++) w[r*Tk+j] = v[j]/s; } return w; };
    launch({(unsigned)rows}, rb(Tk), [&] { rg_softmax_f32(y.data(), x.data(), rows, Tk, pad.data(), H*Tq, 1, Tq, 1, 0); });
    check("softmax/keypad+causal", y, ref([&](int r, int j) { int b = r/(H*Tq), q = r%Tq; return !pad[b*Tk+j] || j > q; }));
    launch({(unsigned)rows}, rb(Tk), [&] { rg_softmax_f32(y.data(), x.data(), rows, Tk, full.data(), H*Tq, Tq, Tq, 0, 0); });
    check("softmax/full(+masked row)", y, ref([&](int r, int j) { int b = r/(H*Tq), q = r%Tq; return !full[(b*Tq+q)*Tk+j]; }));
    launch({(unsigned)rows}, rb(Tk), [&] { rg_softmax_f32(y.data(), x.data(), rows, Tk, nullptr, rows, 1, Tq, 1, 2); });
    check("softmax/causal offset", y, ref([&](int r, int j) { return j > 2 + r%Tq; }));
    for (int cols : {1, 33, 761, 3000}) { int R = 3; auto x2 = rnd(R*cols, 10); std::vector<float> y2(R*cols);
      launch({(unsigned)R}, rb(cols), [&] { rg_softmax_f32(y2.data(), x2.data(), R, cols, nullptr, R, 1, 1, 0, 0); });
      std::vector<double> w(R*cols); for (int r = 0; r < R; r++) { double mx = -INFINITY, s = 0; for (int j = 0; j < cols; j++) mx = std::max(mx, (double)x2[r*cols+j]); for (int j = 0; j < cols; j++) s += std::exp(x2[r*cols+j]-mx); for (int j = 0; j < cols; j++) w[r*cols+j] = std::exp(x2[r*cols+j]-mx)/s; }
      char nm[64]; snprintf(nm, 64, "softmax/cols=%d", cols); check(nm, y2, w);
      launch({(unsigned)R}, rb(cols), [&] { rg_log_softmax_f32(y2.data(), x2.data(), R, cols); });
      for (auto& e : w) e = std::log(e); snprintf(nm, 64, "logsoftmax/cols=%d", cols); check(nm, y2, w);
    }
  }
  { // layer norm
    for (int cols : {37, 512, 2500}) for (int kind = 0; kind < 2; kind++) for (int per = 0; per < 2; per++) {
      int rows = 4; auto x = rnd(rows*cols, 4); for (auto& e : x) e += 1.5f; int np = per ? rows*cols : cols; auto g = rnd(np, 2), b = rnd(np, 1); std::vector<float> y(rows*cols);
      float eps = kind == 0 ? 1e-6f : 1e-5f;
      launch({(unsigned)rows}, rb(cols), [&] { rg_layer_norm_f32(y.data(), x.data(), g.data(), b.data(), rows, cols, per ? cols : 0, eps, kind == 0); });
      std::vector<double> w(rows*cols); for (int r = 0; r < rows; r++) { double m = 0, ss = 0; for (int j = 0; j < cols; j++) m += x[r*cols+j]; m /= cols; for (int j = 0; j < cols; j++) ss += (x[r*cols+j]-m)*(x[r*cols+j]-m); int off = per ? r*cols : 0;
        for (int j = 0; j < cols; j++) { double v = x[r*cols+j]; w[r*cols+j] = kind == 0 ? g[off+j]*(v-m)/(std::sqrt(ss/(cols-1))+eps) + b[off+j] : g[off+j]*(v-m)/std::sqrt(ss/cols+eps) + b[off+j]; } }
      char nm[64]; snprintf(nm, 64, "layernorm/k%d/per%d/c%d", kind, per, cols); check(nm, y, w);
    }
  }
  { // gather
    int V = 50, dim = 33; auto tab = rnd(V*dim, 1); std::vector<int> ids = {0, 49, 7, -1, 50, 7, 3}; int n = ids.size(); std::vector<float> y(n*dim);
    launch({2}, rb(dim), [&] { rg_gather_f32(y.data(), tab.data(), ids.data(), n, V, dim, 3.0f); });
    std::vector<double> w(n*dim); for (int i = 0; i < n; i++) if (ids[i] >= 0 && ids[i] < V) for (int j = 0; j < dim; j++) w[i*dim+j] = 3.0*tab[ids[i]*dim+j];
    check("gather", y, w);
  }
  { // rm gate
    int B = 2, S = 3, d = 40; auto nx = rnd(B*S*d, 3), m = rnd(B*S*d, 1), gw = rnd(B*2*d, 3), gu = rnd(B*S*2*d, 3); std::vector<float> y(B*S*d);
    launch({2}, {256}, [&] { rg_rm_gate_f32(y.data(), nx.data(), m.data(), gw.data(), gu.data(), B*S, S, d); });
    auto sg = [](double v) { return 1/(1+std::exp(-v)); }; std::vector<double> w(B*S*d);
    for (int r = 0; r < B*S; r++) { int b = r/S; for (int j = 0; j < d; j++) w[r*d+j] = sg((double)gw[b*2*d+j]+gu[r*2*d+j])*std::tanh((double)nx[r*d+j]) + sg((double)gw[b*2*d+d+j]+gu[r*2*d+d+j])*m[r*d+j]; }
    check("rmgate", y, w);
  }
  { // split (append into cache) / merge / transpose
    int B = 2, T = 5, H = 4, dk = 8, D = H*dk, cap = 9, pos = 3; auto qkv = rnd(B*T*3*D, 1); std::vector<float> c(B*H*cap*dk, 0.f);
    launch({2}, {256}, [&] { rg_split_heads_f32(c.data(), qkv.data(), B, T, H, dk, 3*D, D, cap, pos); });
    std::vector<double> w(c.size(), 0.0); for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) for (int t = 0; t < T; t++) for (int k = 0; k < dk; k++) w[((b*H+h)*cap+pos+t)*dk+k] = qkv[(b*T+t)*3*D+D+h*dk+k];
    check("split/append", c, w, 0, 0);
    std::vector<float> s(B*H*T*dk); launch({2}, {256}, [&] { rg_split_heads_f32(s.data(), qkv.data(), B, T, H, dk, 3*D, D, T, 0); });
    std::vector<float> mg(B*T*D); launch({3}, {256}, [&] { rg_merge_heads_f32(mg.data(), s.data(), B, T, H, dk, D); });
    std::vector<double> w2(B*T*D); for (int r = 0; r < B*T; r++) for (int cc = 0; cc < D; cc++) w2[r*D+cc] = qkv[r*3*D+D+cc]; check("split+merge", mg, w2, 0, 0);
    int bt = 2, R = 45, C = 70; auto x = rnd(bt*R*C, 1); std::vector<float> y(bt*R*C);
    launch({(unsigned)(C+31)/32, (unsigned)(R+31)/32, (unsigned)bt}, {32, 8, 1}, [&] { rg_transpose_f32(y.data(), x.data(), R, C); });
    std::vector<double> w3(bt*R*C); for (int b = 0; b < bt; b++) for (int r = 0; r < R; r++) for (int cc = 0; cc < C; cc++) w3[b*R*C+cc*R+r] = x[b*R*C+r*C+cc]; check("transpose", y, w3, 0, 0);
  }
  printf(fails ? "FAILED %d\n" : "ALL OK\n", fails);
  return fails != 0;
}
