// ortquant._C bindings of the linger core (no onnxruntime): every issue-3 op on numpy arrays, so the tests can
// compare the C++ (on each ISA path, see kernels.set_isa) with the numpy reference directly.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/linger/activation.h"
#include "core/linger/avgpool.h"
#include "core/linger/batchnorm.h"
#include "core/linger/elementwise.h"
#include "core/linger/iqadd.h"
#include "core/linger/iqcat.h"
#include "core/linger/iqclamp.h"
#include "core/linger/iqdiv.h"
#include "core/linger/iqmul.h"
#include "core/linger/iqpad.h"
#include "core/linger/iqsum.h"
#include "core/linger/quant.h"
#include "core/linger/relu.h"
#include "core/linger/softmax.h"
#include "core/lut.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

template <class T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <class T>
carray<T> as(const py::handle& h) {
  return carray<T>::ensure(h);
}

bool is_dtype(const py::array& a, char kind, py::ssize_t size) {
  return a.dtype().kind() == kind && a.dtype().itemsize() == size;
}

Shape bound_shape(const Shape& a, const Shape& b) { return broadcast_shapes({a, b}); }

py::array quant(const py::array& x_in, float scale, int bits) {
  auto x = as<float>(x_in);
  const Shape s = shape_of(x);
  const int64_t n = shape_size(s);
  const int c = linger::container_bits(bits);
  if (c == 8) {
    py::array_t<int8_t> y(s);
    linger::quant(x.data(), y.mutable_data(), n, scale, bits);
    return std::move(y);
  }
  if (c == 16) {
    py::array_t<int16_t> y(s);
    linger::quant(x.data(), y.mutable_data(), n, scale, bits);
    return std::move(y);
  }
  py::array_t<int32_t> y(s);
  linger::quant(x.data(), y.mutable_data(), n, scale, bits);
  return std::move(y);
}

py::array_t<float> dequant(const py::array& x_in, float scale) {
  const Shape s = shape_of(x_in);
  py::array_t<float> y(s);
  const int64_t n = shape_size(s);
  if (is_dtype(x_in, 'i', 1)) linger::dequant(as<int8_t>(x_in).data(), y.mutable_data(), n, scale);
  else if (is_dtype(x_in, 'i', 2)) linger::dequant(as<int16_t>(x_in).data(), y.mutable_data(), n, scale);
  else if (is_dtype(x_in, 'i', 4)) linger::dequant(as<int32_t>(x_in).data(), y.mutable_data(), n, scale);
  else throw Error("dequant: x must be int8, int16 or int32");
  return y;
}

template <class Ti>
py::array requant_typed(const carray<Ti>& x, const luna::Rescale& r, int o_bits) {
  const Shape s = shape_of(x);
  const int64_t n = shape_size(s);
  const int c = linger::container_bits(o_bits);
  if (c == 8) {
    py::array_t<int8_t> y(s);
    linger::requant(x.data(), y.mutable_data(), n, r, o_bits);
    return std::move(y);
  }
  if (c == 16) {
    py::array_t<int16_t> y(s);
    linger::requant(x.data(), y.mutable_data(), n, r, o_bits);
    return std::move(y);
  }
  py::array_t<int32_t> y(s);
  linger::requant(x.data(), y.mutable_data(), n, r, o_bits);
  return std::move(y);
}

py::array requant(const py::array& x, float sx, float so, int o_bits) {
  const luna::Rescale r(double(so) / double(sx));
  if (is_dtype(x, 'i', 1)) return requant_typed(as<int8_t>(x), r, o_bits);
  if (is_dtype(x, 'i', 2)) return requant_typed(as<int16_t>(x), r, o_bits);
  if (is_dtype(x, 'i', 4)) return requant_typed(as<int32_t>(x), r, o_bits);
  throw Error("requant: x must be int8, int16 or int32");
}

