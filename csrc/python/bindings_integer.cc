// Bindings of the integer-mode layers (core/integer/qlayer.h): the quantized Conv / Gemm on float inputs, and the
// in-kernel activation quantizer alone. The quantizer and rescale loops follow the active ISA (set_isa); the GEMM
// kernel can be named.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/integer/qlayer.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I8 = py::array_t<int8_t, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

integer::ActQuant act_of(float scale, float zeropt, int64_t bits, bool is_signed, bool narrow,
                         const std::string& mode, bool bipolar) {
  return integer::make_act_quant(scale, zeropt, bits, is_signed, narrow, qonnx_mode(mode), bipolar);
}

gemm::Kernel kernel_named(const std::string& name) {
  gemm::Kernel k;
  if (!gemm::parse_kernel(name, &k)) throw Error("unknown GEMM kernel '" + name + "'");
  return gemm::resolve_kernel(k);
}

// A layer's kernel name: an engine kernel (forces the int8 engine), "auto" (the layer's own choice, as the ops run
// it), "xnor" or "bitserial" (auto, and an error unless the layer takes that bit kernel: xnor.h).
template <class Layer>
gemm::Kernel layer_kernel(const std::string& name, const Layer& layer) {
  if (name == "xnor" && !(layer.uses_xnor() && layer.bit_planes() == 0))
    throw Error("kernel 'xnor' needs a bipolar activation and weight codes all -1 or +1");
  if (name == "bitserial" && !(layer.uses_xnor() && layer.bit_planes() > 0))
    throw Error("kernel 'bitserial' needs activation codes in [0, 3] and weight codes all -1 or +1");
  return name == "auto" || name == "xnor" || name == "bitserial" ? gemm::Kernel::kAuto : kernel_named(name);
}

std::vector<double> vec(const F64& a) { return std::vector<double>(a.data(), a.data() + a.size()); }

}  // namespace

