// Bindings of the structural QONNX kernels whose vector paths the tests exercise per ISA:
// MultiThreshold, XnorPopcountMatMul, MaxPoolNHWC, QuantAvgPool2d.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/qonnx/maxpoolnhwc.h"
#include "core/qonnx/multithreshold.h"
#include "core/qonnx/quantavgpool2d.h"
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

qonnx::Pool2dParams pool_params(const std::vector<int64_t>& kernel, const std::vector<int64_t>& pads,
                                const std::vector<int64_t>& strides, bool ceil_mode) {
  if (kernel.size() != 2 || pads.size() != 4 || strides.size() != 2)
    throw Error("kernel and strides need 2 values, pads 4");
  qonnx::Pool2dParams p;
  p.kernel_h = kernel[0];
  p.kernel_w = kernel[1];
  p.stride_h = strides[0];
  p.stride_w = strides[1];
  p.pad_top = pads[0];
  p.pad_left = pads[1];
  p.pad_bottom = pads[2];
  p.pad_right = pads[3];
  p.ceil_mode = ceil_mode;
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_top < 0 || p.pad_left < 0 ||
      p.pad_bottom < 0 || p.pad_right < 0)
    throw Error("kernel and strides must be >= 1, pads >= 0");
  return p;
}

py::array_t<float> maxpool_nhwc(const py::array& x_in, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& pads, const std::vector<int64_t>& strides, bool ceil_mode) {
  auto x = as_f32(x_in);
  const qonnx::Pool2dParams p = pool_params(kernel, pads, strides, ceil_mode);
  if (p.pad_top >= p.kernel_h || p.pad_bottom >= p.kernel_h || p.pad_left >= p.kernel_w || p.pad_right >= p.kernel_w)
    throw Error("pads must be smaller than the kernel");
  const qonnx::Pool2dDims d = qonnx::pool2d_dims(shape_of(x), p, true);
  py::array_t<float> y(Shape{d.n, d.oh, d.ow, d.c});
  {
    py::gil_scoped_release nogil;
    qonnx::maxpool_nhwc(x.data(), y.mutable_data(), d, p, 0, d.n * d.oh * d.ow);
  }
  return y;
}

py::array_t<float> quant_avgpool2d(const py::array& x_in, int64_t kernel, int64_t stride, int64_t ibits, int64_t obits,
                                   const std::string& data_layout) {
  auto x = as_f32(x_in);
  if (data_layout != "NCHW" && data_layout != "NHWC") throw Error("data_layout must be NCHW or NHWC");
  if (stride < 1) throw Error("stride must be >= 1");
  qonnx::QuantAvgPoolParams p;
  p.kernel = kernel;
  p.stride = stride;
  p.shift = qonnx::quant_avgpool_shift(ibits, obits, kernel);
  const bool nhwc = data_layout == "NHWC";
  const qonnx::Pool2dDims d = qonnx::pool2d_dims(shape_of(x), p.geometry(), nhwc);
  py::array_t<float> y(nhwc ? Shape{d.n, d.oh, d.ow, d.c} : Shape{d.n, d.c, d.oh, d.ow});
  {
    py::gil_scoped_release nogil;
    if (nhwc) {
      qonnx::quant_avgpool_nhwc(x.data(), y.mutable_data(), d, p, 0, d.n * d.oh * d.ow);
    } else {
      std::vector<float> scratch(static_cast<size_t>(d.ow));
      qonnx::quant_avgpool_nchw(x.data(), y.mutable_data(), d, p, scratch.data(), 0, d.n * d.c * d.oh);
    }
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
  m.def("maxpool_nhwc", &maxpool_nhwc, py::arg("x"), py::arg("kernel_shape"), py::arg("pads"), py::arg("strides"),
        py::arg("ceil_mode") = false, "QONNX MaxPoolNHWC on a float32 NHWC array (pads [top, left, bottom, right]).");
  m.def("quant_avgpool2d", &quant_avgpool2d, py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("ibits"),
        py::arg("obits"), py::arg("data_layout") = "NCHW",
        "QONNX QuantAvgPool2d: window sum, round half to even, arithmetic right shift, as float32.");
}

}  // namespace ortquant::py_bindings
