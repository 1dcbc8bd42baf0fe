// Bindings of the structural QONNX kernels whose vector paths the tests exercise per ISA:
// MultiThreshold and XnorPopcountMatMul.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/qonnx/multithreshold.h"
#include "core/qonnx/xnorpopcount.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

py::array_t<float> multithreshold(const py::array& x_in, const py::array& t_in, float out_scale, float out_bias,
                                  const std::string& data_layout, int64_t chunk) {
  auto x = as_f32(x_in);
  auto t = as_f32(t_in);
  if (t.ndim() != 2) throw Error("thresholds must be 2-D");
  const bool channels_last = !data_layout.empty() && data_layout.back() == 'C';
  const Shape shape = shape_of(x);
  if (shape.empty() || (!channels_last && shape.size() < 2)) throw Error("input has no channel axis");
  const size_t axis = channels_last ? shape.size() - 1 : 1;
  qonnx::ThresholdView view;
  view.channels = shape[axis];
  if (!channels_last)
    for (size_t d = 2; d < shape.size(); ++d) view.inner *= shape[d];
  const int64_t rows = t.shape(0);
  if (rows != 1 && rows != view.channels) throw Error("thresholds need 1 row or one per channel");
  py::array_t<float> y(shape);
  {
    py::gil_scoped_release nogil;
    const qonnx::ThresholdTable table = qonnx::prepare_thresholds(t.data(), rows, t.shape(1));
    const int64_t total = shape_size(shape);
    const int64_t step = chunk > 0 ? chunk : std::max<int64_t>(total, 1);
    for (int64_t b = 0; b < total; b += step)
      qonnx::multithreshold(table, view, x.data(), y.mutable_data(), b, std::min(total, b + step), out_scale, out_bias);
  }
  return y;
}

py::array_t<float> xnor_popcount_matmul(const py::array& a_in, const py::array& b_in) {
  auto a = as_f32(a_in);
  auto b = as_f32(b_in);
  if (b.ndim() != 2) throw Error("B must be 2-D (K, N)");
  if (a.ndim() < 1 || a.shape(a.ndim() - 1) != b.shape(0)) throw Error("A must be (..., K) with K = rows of B");
  const int64_t k = b.shape(0);
  Shape shape = shape_of(a);
  shape.pop_back();
  const int64_t m = shape_size(shape);
  shape.push_back(b.shape(1));
  py::array_t<float> y(shape);
  const qonnx::BitRows bits = qonnx::pack_bit_columns(b.data(), k, b.shape(1), "B");
  std::vector<uint64_t> a_bits(static_cast<size_t>(m * bits.words));
  if (!qonnx::pack_bit_rows(a.data(), k, 0, m, a_bits.data())) qonnx::check_binary(a.data(), m, k, "A");
  {
    py::gil_scoped_release nogil;
    if (bits.rows > 0) qonnx::xnor_popcount(a_bits.data(), bits, 0, m, y.mutable_data());
  }
  return y;
}

}  // namespace

void register_qonnx_structural(py::module_& m) {
  m.def("multithreshold", &multithreshold, py::arg("x"), py::arg("thresholds"), py::arg("out_scale") = 1.0f,
        py::arg("out_bias") = 0.0f, py::arg("data_layout") = "NCHW", py::arg("chunk") = 0,
        "QONNX MultiThreshold on float32 arrays (channel axis by qonnx main's data_layout rule); chunk > 0 "
        "computes the flat output in pieces of that many elements, as parallel tasks would.");
  m.def("xnor_popcount_matmul", &xnor_popcount_matmul, py::arg("a"), py::arg("b"),
        "QONNX XnorPopcountMatMul: number of agreeing bits of {0,1} float32 rows of A (..., K) and columns of B "
        "(K, N).");
}

}  // namespace ortquant::py_bindings
