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

// A float32 array, or an int32 one when `allow_int` and the array has an integer dtype. `keep` owns the data.
qonnx::NumTensor num_tensor(const py::array& a, bool allow_int, py::array* keep) {
  if (allow_int && (a.dtype().kind() == 'i' || a.dtype().kind() == 'u')) {
    *keep = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return {keep->data(), true, shape_of(*keep)};
  }
  *keep = as_f32(a);
  return {keep->data(), false, shape_of(*keep)};
}

py::array_t<float> bipolar_quant(const py::array& x_in, const py::array& s_in) {
  auto x = as_f32(x_in), s = as_f32(s_in);
  const Shape out = broadcast_shapes({shape_of(x), shape_of(s)});
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), shape_of(s)});
  py::array_t<float> y(out);
  {
    py::gil_scoped_release nogil;
    qonnx::bipolar_quant(plan, x.data(), s.data(), y.mutable_data(), 0, plan.total);
  }
  return y;
}

py::array_t<float> trunc(const py::array& x_in, const py::array& s_in, const py::array& z_in,
                         const py::array& in_bw_in, const py::array& a4, const std::optional<py::array>& a5,
                         bool is_signed, bool narrow, const std::string& rounding_mode) {
  auto x = as_f32(x_in);
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
  py::array_t<float> y(out);
  {
    py::gil_scoped_release nogil;
    qonnx::trunc(plan, x.data(), p, y.mutable_data(), 0, plan.total, mode);
  }
  return y;
}

py::array_t<float> float_quant(const py::array& x_in, const py::array& s_in, const py::array& e_in,
                               const py::array& m_in, const py::array& b_in, const py::array& mv_in,
                               const std::string& rounding_mode, bool has_inf, bool has_nan, bool saturation) {
  auto x = as_f32(x_in);
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
    qonnx::float_quant(plan, x.data(), p, y.mutable_data(), 0, plan.total, mode, ovf);
  }
  return y;
}

}  // namespace

void register_qonnx_elementwise(py::module_& m) {
  m.def("bipolar_quant", &bipolar_quant, py::arg("x"), py::arg("scale"),
        "QONNX BipolarQuant on float32 arrays: (x >= 0 ? 1 : -1) * scale, numpy broadcasting.");
  m.def("trunc", &trunc, py::arg("x"), py::arg("scale"), py::arg("zeropt"), py::arg("in_bitwidth"),
        py::arg("out_bitwidth_or_out_scale"), py::arg("out_bitwidth") = std::nullopt, py::arg("signed") = true,
        py::arg("narrow") = false, py::arg("rounding_mode") = "FLOOR",
        "QONNX Trunc: v1 with 5 tensors (…, out_bitwidth), v2 with 6 (…, out_scale, out_bitwidth).");
  m.def("float_quant", &float_quant, py::arg("x"), py::arg("scale"), py::arg("exponent_bitwidth"),
        py::arg("mantissa_bitwidth"), py::arg("exponent_bias"), py::arg("max_val"),
        py::arg("rounding_mode") = "ROUND", py::arg("has_inf") = false, py::arg("has_nan") = false,
        py::arg("saturation") = true, "QONNX FloatQuant (minifloat quantize-dequantize) on float32 arrays.");
}

}  // namespace ortquant::py_bindings
