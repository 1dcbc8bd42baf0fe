// Bindings of the int8 GEMM engine and the convolution core (no onnxruntime): every kernel path can be chosen
// explicitly, for the tests (scalar oracle vs. SIMD paths) and the benchmarks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/conv/conv.h"
#include "core/error.h"
#include "core/gemm/gemm.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

using I8 = py::array_t<int8_t, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

gemm::Kernel kernel_of(const std::string& name) {
  gemm::Kernel k;
  if (!gemm::parse_kernel(name, &k)) throw Error("unknown GEMM kernel '" + name + "' (auto, scalar, avx2, avxvnni, avx512vnni)");
  return gemm::resolve_kernel(k);
}

// Test helper only (the ORT library never starts threads): the tasks of one call spread over `threads`
// std::threads started for that call.
gemm::Parallel parallel_of(int threads) {
  if (threads <= 1) return &gemm::run_inline;
  return [threads](size_t n, const gemm::TaskFn& fn) {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
  };
}

struct EpilogueSpec {
  gemm::Epilogue ep;
  std::optional<I32> bias;
};

EpilogueSpec epilogue_of(const std::string& kind, double ratio, double lo, double hi, double fscale, double fdiv,
                         const std::optional<py::array>& bias, int64_t n) {
  EpilogueSpec s;
  if (kind == "int8") s.ep.kind = gemm::OutKind::kInt8;
  else if (kind == "int16") s.ep.kind = gemm::OutKind::kInt16;
  else if (kind == "int32") s.ep.kind = gemm::OutKind::kInt32;
  else if (kind == "float") s.ep.kind = gemm::OutKind::kFloat;
  else if (kind == "raw") s.ep.kind = gemm::OutKind::kRaw;
  else throw Error("unknown output kind '" + kind + "' (int8, int16, int32, float, raw)");
  s.ep.ratio = ratio;
  s.ep.lo = lo;
  s.ep.hi = hi;
  s.ep.fscale = fscale;
  s.ep.fdiv = fdiv;
  if (bias) {
    s.bias = I32::ensure(*bias);
    if (!s.bias || s.bias->ndim() != 1 || s.bias->shape(0) != n)
      throw Error("bias must be int32 of shape [" + std::to_string(n) + "]");
    s.ep.bias = s.bias->data();
  }
  return s;
}

py::array alloc_out(gemm::OutKind k, const std::vector<py::ssize_t>& shape) {
  switch (k) {
    case gemm::OutKind::kInt8: return py::array_t<int8_t>(shape);
    case gemm::OutKind::kInt16: return py::array_t<int16_t>(shape);
    case gemm::OutKind::kFloat: return py::array_t<float>(shape);
    default: return py::array_t<int32_t>(shape);
  }
}

// Weights packed once for gemm_rows (the benchmarks time the run alone).
class PackedRows {
 public:
  explicit PackedRows(const I8& w) {
    if (w.ndim() != 2) throw Error("weights must be 2-D [N, K]");
    w_ = gemm::pack_weights(w.data(), w.shape(0), w.shape(1), w.shape(1), gemm::PackedWeights::Layout::kPanels);
  }
  py::array run(const I8& a, const std::optional<py::array>& bias, const std::string& kind, double ratio, double lo,
                double hi, double fscale, double fdiv, const std::string& kernel, int threads) const {
    if (a.ndim() != 2 || a.shape(1) != w_.k) throw Error("a must be 2-D [M, K] with K = " + std::to_string(w_.k));
    const EpilogueSpec s = epilogue_of(kind, ratio, lo, hi, fscale, fdiv, bias, w_.n);
    const int64_t m = a.shape(0);
    py::array out = alloc_out(s.ep.kind, {static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(w_.n)});
    const gemm::Kernel k = kernel_of(kernel);
    const gemm::Parallel par = parallel_of(threads);
    void* o = out.mutable_data();
    {
      py::gil_scoped_release nogil;
      gemm::gemm_rows(a.data(), m, w_.k, w_, s.ep, o, w_.n, par, k);
    }
    return out;
  }

 private:
  gemm::PackedWeights w_;
};

