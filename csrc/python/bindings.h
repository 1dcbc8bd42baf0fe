// Shared helpers of the pybind11 bindings; each op family may add a bindings_<family>.cc that defines its
// functions in register_<family>(m), called from register_all (bindings_registry.cc).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "core/rounding.h"
#include "core/shape.h"

namespace ortquant::py_bindings {

Shape shape_of(const pybind11::array& a);
pybind11::array_t<float> as_f32(const pybind11::handle& h);
RoundMode qonnx_mode(const std::string& name);
void register_all(pybind11::module_& m);

}  // namespace ortquant::py_bindings