// iqAdd / iqMul / iqDiv: y int8 (the int path) or float32 (the float path), numpy broadcasting; a one-element y
// also runs the tabulated constant path when `as_constant`.
py::array_t<int8_t> binary(const std::string& op, const py::array& x_in, const py::array& y_in, float sx, float sy,
                           float so, bool as_constant) {
  auto x = as<int8_t>(x_in);
  const Shape out = bound_shape(shape_of(x), shape_of(y_in));
  py::array_t<int8_t> z(out);
  const int64_t total = shape_size(out);
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), shape_of(y_in)});
  linger::BinaryI8 eng = op == "add"   ? linger::make_iqadd(sx, sy, so)
                         : op == "mul" ? linger::make_iqmul(sx, sy, so)
                         : op == "div" ? linger::make_iqdiv(sx, sy, so)
                                       : throw Error("unknown op " + op);
  const bool y_int = is_dtype(y_in, 'i', 1);
  if (!y_int && !is_dtype(y_in, 'f', 4)) throw Error("y must be int8 or float32");
  if (as_constant) {
    if (y_in.size() != 1 || total != x.size()) throw Error("constant y must have one element");
    linger::UnaryI8 u;
    if (y_int) {
      const int8_t c = *as<int8_t>(y_in).data();
      u = linger::UnaryI8::from_fn([&](int8_t v) { return eng(v, c); });
    } else {
      const float c = *as<float>(y_in).data();
      u = op == "add"   ? linger::make_iqadd_const(sx, sy, so, c)
          : op == "mul" ? linger::make_iqmul_const_float(sx, sy, so, c)
                        : linger::make_iqdiv_const(sx, sy, so, c);
    }
    u.run(x.data(), z.mutable_data(), total);
    return z;
  }
  if (y_int) {
    auto y = as<int8_t>(y_in);
    eng.run(plan, x.data(), y.data(), z.mutable_data(), 0, total);
    return z;
  }
  auto y = as<float>(y_in);
  const int8_t* xp = x.data();
  const float* yp = y.data();
  int8_t* zp = z.mutable_data();
  for_each_segment(plan, 0, total, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const int8_t a = xp[offs[0] + i * st[0]];
      const float b = yp[offs[1] + i * st[1]];
      zp[o + i] = op == "add"   ? linger::iqadd_float(a, b, sx, sy, so)
                  : op == "mul" ? linger::iqmul_float(a, b, sx, sy, so)
                                : linger::iqdiv_float(a, b / sy, sx, so);
    }
  });
  return z;
}

py::array_t<int8_t> iqcat(const std::vector<py::array>& xs_in, const std::vector<float>& scales, float so, int64_t dim) {
  if (xs_in.empty() || xs_in.size() != scales.size()) throw Error("iqcat: one scale per input");
  std::vector<carray<int8_t>> xs;
  for (const auto& a : xs_in) xs.push_back(as<int8_t>(a));
  const Shape s0 = shape_of(xs[0]);
  const int64_t rank = static_cast<int64_t>(s0.size());
  const int64_t axis = dim < 0 ? dim + rank : dim;
  if (axis < 0 || axis >= rank) throw Error("iqcat: bad dim");
  Shape out = s0;
  out[static_cast<size_t>(axis)] = 0;
  int64_t trailing = 1;
  for (int64_t d = axis + 1; d < rank; ++d) trailing *= s0[static_cast<size_t>(d)];
  std::vector<linger::UnaryI8> maps;
  for (float s : scales) maps.push_back(linger::UnaryI8::requant(luna::Rescale(double(so) / double(s))));
  std::vector<linger::CatPart> parts(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape si = shape_of(xs[i]);
    out[static_cast<size_t>(axis)] += si[static_cast<size_t>(axis)];
    parts[i] = {xs[i].data(), si[static_cast<size_t>(axis)] * trailing, &maps[i]};
  }
  py::array_t<int8_t> y(out);
  linger::iqcat(parts, y.mutable_data(), 0, shape_size(out));
  return y;
}

py::array_t<int8_t> iqclamp(const py::array& x_in, float sx, float so, float min, float max) {
  auto x = as<int8_t>(x_in);
  py::array_t<int8_t> y(shape_of(x));
  linger::make_iqclamp(sx, so, min, max).run(x.data(), y.mutable_data(), x.size());
  return y;
}

