// ortquant._C bindings of nGraph Quantize/Dequantize (core/ngraph), for ortquant.kernels and the tests.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/ngraph/dequantize.h"
#include "core/ngraph/quantize.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

using ngraph::QuantType;
using ngraph::RealType;

// The element type of a numpy array as an nGraph quantized / real type.
bool quant_type_of(const py::array& a, QuantType* out) {
  const py::dtype d = a.dtype();
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'i' && size == 1) *out = QuantType::kInt8;
  else if (kind == 'u' && size == 1) *out = QuantType::kUInt8;
  else if (kind == 'i' && size == 2) *out = QuantType::kInt16;
  else if (kind == 'u' && size == 2) *out = QuantType::kUInt16;
  else if (kind == 'i' && size == 4) *out = QuantType::kInt32;
  else return false;
  return true;
}

bool real_type_of(const py::array& a, RealType* out) {
  const py::dtype d = a.dtype();
  if (d.kind() != 'f') return false;
  if (d.itemsize() == 4) *out = RealType::kFloat32;
  else if (d.itemsize() == 2) *out = RealType::kFloat16;
  else return false;
  return true;
}

void require_contiguous(const py::array& a, const char* what) {
  if (!(a.flags() & py::array::c_style)) throw_error(what, " must be C-contiguous");
}

QuantType require_quant(const py::array& a, const char* what) {
  QuantType t;
  if (!quant_type_of(a, &t)) throw_error(what, " must be int8, uint8, int16, uint16 or int32, got ", std::string(py::str(a.dtype())));
  return t;
}

RealType require_real(const py::array& a, const char* what) {
  RealType t;
  if (!real_type_of(a, &t)) throw_error(what, " must be float32 or float16, got ", std::string(py::str(a.dtype())));
  return t;
}

py::array quantize(const py::array& x, const py::array& scale, const py::array& zero_point,
                   const std::vector<int64_t>& axes, const std::string& round_mode) {
  RoundMode mode;
  if (!parse_ngraph_round_mode(round_mode, &mode)) throw_error("unknown rounding mode '", round_mode, "'");
  const RealType rt = require_real(x, "input");
  if (require_real(scale, "scale") != rt) throw_error("scale must have the input's dtype");
  const QuantType qt = require_quant(zero_point, "zero_point");
  require_contiguous(x, "input");
  require_contiguous(scale, "scale");
  require_contiguous(zero_point, "zero_point");
  ngraph::check_axes(axes);
  const Shape xs = shape_of(x);
  const std::vector<int64_t> ax = ngraph::normalize_axes(axes, xs.size());
  const Shape p = ngraph::param_shape(xs, ax, shape_of(scale), shape_of(zero_point));
  const BroadcastPlan plan = make_broadcast_plan(xs, {xs, p});
  py::array y(zero_point.dtype(), xs);
  void* yp = y.mutable_data();
  {
    py::gil_scoped_release nogil;
    ngraph::quantize(plan, rt, qt, x.data(), scale.data(), zero_point.data(), yp, 0, plan.total, mode);
  }
  return y;
}

py::array dequantize(const py::array& q, const py::array& scale, const py::array& zero_point,
                     const std::vector<int64_t>& axes) {
  const QuantType qt = require_quant(q, "input");
  if (require_quant(zero_point, "zero_point") != qt) throw_error("zero_point must have the input's dtype");
  const RealType rt = require_real(scale, "scale");
  require_contiguous(q, "input");
  require_contiguous(scale, "scale");
  require_contiguous(zero_point, "zero_point");
  ngraph::check_axes(axes);
  const Shape qs = shape_of(q);
  const std::vector<int64_t> ax = ngraph::normalize_axes(axes, qs.size());
  const Shape p = ngraph::param_shape(qs, ax, shape_of(scale), shape_of(zero_point));
  const BroadcastPlan plan = make_broadcast_plan(qs, {qs, p});
  py::array y(scale.dtype(), qs);
  void* yp = y.mutable_data();
  {
    py::gil_scoped_release nogil;
    ngraph::dequantize(plan, qt, rt, q.data(), scale.data(), zero_point.data(), yp, 0, plan.total);
  }
  return y;
}

}  // namespace

void register_ngraph(py::module_& m) {
  m.def("ngraph_quantize", &quantize, py::arg("x"), py::arg("scale"), py::arg("zero_point"), py::arg("axes"),
        py::arg("round_mode"),
        "nGraph Quantize: x float32/float16 (scale the same), output dtype = zero_point dtype "
        "(int8, uint8, int16, uint16, int32).");
  m.def("ngraph_dequantize", &dequantize, py::arg("q"), py::arg("scale"), py::arg("zero_point"), py::arg("axes"),
        "nGraph Dequantize: q and zero_point of one integer dtype, output dtype = scale dtype (float32/float16).");
}

}  // namespace ortquant::py_bindings
