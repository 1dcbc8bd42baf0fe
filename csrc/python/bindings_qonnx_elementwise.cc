// ortquant._C bindings of the QONNX elementwise ops (BipolarQuant so far).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "core/qonnx/bipolar_quant.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

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

}  // namespace

void register_qonnx_elementwise(py::module_& m) {
  m.def("bipolar_quant", &bipolar_quant, py::arg("x"), py::arg("scale"),
        "QONNX BipolarQuant on float32 arrays: (x >= 0 ? 1 : -1) * scale, numpy broadcasting.");
}

}  // namespace ortquant::py_bindings