py::array_t<int8_t> activation(const py::array& x_in, float sx, const std::string& kind) {
  const linger::Activation act = kind == "sigmoid" ? linger::Activation::kSigmoid
                                 : kind == "tanh"  ? linger::Activation::kTanh
                                                   : throw Error("kind must be sigmoid or tanh");
  py::array_t<int8_t> y(shape_of(x_in));
  if (is_dtype(x_in, 'i', 2)) {
    auto x = as<int16_t>(x_in);
    const auto t = linger::make_activation_table(act, sx, 16);
    linger::activation_lookup(x.data(), y.mutable_data(), x.size(), t.data());
  } else if (is_dtype(x_in, 'i', 1)) {
    auto x = as<int8_t>(x_in);
    const auto t = linger::make_activation_table(act, sx, 8);
    linger::activation_lookup(x.data(), y.mutable_data(), x.size(), t.data());
  } else {
    throw Error("activation: x must be int8 or int16");
  }
  return y;
}

py::array_t<int8_t> table(const std::string& kind) {
  const int8_t* t = kind == "sigmoid" ? luna::sigmoid_table() : kind == "tanh" ? luna::tanh_table()
                                                                               : throw Error("sigmoid or tanh");
  py::array_t<int8_t> y(65536);
  std::copy(t, t + 65536, y.mutable_data());
  return y;
}

py::array_t<int32_t> formula(const py::array& v_in, const std::string& kind) {
  auto v = as<int64_t>(v_in);
  py::array_t<int32_t> y(shape_of(v));
  const bool sig = kind == "sigmoid";
  for (py::ssize_t i = 0; i < v.size(); ++i)
    y.mutable_data()[i] = sig ? luna::sigmoid_q11_formula(v.data()[i]) : luna::tanh_q11_formula(v.data()[i]);
  return y;
}

py::array_t<int8_t> iqsum(const py::array& x_in, float sx, float so, const std::vector<int64_t>& dims, bool keepdims) {
  auto x = as<int8_t>(x_in);
  const Shape s = shape_of(x);
  const auto axes = linger::normalize_axes(dims, s.size());
  py::array_t<int8_t> y(linger::reduced_shape(s, axes, keepdims));
  linger::iqsum(x.data(), s, axes, y.mutable_data(), luna::Rescale(double(so) / double(sx)));
  return y;
}

py::array_t<int8_t> iqpad(const py::array& x_in, const std::vector<int64_t>& pads, int8_t value) {
  auto x = as<int8_t>(x_in);
  const Shape s = shape_of(x);
  py::array_t<int8_t> y(linger::pad_shape(s, pads));
  linger::iqpad(x.data(), s, pads, value, y.mutable_data());
  return y;
}

template <class Ti>
py::array softmax_typed(const carray<Ti>& x, float sx, int64_t dim, std::optional<float> so, std::optional<int> o_bits,
                        bool log) {
  const Shape s = shape_of(x);
  const int64_t rank = static_cast<int64_t>(s.size());
  const int64_t axis = dim < 0 ? dim + rank : dim;
  if (axis < 0 || axis >= rank) throw Error("softmax: bad dim");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= s[static_cast<size_t>(d)];
  const int64_t n = s[static_cast<size_t>(axis)];
  const auto kind = log ? linger::SoftmaxKind::kLogSoftmax : linger::SoftmaxKind::kSoftmax;
  linger::SoftmaxOutput out;
  if (!o_bits) {
    out.is_float = true;
    py::array_t<float> y(s);
    linger::softmax_int(kind, x.data(), y.mutable_data(), outer, n, inner, sx, out, 0, outer * inner);
    return std::move(y);
  }
  out.o_bits = *o_bits;
  out.scale_o = so.value_or(1.f);
  const int c = linger::container_bits(*o_bits);
  if (c == 8) {
    py::array_t<int8_t> y(s);
    linger::softmax_int(kind, x.data(), y.mutable_data(), outer, n, inner, sx, out, 0, outer * inner);
    return std::move(y);
  }
  if (c == 16) {
    py::array_t<int16_t> y(s);
    linger::softmax_int(kind, x.data(), y.mutable_data(), outer, n, inner, sx, out, 0, outer * inner);
    return std::move(y);
  }
  py::array_t<int32_t> y(s);
  linger::softmax_int(kind, x.data(), y.mutable_data(), outer, n, inner, sx, out, 0, outer * inner);
  return std::move(y);
}

