// ortquant._C bindings of the linger recurrent cores (LSTMInt, GRUInt) on numpy arrays, for the tests and for
// ortquant.kernels. Same code path as the onnxruntime kernels, minus the adapter.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/linger/gru.h"
#include "core/isa.h"
#include "core/linger/lstm.h"
#include "core/linger/rnn_cell_kernels.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace ortquant::py_bindings {
namespace {

using I8 = py::array_t<int8_t, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;

py::tuple run(bool lstm, const I8& x, const I8& w_ih, const I8& w_hh, const std::optional<I32>& b_ih,
              const std::optional<I32>& b_hh, const std::optional<I64>& lengths, const std::optional<F32>& h0,
              const std::optional<F32>& c0, bool batch_first, bool go_forward, double scale_i, double scale_h,
              double scale_iw, double scale_hw, std::optional<double> scale_o, int o_bits, int data_bits) {
  if (x.ndim() != 3) throw Error("x must be 3-D");
  const int64_t gates = lstm ? 4 : 3;
  linger::RnnAttrs a;
  a.hidden_size = w_hh.ndim() == 2 ? w_hh.shape(1) : 0;
  a.input_size = x.shape(2);
  a.batch_first = batch_first;
  a.go_forward = go_forward;
  a.scale_i = scale_i;
  a.scale_h = scale_h;
  a.scale_iw = scale_iw;
  a.scale_hw = scale_hw;
  a.quantized_output = scale_o.has_value();
  a.scale_o = scale_o.value_or(0.0);
  a.o_bits = o_bits;
  a.data_bits = data_bits;
  const int64_t h = a.hidden_size, g = gates * h;
  if (w_ih.ndim() != 2 || w_ih.shape(0) != g || w_ih.shape(1) != a.input_size) throw Error("bad W_ih shape");
  if (w_hh.ndim() != 2 || w_hh.shape(0) != g) throw Error("bad W_hh shape");
  if ((b_ih && b_ih->size() != g) || (b_hh && b_hh->size() != g)) throw Error("bad bias shape");
  const linger::RnnPlan plan = lstm ? linger::make_lstm_plan(a) : linger::make_gru_plan(a);
  const linger::RnnWeights w = linger::make_rnn_weights(plan, w_ih.data(), w_hh.data(),
                                                        b_ih ? b_ih->data() : nullptr, b_hh ? b_hh->data() : nullptr);
  const int64_t t_len = batch_first ? x.shape(1) : x.shape(0), batch = batch_first ? x.shape(0) : x.shape(1);
  std::vector<int32_t> lens;
  int64_t t_out = t_len;
  if (lengths) {
    if (lengths->size() != batch) throw Error("lengths must have one entry per sample");
    t_out = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t l = lengths->data()[b];
      if (l < 1 || l > t_len) throw Error("lengths must be in [1, T]");
      lens.push_back(static_cast<int32_t>(l));
      t_out = std::max(t_out, l);
    }
  }
  if (h0 && h0->size() != batch * h) throw Error("bad h0 size");
  if (c0 && c0->size() != batch * h) throw Error("bad c0 size");
  linger::RnnIo io;
  io.x = x.data();
  io.seq_len = t_len;
  io.batch = batch;
  io.lengths = lengths ? lens.data() : nullptr;
  io.h0 = h0 ? h0->data() : nullptr;
  io.c0 = c0 ? c0->data() : nullptr;
  io.t_out = t_out;
  const std::vector<py::ssize_t> yshape = batch_first ? std::vector<py::ssize_t>{batch, t_out, h}
                                                      : std::vector<py::ssize_t>{t_out, batch, h};
  py::array y = a.quantized_output ? py::array(py::dtype::of<int8_t>(), yshape) : py::array(py::dtype::of<float>(), yshape);
  py::array_t<float> hidden({int64_t(1), batch, h});
  py::array_t<float> cell({int64_t(1), batch, h});
  io.y = y.mutable_data();
  io.hidden = hidden.mutable_data();
  io.cell = cell.mutable_data();
  {
    py::gil_scoped_release nogil;
    if (lstm) linger::lstm_int(plan, w, io, &linger::rnn_run_inline);
    else linger::gru_int(plan, w, io, &linger::rnn_run_inline);
  }
  if (lstm) return py::make_tuple(y, hidden, cell);
  return py::make_tuple(y, hidden);
}

py::tuple activations(const I32& v) {
  py::array_t<int32_t> sig(v.size()), tanh(v.size());
  const auto fn = select_isa(&linger::scalar::gate_activations, &linger::avx2::gate_activations,
                             &linger::avx512::gate_activations);
  fn(v.data(), v.size(), linger::gate_tables(), sig.mutable_data(), tanh.mutable_data());
  return py::make_tuple(sig, tanh);
}

}  // namespace

void register_linger_rnn(py::module_& m) {
  m.def("linger_rnn_activations", &activations, py::arg("v"),
        "The LSTM/GRU gate sigmoid and tanh of the active CPU path on int32 Q11 values (saturated to int16).");
  auto bind = [&](const char* name, bool lstm, const char* doc) {
    m.def(
        name,
        [lstm](const I8& x, const I8& w_ih, const I8& w_hh, const std::optional<I32>& b_ih,
               const std::optional<I32>& b_hh, const std::optional<I64>& lengths, const std::optional<F32>& h0,
               const std::optional<F32>& c0, bool batch_first, bool go_forward, double scale_i, double scale_h,
               double scale_iw, double scale_hw, std::optional<double> scale_o, int o_bits, int data_bits) {
          return run(lstm, x, w_ih, w_hh, b_ih, b_hh, lengths, h0, c0, batch_first, go_forward, scale_i, scale_h,
                     scale_iw, scale_hw, scale_o, o_bits, data_bits);
        },
        py::arg("x"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih"), py::arg("b_hh"), py::arg("lengths"),
        py::arg("h0"), py::arg("c0"), py::arg("batch_first"), py::arg("go_forward"), py::arg("scale_i"),
        py::arg("scale_h"), py::arg("scale_iw"), py::arg("scale_hw"), py::arg("scale_o"), py::arg("o_bits"),
        py::arg("data_bits"), doc);
  };
  bind("lstm_int", true, "linger LSTMInt on numpy arrays: returns (output, hidden, cell).");
  bind("gru_int", false, "linger GRUInt on numpy arrays (c0 ignored): returns (output, hidden).");
}

}  // namespace ortquant::py_bindings
