// ortquant._C: pybind11 bindings over the core kernels (no onnxruntime involved). Used by ortquant.kernels and
// by the tests to compare the C++ paths (scalar, AVX2, AVX-512) with the numpy reference.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "core/qonnx/quant.h"
#include "core/rounding.h"
#include "core/shape.h"
#include "python/bindings.h"

namespace py = pybind11;
using namespace ortquant;

namespace ortquant::py_bindings {

Shape shape_of(const py::array& a) { return Shape(a.shape(), a.shape() + a.ndim()); }

py::array_t<float> as_f32(const py::handle& h) {
  return py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(h);
}

RoundMode qonnx_mode(const std::string& name) {
  RoundMode m;
  if (!parse_qonnx_round_mode(name, &m)) throw Error("unknown rounding mode '" + name + "'");
  return m;
}

}  // namespace ortquant::py_bindings

using namespace ortquant::py_bindings;

namespace {

// A float16 array as C-contiguous binary16 data (true), or anything else as float32 (false); `keep` owns it.
bool float_operand(const py::array& a, py::array* keep) {
  if (a.dtype().kind() == 'f' && a.dtype().itemsize() == 2) {
    *keep = py::array::ensure(a, py::array::c_style);
    return true;
  }
  *keep = as_f32(a);
  return false;
}

py::array_t<float> quant(const py::array& x_in, const py::array& s_in, const py::array& z_in, const py::array& b_in,
                         bool is_signed, bool narrow, const std::string& rounding_mode) {
  py::array x, s, z;
  const bool x16 = float_operand(x_in, &x), s16 = float_operand(s_in, &s), z16 = float_operand(z_in, &z);
  const RoundMode mode = qonnx_mode(rounding_mode);
  if (b_in.size() != 1) throw Error("bitwidth must have exactly one element");
  qonnx::IntQuantBounds bounds;
  if (py::isinstance<py::array_t<int32_t>>(b_in) && b_in.dtype().kind() == 'i') {
    bounds = qonnx::int_quant_bounds_int(is_signed, narrow, *static_cast<const int32_t*>(b_in.data()));
  } else if (b_in.dtype().kind() == 'f' && b_in.dtype().itemsize() == 2) {
    py::array b = py::array::ensure(b_in, py::array::c_style);
    bounds = qonnx::int_quant_bounds_half(is_signed, narrow, *static_cast<const uint16_t*>(b.data()));
  } else {
    auto b = as_f32(b_in);
    bounds = qonnx::int_quant_bounds(is_signed, narrow, *b.data());
  }
  const Shape out = broadcast_shapes({shape_of(x), shape_of(s), shape_of(z), shape_of(b_in)});
  const BroadcastPlan plan = make_broadcast_plan(out, {shape_of(x), shape_of(s), shape_of(z)});
  py::array_t<float> y(out);
  {
    py::gil_scoped_release nogil;
    if (!x16 && !s16 && !z16) {
      qonnx::int_quant(plan, static_cast<const float*>(x.data()), static_cast<const float*>(s.data()),
                       static_cast<const float*>(z.data()), y.mutable_data(), 0, plan.total, bounds, mode);
    } else {
      qonnx::int_quant_mixed(plan, {x.data(), x16}, {s.data(), s16}, {z.data(), z16}, y.mutable_data(), 0,
                             plan.total, bounds, mode);
    }
  }
  return y;
}

py::array_t<float> round_py(const py::array& x_in, const std::string& mode_name, bool ngraph) {
  auto x = as_f32(x_in);
  RoundMode m;
  if (ngraph ? !parse_ngraph_round_mode(mode_name, &m) : !parse_qonnx_round_mode(mode_name, &m))
    throw Error("unknown rounding mode '" + mode_name + "'");
  py::array_t<float> y(shape_of(x));
  const float* xp = x.data();
  float* yp = y.mutable_data();
  for (py::ssize_t i = 0; i < x.size(); ++i) yp[i] = round_value(m, xp[i]);
  return y;
}

void set_isa(const std::string& name) {
  if (name.empty()) {
    clear_isa_override();
    return;
  }
  if (!set_path_override(name)) throw Error("unknown ISA '" + name + "' (scalar, avx2, avxvnni, avx512, avx512vnni)");
}

// The paths set_isa can select in this build, in the order scalar, avx2, avxvnni, avx512, avx512vnni.
std::vector<std::string> isas(bool emulated_only) {
  std::vector<std::string> out;
  for (const char* name : {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni"})
    if (path_available(name) && !(emulated_only && path_native(name))) out.emplace_back(name);
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ortquant core kernels on numpy arrays (no onnxruntime)";
  py::register_exception<Error>(m, "OrtQuantError", PyExc_ValueError);
  m.def("detected_isa", [] { return std::string(isa_name(detected_isa())); },
        "The best kernel path this CPU supports: scalar, avx2, avx512 or avx512vnni.");
  m.def("active_isa", [] { return std::string(active_path_name()); },
        "The kernel path in use (after ORTQUANT_ISA and set_isa).");
  m.def("available_isas", [] { return isas(false); },
        "The kernel paths set_isa can select in this build (those of the CPU, plus the emulated ones in a build\n"
        "with ORTQUANT_EMULATE_ISAS).");
  m.def("emulated_isas", [] { return isas(true); },
        "The paths of available_isas() this CPU lacks, run through SIMDe's portable intrinsics (test builds only).");
  m.def("set_isa", &set_isa, py::arg("name"),
        "Force a kernel path no better than `name` in this process; '' restores automatic choice.");
  m.def("quant", &quant, py::arg("x"), py::arg("scale"), py::arg("zeropt"), py::arg("bitwidth"),
        py::arg("signed") = true, py::arg("narrow") = false, py::arg("rounding_mode") = "ROUND",
        "QONNX Quant/IntQuant with numpy broadcasting: x, scale, zeropt float32 or float16 each (numpy's step-by-step\n"
        "promotion), bitwidth float32, int32 or float16; float32 output.");
  m.def("round", &round_py, py::arg("x"), py::arg("mode"), py::arg("ngraph") = false,
        "Round float32 values with a QONNX (or, with ngraph=True, nGraph) rounding-mode name.");
  ortquant::py_bindings::register_all(m);
}