py::array softmax(const py::array& x, float sx, int64_t dim, std::optional<float> so, std::optional<int> o_bits,
                  bool log) {
  if (is_dtype(x, 'i', 1)) return softmax_typed(as<int8_t>(x), sx, dim, so, o_bits, log);
  if (is_dtype(x, 'i', 2)) return softmax_typed(as<int16_t>(x), sx, dim, so, o_bits, log);
  throw Error("softmax: x must be int8 or int16");
}

py::array_t<int32_t> softmax_q25_row(const py::array& x_in) {
  auto x = as<int32_t>(x_in);
  const int64_t n = x.size();
  py::array_t<int32_t> y(n);
  std::vector<int64_t> scratch(static_cast<size_t>(n));
  linger::softmax_q25_row(x.data(), n, y.mutable_data(), scratch.data());
  return y;
}

py::array_t<int32_t> logn(const py::array& v_in) {
  auto v = as<int32_t>(v_in);
  py::array_t<int32_t> y(shape_of(v));
  for (py::ssize_t i = 0; i < v.size(); ++i) y.mutable_data()[i] = linger::logn_q15(v.data()[i]);
  return y;
}

py::array_t<int8_t> avgpool(const py::array& x_in, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                            const std::vector<int64_t>& pads, bool ceil_mode, int bits) {
  auto x = as<int8_t>(x_in);
  if (k.size() != 2 || s.size() != 2 || pads.size() != 4) throw Error("avgpool: k, s: 2 values, pads: 4");
  linger::Pool2dParams p;
  p.kh = k[0];
  p.kw = k[1];
  p.sh = s[0];
  p.sw = s[1];
  p.pt = pads[0];
  p.pl = pads[1];
  p.pb = pads[2];
  p.pr = pads[3];
  p.ceil_mode = ceil_mode;
  p.bits = bits;
  const Shape in = shape_of(x);
  const Shape out = linger::avgpool2d_shape(in, p);
  py::array_t<int8_t> y(out);
  linger::avgpool2d(x.data(), in, p, y.mutable_data(), 0, out[0] * out[1]);
  return y;
}

// 1.1.1 layout: scales = (sx, sw, so); old layout: scales = (smx, smw, smo, sab, sao).
py::array batchnorm(const py::array& x_in, const std::vector<int64_t>& w, const std::vector<int64_t>& b,
                    const std::vector<float>& scales, int o_bits) {
  auto x = as<int8_t>(x_in);
  const Shape s = shape_of(x);
  if (s.size() < 2) throw Error("batchnorm: rank >= 2");
  linger::BatchNormParams p;
  p.o_bits = o_bits;
  p.w = w;
  p.b = b;
  if (scales.size() == 3) {
    p.r_out = luna::Rescale(double(scales[2]) / (double(scales[0]) * double(scales[1])));
  } else if (scales.size() == 5) {
    p.old_layout = true;
    p.r_out = luna::Rescale(double(scales[2]) / (double(scales[0]) * double(scales[1])));
    p.r_m = luna::Rescale(double(scales[4]) / double(scales[2]));
    p.r_b = luna::Rescale(double(scales[4]) / double(scales[3]));
  } else {
    throw Error("batchnorm: 3 or 5 scales");
  }
  const int64_t C = s[1];
  const int64_t inner = C == 0 ? 0 : shape_size(s) / (s[0] * C);
  const int c = linger::container_bits(o_bits);
  if (c == 8) {
    py::array_t<int8_t> y(s);
    linger::batchnorm_int(x.data(), y.mutable_data(), C, inner, p, 0, s[0] * C);
    return std::move(y);
  }
  if (c == 16) {
    py::array_t<int16_t> y(s);
    linger::batchnorm_int(x.data(), y.mutable_data(), C, inner, p, 0, s[0] * C);
    return std::move(y);
  }
  py::array_t<int32_t> y(s);
  linger::batchnorm_int(x.data(), y.mutable_data(), C, inner, p, 0, s[0] * C);
  return std::move(y);
}