void register_integer(py::module_& m) {
  m.def(
      "integer_codes",
      [](const F32& x, float scale, float zeropt, int64_t bits, bool is_signed, bool narrow, const std::string& mode,
         bool bipolar) {
        const integer::ActQuant a = act_of(scale, zeropt, bits, is_signed, narrow, mode, bipolar);
        py::array_t<int8_t> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
        integer::quantize_codes(a, x.data(), out.mutable_data(), x.size());
        return py::make_tuple(out, a.offset);
      },
      py::arg("x"), py::arg("scale"), py::arg("zeropt"), py::arg("bits"), py::arg("signed"), py::arg("narrow"),
      py::arg("rounding_mode"), py::arg("bipolar"));
  m.def(
      "rescale_codes",
      [](const I32& acc, int64_t width, const I64& corr, const F64& s, const F64& b, const I64& bound, bool relu,
         std::optional<float> leaky, std::optional<F32> resid, float scale, float zeropt, int64_t bits,
         bool is_signed, bool narrow, const std::string& mode, bool nonneg) {
        if (acc.ndim() != 3) throw Error("acc must be 3-D [channels, rows, stride]");
        const int64_t channels = acc.shape(0), rows = acc.shape(1), stride = acc.shape(2);
        if (width < 0 || width > stride) throw Error("width must be in [0, stride]");
        for (const auto* v : {static_cast<const py::array*>(&corr), static_cast<const py::array*>(&s),
                              static_cast<const py::array*>(&b), static_cast<const py::array*>(&bound)})
          if (v->ndim() != 1 || v->shape(0) != channels) throw Error("corr, s, b and bound need one value a channel");
        for (int64_t j = 0; j < channels; ++j)
          for (int64_t i = 0; i < rows * stride; ++i) {
            const int64_t v = acc.data()[j * rows * stride + i];
            if ((v < 0 ? -v : v) > bound.data()[j]) throw Error("an |acc| exceeds its channel's bound");
          }
        integer::ActQuant q = act_of(scale, zeropt, bits, is_signed, narrow, mode, false);
        if (nonneg) q = integer::nonneg_codes(q);
        if (leaky && !std::isfinite(*leaky)) throw Error("leaky must be finite");
        if (resid && (resid->ndim() != 3 || resid->shape(0) != channels || resid->shape(1) != rows ||
                      resid->shape(2) != width))
          throw Error("resid must have the output's shape [channels, rows, width]");
        py::array_t<int8_t> out({channels, rows, width});
        integer::rescale_codes(acc.data(), stride, out.mutable_data(), channels, rows, width, corr.data(), s.data(),
                               b.data(), bound.data(), relu, leaky, resid ? resid->data() : nullptr, q);
        return py::make_tuple(out, q.offset);
      },
      py::arg("acc"), py::arg("width"), py::arg("corr"), py::arg("s"), py::arg("b"), py::arg("bound"),
      py::arg("relu"), py::arg("leaky"), py::arg("resid"), py::arg("scale"), py::arg("zeropt"), py::arg("bits"), py::arg("signed"),
      py::arg("narrow"), py::arg("rounding_mode"), py::arg("nonneg") = false,
      "Codes of rescaled int32 sums (integer::rescale_codes): acc [channels, rows, stride], the first width columns.");
  m.def(
      "rescale_codes_rows",
      [](const I32& acc, const I64& corr, const F64& s, const F64& b, const I64& bound, bool relu, float scale,
         float zeropt, int64_t bits, bool is_signed, bool narrow, const std::string& mode, bool nonneg, bool fast) {
        if (acc.ndim() != 2) throw Error("acc must be 2-D [rows, channels]");
        const int64_t rows = acc.shape(0), n = acc.shape(1);
        for (const auto* v : {static_cast<const py::array*>(&corr), static_cast<const py::array*>(&s),
                              static_cast<const py::array*>(&b), static_cast<const py::array*>(&bound)})
          if (v->ndim() != 1 || v->shape(0) != n) throw Error("corr, s, b and bound need one value a channel");
        for (int64_t i = 0; i < rows * n; ++i) {
          const int64_t v = acc.data()[i];
          if ((v < 0 ? -v : v) > bound.data()[i % n]) throw Error("an |acc| exceeds its channel's bound");
        }
        integer::ActQuant q = act_of(scale, zeropt, bits, is_signed, narrow, mode, false);
        if (nonneg) q = integer::nonneg_codes(q);
        const integer::CodesFastRows f = integer::codes_fast_rows(
            integer::codes_fast(q, corr.data(), s.data(), b.data(), bound.data(), std::nullopt, n));
        py::array_t<int8_t> out({rows, n});
        integer::rescale_codes_rows(acc.data(), rows, n, out.mutable_data(), corr.data(), s.data(), b.data(), relu, q,
                                    fast ? &f : nullptr);
        return py::make_tuple(out, q.offset, f.vector);
      },
      py::arg("acc"), py::arg("corr"), py::arg("s"), py::arg("b"), py::arg("bound"), py::arg("relu"),
      py::arg("scale"), py::arg("zeropt"), py::arg("bits"), py::arg("signed"), py::arg("narrow"),
      py::arg("rounding_mode"), py::arg("nonneg") = false, py::arg("fast") = true,
      "Codes of rescaled int32 sums in rows (integer::rescale_codes_rows): acc [rows, channels]; returns (codes, "
      "offset, whether the vector loop's coefficients apply).");
  m.def(
      "qgemm",
      [](const F32& x, const I8& w, const F64& s, const F64& b, float scale, float zeropt, int64_t bits,
         bool is_signed, bool narrow, const std::string& mode, bool bipolar, const std::string& kernel, bool relu,
         const std::vector<int32_t>& w_shift) {
        if (w.ndim() != 2) throw Error("w must be 2-D [N, K]");
        if (x.ndim() != 2 || x.shape(1) != w.shape(1)) throw Error("x must be 2-D [rows, K]");
        const integer::QGemm g(w.data(), w.shape(0), w.shape(1),
                               act_of(scale, zeropt, bits, is_signed, narrow, mode, bipolar), vec(s), vec(b), relu,
                               true, w_shift);
        py::array_t<float> out({x.shape(0), w.shape(0)});
        if (out.size()) g.run(x.data(), x.shape(0), out.mutable_data(), &gemm::run_inline, layer_kernel(kernel, g));
        return out;
      },
      py::arg("x"), py::arg("w"), py::arg("s"), py::arg("b"), py::arg("scale"), py::arg("zeropt"), py::arg("bits"),
      py::arg("signed"), py::arg("narrow"), py::arg("rounding_mode"), py::arg("bipolar"), py::arg("kernel") = "auto",
      py::arg("relu") = false, py::arg("w_shift") = std::vector<int32_t>{});
  m.def(
      "qconv",
      [](const F32& x, const I8& w, const F64& s, const F64& b, float scale, float zeropt, int64_t bits,
         bool is_signed, bool narrow, const std::string& mode, bool bipolar, const std::vector<int64_t>& strides,
         const std::vector<int64_t>& pads, const std::vector<int64_t>& dilations, int64_t group,
         const std::string& kernel, bool relu, const std::vector<int32_t>& w_shift) {
        if (w.ndim() != 4 || x.ndim() != 4) throw Error("x and w must be 4-D");
        if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2) throw Error("bad conv attributes");
        conv::ConvAttrs a;
        a.kh = w.shape(2), a.kw = w.shape(3);
        a.sh = strides[0], a.sw = strides[1];
        a.dh = dilations[0], a.dw = dilations[1];
        a.pt = pads[0], a.pl = pads[1], a.pb = pads[2], a.pr = pads[3];
        a.group = group;
        conv::validate_attrs(a, false);
        const integer::QConv c(w.data(), w.shape(0), w.shape(1), a,
                               act_of(scale, zeropt, bits, is_signed, narrow, mode, bipolar), vec(s), vec(b), relu,
                               true, w_shift);
        const Shape xs = shape_of(x);
        const Shape os = c.output_shape(xs);
        py::array_t<float> out(std::vector<py::ssize_t>(os.begin(), os.end()));
        if (out.size()) c.run(x.data(), xs, out.mutable_data(), &gemm::run_inline, layer_kernel(kernel, c));
        return out;
      },
      py::arg("x"), py::arg("w"), py::arg("s"), py::arg("b"), py::arg("scale"), py::arg("zeropt"), py::arg("bits"),
      py::arg("signed"), py::arg("narrow"), py::arg("rounding_mode"), py::arg("bipolar"), py::arg("strides"),
      py::arg("pads"), py::arg("dilations"), py::arg("group"), py::arg("kernel") = "auto", py::arg("relu") = false,
      py::arg("w_shift") = std::vector<int32_t>{});
}

}  // namespace ortquant::py_bindings
