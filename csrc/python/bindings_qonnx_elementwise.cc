// ortquant._C bindings of the QONNX elementwise ops BipolarQuant, Trunc (v1/v2) and FloatQuant.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "core/error.h"
#include "core/qonnx/bipolar_quant.h"
#include "core/qonnx/float_quant.h"
#include "core/qonnx/trunc.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

bool is_f16(const py::array& a) { return a.dtype().kind() == 'f' && a.dtype().itemsize() == 2; }

// A float16 array as C-contiguous binary16 data (true), or anything else as float32 (false); `keep` owns it.
bool float_operand(const py::array& a, py::array* keep) {
  if (is_f16(a)) {
    *keep = py::array::ensure(a, py::array::c_style);
    return true;
  }
  *keep = as_f32(a);
  return false;
}

// A float16 array as is, an int32 one when `allow_int` and the array has an integer dtype, anything else as
// float32. `keep` owns the data.
qonnx::NumTensor num_tensor(const py::array& a, bool allow_int, py::array* keep) {
  if (allow_int && (a.dtype().kind() == 'i' || a.dtype().kind() == 'u')) {
    *keep = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return {keep->data(), true, shape_of(*keep)};
  }
  const bool f16 = float_operand(a, keep);
  return {keep->data(), false, shape_of(*keep), f16};
}

py::array bipolar_quant(const py::array& x_in, const py::array& s_in) {
  py::array x, s;
  const bool x16 = float_operand(x_in, &x), s16 = float_operand(s_in, &s);
  const Shape out = broadcast_shapes({shape_of(x), shape_of(s)});
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), shape_of(s)});
  py::array y(py::dtype(x16 && s16 ? "float16" : "float32"), out);
  void* yp = y.mutable_data();
  {
    py::gil_scoped_release nogil;
    if (!x16 && !s16) {
      qonnx::bipolar_quant(plan, static_cast<const float*>(x.data()), static_cast<const float*>(s.data()),
                           static_cast<float*>(yp), 0, plan.total);
    } else {
      qonnx::bipolar_quant_mixed(plan, x.data(), x16, s.data(), s16, yp, 0, plan.total);
    }
  }
  return y;
}

py::array trunc(const py::array& x_in, const py::array& s_in, const py::array& z_in,
                         const py::array& in_bw_in, const py::array& a4, const std::optional<py::array>& a5,
                         bool is_signed, bool narrow, const std::string& rounding_mode) {
  py::array x;
  const bool x16 = float_operand(x_in, &x);
  const RoundMode mode = qonnx_mode(rounding_mode);
  py::array ks, kz, kb, k4, k5;
  const auto s = num_tensor(s_in, false, &ks);
  const auto z = num_tensor(z_in, false, &kz);
  qonnx::TruncParams p;
  if (!a5) {  // v1: a4 = out_bitwidth
    p = qonnx::trunc_v1_params(s, z, num_tensor(in_bw_in, true, &kb), num_tensor(a4, true, &k4));
  } else {  // v2: a4 = out_scale, a5 = out_bitwidth; in_bitwidth is not used
    p = qonnx::trunc_v2_params(s, z, num_tensor(a4, false, &k4), num_tensor(*a5, true, &k5), is_signed, narrow);
  }
  const Shape out = broadcast_shapes({shape_of(x), p.shape});
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), p.shape});
  py::array y(py::dtype(p.half ? "float16" : "float32"), out);
  void* yp = y.mutable_data();
  {
    py::gil_scoped_release nogil;
    qonnx::trunc(plan, x.data(), x16, p, yp, 0, plan.total, mode);
  }
  return y;
}

py::array_t<float> float_quant(const py::array& x_in, const py::array& s_in, const py::array& e_in,
                               const py::array& m_in, const py::array& b_in, const py::array& mv_in,
                               const std::string& rounding_mode, bool has_inf, bool has_nan, bool saturation) {
  py::array x;
  const bool x16 = float_operand(x_in, &x);
  const RoundMode mode = qonnx_mode(rounding_mode);
  const qonnx::FloatOverflow ovf = qonnx::float_quant_overflow(saturation, has_inf, has_nan);
  py::array ks, ke, km, kb, kv;
  const qonnx::FloatQuantParams p =
      qonnx::float_quant_params(num_tensor(s_in, false, &ks), num_tensor(e_in, false, &ke),
                                num_tensor(m_in, false, &km), num_tensor(b_in, false, &kb),
                                num_tensor(mv_in, false, &kv));
  const Shape out = broadcast_shapes({shape_of(x), p.shape});
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), p.shape});
  py::array_t<float> y(out);
  {
    py::gil_scoped_release nogil;
    qonnx::float_quant(plan, x.data(), x16, p, y.mutable_data(), 0, plan.total, mode, ovf);
  }
  return y;
}

}  // namespace

void register_qonnx_elementwise(py::module_& m) {
  m.def("bipolar_quant", &bipolar_quant, py::arg("x"), py::arg("scale"),
        "QONNX BipolarQuant: (x >= 0 ? 1 : -1) * scale, numpy broadcasting; float16 output when x and scale are.");
  m.def("trunc", &trunc, py::arg("x"), py::arg("scale"), py::arg("zeropt"), py::arg("in_bitwidth"),
        py::arg("out_bitwidth_or_out_scale"), py::arg("out_bitwidth") = std::nullopt, py::arg("signed") = true,
        py::arg("narrow") = false, py::arg("rounding_mode") = "FLOOR",
        "QONNX Trunc: v1 with 5 tensors (…, out_bitwidth), v2 with 6 (…, out_scale, out_bitwidth); float16\n"
        "pipeline and output when scale is float16.");
  m.def("float_quant", &float_quant, py::arg("x"), py::arg("scale"), py::arg("exponent_bitwidth"),
        py::arg("mantissa_bitwidth"), py::arg("exponent_bias"), py::arg("max_val"),
        py::arg("rounding_mode") = "ROUND", py::arg("has_inf") = false, py::arg("has_nan") = false,
        py::arg("saturation") = true,
        "QONNX FloatQuant (minifloat quantize-dequantize), float32 output; float16 pipeline when scale is float16.");
}

}  // namespace ortquant::py_bindings