py::array relu(const py::array& x_in) {
  const Shape s = shape_of(x_in);
  if (is_dtype(x_in, 'i', 1)) {
    auto x = as<int8_t>(x_in);
    py::array_t<int8_t> y(s);
    linger::relu(x.data(), y.mutable_data(), x.size());
    return std::move(y);
  }
  if (is_dtype(x_in, 'i', 4)) {
    auto x = as<int32_t>(x_in);
    py::array_t<int32_t> y(s);
    linger::relu(x.data(), y.mutable_data(), x.size());
    return std::move(y);
  }
  auto x = as<float>(x_in);
  py::array_t<float> y(s);
  linger::relu(x.data(), y.mutable_data(), x.size());
  return std::move(y);
}

}  // namespace

void register_linger(py::module_& m) {
  m.def("linger_quant", &quant, py::arg("x"), py::arg("scale"), py::arg("bits") = 8, "thinker Quant on float32.");
  m.def("linger_dequant", &dequant, py::arg("x"), py::arg("scale"), "thinker Dequant on int8/int16/int32.");
  m.def("linger_requant", &requant, py::arg("x"), py::arg("scale_x"), py::arg("scale_o"), py::arg("o_bits"),
        "thinker Requant between int8/int16/int32.");
  m.def("linger_binary", &binary, py::arg("op"), py::arg("x"), py::arg("y"), py::arg("scale_x"), py::arg("scale_y"),
        py::arg("scale_o"), py::arg("as_constant") = false, "thinker iqAdd ('add'), iqMul ('mul'), iqDiv ('div').");
  m.def("linger_iqcat", &iqcat, py::arg("xs"), py::arg("scales"), py::arg("scale_o"), py::arg("dim"),
        "thinker iqCat.");
  m.def("linger_iqclamp", &iqclamp, py::arg("x"), py::arg("scale_x"), py::arg("scale_o"), py::arg("min"),
        py::arg("max"), "thinker iqClamp.");
  m.def("linger_activation", &activation, py::arg("x"), py::arg("scale_x"), py::arg("kind"),
        "thinker iqSigmoid ('sigmoid') / iqTanh ('tanh') on int8 or int16.");
  m.def("linger_table", &table, py::arg("kind"), "The 65,536-entry sigmoid/tanh table, index v + 32768.");
  m.def("linger_table_formula", &formula, py::arg("v"), py::arg("kind"),
        "The sigmoid/tanh segment formula on int64 Q11 values (0 beyond +-32768, like lingerext).");
  m.def("linger_iqsum", &iqsum, py::arg("x"), py::arg("scale_x"), py::arg("scale_o"), py::arg("dims"),
        py::arg("keepdims") = false, "thinker iqSum.");
  m.def("linger_iqpad", &iqpad, py::arg("x"), py::arg("pads"), py::arg("value") = 0, "thinker iqPad.");
  m.def("linger_softmax", &softmax, py::arg("x"), py::arg("scale_x"), py::arg("dim"), py::arg("scale_o") = py::none(),
        py::arg("o_bits") = py::none(), py::arg("log") = false, "thinker SoftmaxInt / LogSoftmaxInt (log=True).");
  m.def("linger_softmax_q25_row", &softmax_q25_row, py::arg("x"), "The SOFTMAX kernel on one int32 Q25 row.");
  m.def("linger_logn", &logn, py::arg("v"), "The LOGN kernel on int32 Q15 values.");
  m.def("linger_avgpool", &avgpool, py::arg("x"), py::arg("kernel"), py::arg("strides"), py::arg("pads"),
        py::arg("ceil_mode") = false, py::arg("bits") = 8, "thinker AvgPool2dInt (pads: top, left, bottom, right).");
  m.def("linger_batchnorm", &batchnorm, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("scales"),
        py::arg("o_bits") = 8, "thinker BatchNorm2dInt/1dInt (3 scales: 1.1.1 layout, 5: the seed's layout).");
  m.def("linger_relu", &relu, py::arg("x"), "thinker Relu on int8, int32 or float32.");
}

}  // namespace ortquant::py_bindings