py::array gemm_cols_py(const I8& w, const I8& x, const std::optional<py::array>& bias, const std::string& kind,
                       double ratio, double lo, double hi, double fscale, double fdiv, const std::string& kernel,
                       int threads) {
  if (w.ndim() != 2 || x.ndim() != 2 || w.shape(1) != x.shape(0)) throw Error("need w [N, K] and x [K, P]");
  const int64_t n = w.shape(0), k = w.shape(1), p = x.shape(1);
  const EpilogueSpec s = epilogue_of(kind, ratio, lo, hi, fscale, fdiv, bias, n);
  const gemm::PackedWeights pw = gemm::pack_weights(w.data(), n, k, k, gemm::PackedWeights::Layout::kRowBlocks);
  gemm::PackedCols cols;
  gemm::prepare_cols(&cols, p, k);
  gemm::pack_cols(&cols, x.data(), p, 0, cols.kgroups);
  py::array out = alloc_out(s.ep.kind, {static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(p)});
  const gemm::Kernel kk = kernel_of(kernel);
  void* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    // As the convolutions do: non-negative columns take the AVX2 kernels' product without the sign step.
    const gemm::Epilogue ep = gemm::with_proven_x_max(s.ep, kk, x.data(), 1, k * p, 0);
    gemm::gemm_cols(pw, cols, ep, o, p, parallel_of(threads), kk);
  }
  return out;
}

conv::ConvAttrs attrs_of(const std::vector<int64_t>& kernel_shape, const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& pads, const std::vector<int64_t>& dilations, int64_t group,
                         const std::vector<int64_t>& output_padding) {
  if (kernel_shape.size() != 2 || strides.size() != 2 || pads.size() != 4 || dilations.size() != 2 ||
      output_padding.size() != 2)
    throw Error("conv attributes: kernel_shape/strides/dilations/output_padding need 2 values, pads 4");
  conv::ConvAttrs a;
  a.kh = kernel_shape[0];
  a.kw = kernel_shape[1];
  a.sh = strides[0];
  a.sw = strides[1];
  a.pt = pads[0];
  a.pl = pads[1];
  a.pb = pads[2];
  a.pr = pads[3];
  a.dh = dilations[0];
  a.dw = dilations[1];
  a.group = group;
  a.oph = output_padding[0];
  a.opw = output_padding[1];
  return a;
}

py::array conv2d_py(const I8& x, const I8& w, const std::optional<py::array>& bias, const std::vector<int64_t>& strides,
                    const std::vector<int64_t>& pads, const std::vector<int64_t>& dilations, int64_t group,
                    const std::string& kind, double ratio, double lo, double hi, double fscale, double fdiv,
                    const std::string& kernel, int threads, bool transposed, const std::vector<int64_t>& output_padding,
                    const std::string& algo, int x_max) {
  conv::ConvAlgo ca = conv::ConvAlgo::kAuto;
  if (algo == "planes") ca = conv::ConvAlgo::kPlanes;
  else if (algo == "nhwc") ca = conv::ConvAlgo::kNhwc;
  else if (algo != "auto") throw Error("unknown convolution algorithm '" + algo + "' (auto, planes, nhwc)");
  if (x.ndim() != 4 || w.ndim() != 4) throw Error("conv2d needs 4-D x and w");
  const conv::ConvAttrs a = attrs_of({w.shape(2), w.shape(3)}, strides, pads, dilations, group, output_padding);
  const Shape xs = shape_of(x);
  const gemm::Kernel kk = kernel_of(kernel);
  const gemm::Parallel par = parallel_of(threads);
  if (transposed) {
    const conv::ConvTranspose2d c(w.data(), w.shape(0), w.shape(1), a);
    const Shape os = c.output_shape(xs);
    const EpilogueSpec s = epilogue_of(kind, ratio, lo, hi, fscale, fdiv, bias, os[1]);
    py::array out = alloc_out(s.ep.kind, std::vector<py::ssize_t>(os.begin(), os.end()));
    void* o = out.mutable_data();
    py::gil_scoped_release nogil;
    c.run(x.data(), xs, s.ep, o, par, kk);
    return out;
  }
  const conv::Conv2d c(w.data(), w.shape(0), w.shape(1), a);
  const Shape os = c.output_shape(xs);
  EpilogueSpec s = epilogue_of(kind, ratio, lo, hi, fscale, fdiv, bias, os[1]);
  if (x_max >= 0) {  // the caller's promise (Epilogue::x_max), checked here
    if (x_max > 127) throw Error("x_max must be -1 or in [0, 127], got " + std::to_string(x_max));
    const int8_t* xp = x.data();
    for (py::ssize_t i = 0; i < x.size(); ++i)
      if (xp[i] < 0 || xp[i] > x_max) throw Error("x_max: x holds " + std::to_string(xp[i]) + ", outside [0, x_max]");
    s.ep.x_max = x_max;
  }
  py::array out = alloc_out(s.ep.kind, std::vector<py::ssize_t>(os.begin(), os.end()));
  void* o = out.mutable_data();
  py::gil_scoped_release nogil;
  c.run(x.data(), xs, s.ep, o, par, kk, ca);
  return out;
}

}  // namespace

