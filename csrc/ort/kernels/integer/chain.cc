// ortquant.integer::QChain and QChainCodes: a chain of integer-mode layers in one node
// (python/ortquant/transforms/integer_chain.py writes them). onnxruntime spends about half a microsecond on every
// custom-op node before and after its kernel; a small network's layers take a few microseconds each, so the chain
// runs its steps one after the other inside one node instead, each step's output in a buffer the next one reads.
//
// Attributes: `steps`, the steps' op types separated by spaces (QConv, QConvCodes, QGemm, QGemmCodes,
// MaxPoolCodes, AvgPoolCodes); `step_inputs`, per step the number of its constant inputs (its inputs after X);
// each step's own attributes named "__<step>_<name>" ("__0_act_bits"). Inputs: X, then every step's constant
// inputs in step order. Each step is built by its own op's kernel, with the same checks and the same arithmetic:
// the chain gives the bits of the nodes it replaces.
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ort/kernels/integer/integer_ops.h"

namespace ortquant::ort {
namespace {

constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;

struct StepOp {
  const char* name;
  OpSpec (*spec)(const std::string&);
  size_t constants;  // its inputs after X: W, S, B (a QConv's residual R is not a chain step's)
};

// The ops a chain may hold: one data input (X; their other inputs are constants), one output.
const StepOp kStepOps[] = {
    {"QConv", &qconv_spec, 3},           {"QConvCodes", &qconv_codes_spec, 3},
    {"QGemm", &qgemm_spec, 3},           {"QGemmCodes", &qgemm_codes_spec, 3},
    {"MaxPoolCodes", &maxpool_codes_spec, 0}, {"AvgPoolCodes", &avgpool_codes_spec, 0},
};

class ChainKernel : public OpKernel {
 public:
  ChainKernel(const KernelInfo& info, bool codes_op) {
    std::vector<std::string> names;
    std::istringstream words(info.attr_string("steps"));
    for (std::string w; words >> w;) names.push_back(w);
    const std::vector<int64_t> counts = info.attr_ints("step_inputs");
    if (names.size() < 2 || names.size() > kMaxSteps)
      throw_error("attribute 'steps' must name 2 to ", kMaxSteps, " ops separated by spaces, got ", names.size());
    if (counts.size() != names.size())
      throw_error("attribute 'step_inputs' must have one count per step (", names.size(), "), got ", counts.size());
    // Errors name a step by its op and, where the node's name is its steps' names joined by '+' (as
    // integer_chain.py writes it), by that name.
    std::vector<std::string> parts;
    const std::string node = info.node_name();
    for (size_t at = 0;;) {
      const size_t plus = node.find('+', at);
      parts.push_back(node.substr(at, plus == std::string::npos ? std::string::npos : plus - at));
      if (plus == std::string::npos) break;
      at = plus + 1;
    }
    for (size_t s = 0; s < names.size(); ++s)
      labels_.push_back("step " + std::to_string(s) + " (" + names[s] +
                        (parts.size() == names.size() && !parts[s].empty() ? " '" + parts[s] + "'" : "") + ")");
    size_t next = 1;  // the node's first input not yet given to a step
    ONNXTensorElementDataType in0 = info.input_dtype(0);
    for (size_t s = 0; s < names.size(); ++s) {
      const StepOp* op = nullptr;
      for (const StepOp& o : kStepOps)
        if (names[s] == o.name) op = &o;
      if (op == nullptr)
        throw_error("attribute 'steps': step ", s, " is '", names[s], "'; a step is one of QConv, QConvCodes, QGemm, "
                    "QGemmCodes, MaxPoolCodes, AvgPoolCodes");
      const OpSpec spec = op->spec(op->name);
      if (counts[s] != static_cast<int64_t>(op->constants))
        throw_error("attribute 'step_inputs': step ", s, " (", names[s], ") takes ", op->constants,
                    " constant inputs, got ", counts[s]);
      const size_t n = static_cast<size_t>(counts[s]);
      if (next + n > info.input_count())
        throw_error("the steps take ", next + n, " inputs or more (attribute 'step_inputs'), the node has ",
                    info.input_count());
      const ONNXTensorElementDataType out = spec.outputs[0].type;
      try {
        steps_.push_back(spec.factory(info.step("__" + std::to_string(s) + "_", next, n + 1, in0, out)));
      } catch (const std::bad_alloc&) {
        throw;  // reported as running out of memory, with the size (op.cc)
      } catch (const std::exception& e) {
        throw_error(labels_[s], ": ", e.what());
      }
      out_dtype_.push_back(out);
      names_.push_back(names[s]);
      next += n;
      in0 = out;
    }
    if (next != info.input_count())
      throw_error("the steps take ", next, " inputs (attribute 'step_inputs'), the node has ", info.input_count());
    if ((out_dtype_.back() == kI8) != codes_op)
      throw_error(codes_op ? "QChainCodes writes int8 codes: its last step must be QConvCodes, QGemmCodes or "
                             "MaxPoolCodes, got "
                           : "QChain writes float32 values: its last step must be QConv, QGemm or AvgPoolCodes, got ",
                  names_.back());
  }

  void compute(KernelContext& ctx) const override {
    // Two buffers in turn: step s writes one while it reads the other (kept by the thread across runs).
    thread_local std::vector<uint8_t> t_buf[2];
    TensorView cur = ctx.required_input(0);
    for (size_t s = 0; s < steps_.size(); ++s) {
      KernelContext::Step io;
      io.in = std::move(cur);
      io.buf = &t_buf[s % 2];
      io.out_dtype = out_dtype_[s];
      io.last = s + 1 == steps_.size();
      KernelContext step(ctx, &io);
      try {
        steps_[s]->compute(step);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        throw_error(labels_[s], ": ", e.what());
      }
      cur = std::move(io.out);
    }
  }

 private:
  static constexpr size_t kMaxSteps = 256;
  std::vector<std::unique_ptr<OpKernel>> steps_;
  std::vector<ONNXTensorElementDataType> out_dtype_;
  std::vector<std::string> names_;
  std::vector<std::string> labels_;  // "step 1 (QConvCodes 'conv2')", for errors at run time
};

}  // namespace

OpSpec qchain_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), var(kAny)};  // X, then the steps' constants (of several types)
  s.variadic_min_arity = 1;
  s.variadic_homogeneous = false;
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<ChainKernel>(info, false); };
  return s;
}

OpSpec qchain_codes_spec(const std::string& name) {
  OpSpec s = qchain_spec(name);
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<ChainKernel>(info, true); };
  return s;
}

}  // namespace ortquant::ort
