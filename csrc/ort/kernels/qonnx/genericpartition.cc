// QONNX GenericPartition is not supported (decision 8): it names another ONNX file to execute with qonnx's
// executor. The op is registered only so that a model using it fails at session creation with a clear message
// naming the node, instead of onnxruntime's generic "unknown op".
#include "ort/kernels/qonnx/qonnx_ops.h"

namespace ortquant::ort {

OpSpec genericpartition_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {var(kAny)};
  s.variadic_min_arity = 0;
  s.variadic_homogeneous = false;
  s.outputs = {var(kAny)};
  s.factory = [](const KernelInfo& info) -> std::unique_ptr<OpKernel> {
    const std::string model = info.attr_string("model", "");
    throw_error("GenericPartition is not supported by ortquant: it runs another ONNX model",
                model.empty() ? std::string() : " ('" + model + "')",
                " through qonnx's executor; inline the partition's nodes into the graph instead");
  };
  // Declares every output float32 of unknown shape, so that onnxruntime's type inference accepts a graph whose
  // outputs carry no type (a malformed model) and session creation reaches the factory above and its message. The
  // number of outputs is not in the inference context: declare until onnxruntime refuses the index.
  s.infer = [](const InferContext& ctx) {
    for (size_t i = 0; i < 4096; ++i) {
      InferContext::Dims d;
      d.dims = {-1};
      d.sym = {InferContext::fresh_dim()};
      try {
        ctx.set_output(i, kFloat, d);
      } catch (const Error&) {
        return;
      }
    }
  };
  return s;
}

}  // namespace ortquant::ort