void register_gemm(py::module_& m) {
  m.def(
      "gemm_kernels",
      [] {
        std::vector<std::string> out;
        for (gemm::Kernel k : {gemm::Kernel::kScalar, gemm::Kernel::kAvx2, gemm::Kernel::kAvxVnni, gemm::Kernel::kAvx512Vnni})
          if (gemm::kernel_supported(k)) out.emplace_back(gemm::kernel_name(k));
        return out;
      },
      "GEMM kernel paths this CPU can run.");
  m.def(
      "gemm_kernel", [](const std::string& name) { return std::string(gemm::kernel_name(kernel_of(name))); },
      py::arg("name") = "auto", "The GEMM kernel path `name` resolves to ('auto' follows set_isa / ORTQUANT_ISA).");
  m.def(
      "gemm_proven_x_max",
      [](const I8& x) {
        if (x.ndim() != 2) throw Error("need a 2-D int8 array");
        return gemm::proven_x_max(x.data(), x.shape(0), x.shape(1), x.shape(1));
      },
      py::arg("x"),
      "The activation bound the data proves (gemm::proven_x_max): -1 when some value is negative, else 2^b - 1 for "
      "the bit length b of the OR of all values.");
  m.def(
      "gemm_biased_flush",
      [](const I8& w) {
        if (w.ndim() != 2) throw Error("need a 2-D int8 array");
        const gemm::PackedWeights pw =
            gemm::pack_weights(w.data(), w.shape(0), w.shape(1), w.shape(1), gemm::PackedWeights::Layout::kPanels);
        return gemm::biased_flush(pw);
      },
      py::arg("w"),
      "For weights W[N, K] (gemm::biased_flush): 0 when some |w| > 64, else how many k-groups of the AVX2 kernels' "
      "int16 pair sums of (x + 128) * w can be added before widening.");
  py::class_<PackedRows>(m, "PackedGemmRows", "int8 weights W[N, K] packed once for gemm_rows.")
      .def(py::init<const I8&>(), py::arg("w"))
      .def("run", &PackedRows::run, py::arg("a"), py::arg("bias") = py::none(), py::arg("kind") = "int8",
           py::arg("ratio") = 1.0, py::arg("lo") = -128.0, py::arg("hi") = 127.0, py::arg("fscale") = 1.0,
           py::arg("fdiv") = 0.0, py::arg("kernel") = "auto", py::arg("threads") = 1,
           "out[m, j] = epilogue(sum_k a[m, k] * W[j, k] + bias[j]).");
  m.def("gemm_cols", &gemm_cols_py, py::arg("w"), py::arg("x"), py::arg("bias") = py::none(), py::arg("kind") = "int8",
        py::arg("ratio") = 1.0, py::arg("lo") = -128.0, py::arg("hi") = 127.0, py::arg("fscale") = 1.0,
        py::arg("fdiv") = 0.0, py::arg("kernel") = "auto", py::arg("threads") = 1,
        "out[i, p] = epilogue(sum_k w[i, k] * x[k, p] + bias[i]) (the convolution orientation).");
  m.def("conv2d", &conv2d_py, py::arg("x"), py::arg("w"), py::arg("bias") = py::none(),
        py::arg("strides") = std::vector<int64_t>{1, 1}, py::arg("pads") = std::vector<int64_t>{0, 0, 0, 0},
        py::arg("dilations") = std::vector<int64_t>{1, 1}, py::arg("group") = 1, py::arg("kind") = "int8",
        py::arg("ratio") = 1.0, py::arg("lo") = -128.0, py::arg("hi") = 127.0, py::arg("fscale") = 1.0,
        py::arg("fdiv") = 0.0, py::arg("kernel") = "auto", py::arg("threads") = 1, py::arg("transposed") = false,
        py::arg("output_padding") = std::vector<int64_t>{0, 0}, py::arg("algo") = "auto", py::arg("x_max") = -1,
        "int8 NCHW convolution (or transposed convolution) with the GEMM epilogue per output channel; `algo` "
        "forces the convolution algorithm ('planes', 'nhwc'; 'auto' = the per-layer rule of docs/ops.md); "
        "`x_max` >= 0 promises every input in [0, x_max] (checked; Epilogue::x_max: the engine's int16 paths).");
}

}  // namespace ortquant::py_bindings
