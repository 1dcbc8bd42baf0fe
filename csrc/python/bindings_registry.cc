// The list of per-family binding registrations (one line per family).
#include "python/bindings.h"

namespace ortquant::py_bindings {

void register_qonnx_structural(pybind11::module_& m);
void register_qonnx_elementwise(pybind11::module_& m);
void register_gemm(pybind11::module_& m);
void register_linger(pybind11::module_& m);
void register_ngraph(pybind11::module_& m);
void register_linger_rnn(pybind11::module_& m);
void register_integer(pybind11::module_& m);

void register_all(pybind11::module_& m) {
  register_qonnx_structural(m);
  register_qonnx_elementwise(m);
  register_gemm(m);
  register_linger(m);
  register_ngraph(m);
  register_linger_rnn(m);
  register_integer(m);
}

}  // namespace ortquant::py_bindings
