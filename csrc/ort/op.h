// The only layer that talks to the onnxruntime C API. One generic OrtCustomOp (CustomOp) is filled from an
// OpSpec: V2 callbacks only, every callback returns an OrtStatus and no C++ exception crosses the ABI.
// Kernels derive from OpKernel, parse attributes and constant inputs once in their factory (KernelInfo) and
// are immutable afterwards, so one session may run on many threads.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace ortquant::ort {

// The API table of the running onnxruntime, set by RegisterCustomOps.
extern const OrtApi* g_api;

const char* dtype_name(ONNXTensorElementDataType t);
size_t dtype_size(ONNXTensorElementDataType t);

// A read-only view of a tensor (a kernel input or a constant initializer).
struct TensorView {
  ONNXTensorElementDataType dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  Shape shape;
  const void* data = nullptr;
  int64_t size() const { return shape_size(shape); }
  template <class T>
  const T* as() const { return static_cast<const T*>(data); }
};

// A tensor copied out of onnxruntime (constant parameters kept by a kernel for the session's lifetime).
struct OwnedTensor {
  ONNXTensorElementDataType dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  Shape shape;
  std::vector<uint8_t> bytes;
  TensorView view() const { return {dtype, shape, bytes.data()}; }
  static OwnedTensor copy_of(const TensorView& v);
};

// Attribute and constant-input access at kernel creation.
class KernelInfo {
 public:
  explicit KernelInfo(const OrtKernelInfo* info) : info_(info) {}
  const OrtKernelInfo* raw() const { return info_; }
  std::string node_name() const;
  size_t input_count() const;
  size_t output_count() const;
  // The node's name for input i ("" when an optional input is absent).
  std::string input_name(size_t i) const;
  bool has_input(size_t i) const { return i < input_count() && !input_name(i).empty(); }
  // Element type of input i as declared in the graph (UNDEFINED if unknown).
  ONNXTensorElementDataType input_dtype(size_t i) const;
  // Element type of output i as onnxruntime resolved it for this node (UNDEFINED if unknown).
  ONNXTensorElementDataType output_dtype(size_t i) const;

  bool has_attr(const char* name) const;
  int64_t attr_int(const char* name) const;  // required: throws Error when missing
  int64_t attr_int(const char* name, int64_t dflt) const;
  float attr_float(const char* name) const;
  float attr_float(const char* name, float dflt) const;
  std::string attr_string(const char* name) const;
  std::string attr_string(const char* name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<int64_t> attr_ints(const char* name, const std::vector<int64_t>& dflt) const;
  std::vector<float> attr_floats(const char* name) const;
  std::vector<float> attr_floats(const char* name, const std::vector<float>& dflt) const;
  // 0/1 flag attribute with a default; anything else is an error naming the attribute.
  bool attr_bool(const char* name, bool dflt) const;

  // The value of input i when it is a constant initializer, copied; nullopt otherwise.
  std::optional<OwnedTensor> constant_input(size_t i) const;

  // One step of a chain node (QChain): the view a step's kernel gets of the chain's node. Its attributes are the
  // node's attributes named prefix + name; its input 0 is the value the step before writes (of type in0, never a
  // constant); its inputs 1 .. n_inputs - 1 are the node's inputs first_input .. first_input + n_inputs - 2; one
  // output, of type out.
  KernelInfo step(std::string prefix, size_t first_input, size_t n_inputs, ONNXTensorElementDataType in0,
                  ONNXTensorElementDataType out) const;

 private:
  // Returns false if the attribute is absent; throws Error if it is present with another type.
  bool probe(OrtStatus* st, const char* name) const;
  std::string key(const char* name) const { return prefix_ + name; }
  const OrtKernelInfo* info_;
  // A step view (step()): the node's input index of the step's input i >= 1 is first_input_ + i - 1.
  bool step_ = false;
  std::string prefix_;
  size_t first_input_ = 0, n_inputs_ = 0;
  ONNXTensorElementDataType in0_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, out_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
};

// Inputs, outputs and the intra-op thread pool of one Compute call.
class KernelContext {
 public:
  // out_elem_bytes: per output, the element size onnxruntime resolved at kernel creation (0 = unknown, counted
  // as 8), used to refuse outputs over kMaxTensorBytes before onnxruntime allocates them.
  explicit KernelContext(OrtKernelContext* ctx, const std::vector<size_t>* out_elem_bytes = nullptr)
      : ctx_(ctx), out_elem_bytes_(out_elem_bytes) {}
  // One step of a chain node (QChain): input 0 is `in` (no other input); output 0 is the chain's output when
  // `last`, else written into `buf` (grown as needed, kept by the caller across calls) and described in `out`.
  struct Step {
    TensorView in;
    std::vector<uint8_t>* buf = nullptr;
    ONNXTensorElementDataType out_dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    bool last = false;
    TensorView out;  // set by output() when not last
  };
  KernelContext(const KernelContext& chain, Step* step)
      : ctx_(chain.ctx_), out_elem_bytes_(chain.out_elem_bytes_), step_(step) {}
  size_t input_count() const;
  // nullopt when an optional input is absent.
  std::optional<TensorView> input(size_t i) const;
  TensorView required_input(size_t i) const;
  // Allocates output i. Throws Error naming the output and the limit when its size overflows or exceeds
  // kMaxTensorBytes (docs/ops.md, Limits).
  void* output(size_t i, const Shape& shape) const;
  template <class T>
  T* output_as(size_t i, const Shape& shape) const { return static_cast<T*>(output(i, shape)); }
  // Runs fn(task) for task in [0, n) on onnxruntime's intra-op pool (inline without a pool). fn must not throw.
  void parallel_for(size_t n, const std::function<void(size_t)>& fn) const;
  // Splits the element range [0, total) into chunks of at least `grain` and runs fn(begin, end) on the pool.
  void parallel_range(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const;

 private:
  OrtKernelContext* ctx_;
  const std::vector<size_t>* out_elem_bytes_;
  Step* step_ = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Must be thread-safe: onnxruntime may call it concurrently. Throws Error on bad input.
  virtual void compute(KernelContext& ctx) const = 0;
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(const KernelInfo&)>;

// Type and shape inference at model load, for ops whose output dtype depends on an attribute (linger Quant
// data_bits, Requant o_bits ...): onnxruntime's own inference can only copy a fixed dtype or an input's dtype.
// Used with onnxruntime API >= 17. onnxruntime ignores errors here, so never validate: kernels do.
// onnxruntime reports an input of unknown shape as rank 0; ortquant therefore treats rank 0 as unknown and then
// declares nothing for the outputs that need it (a wrong, scalar shape could be constant-folded downstream).
class InferContext {
 public:
  // A shape at inference time: dims[i] >= 0, or -1 with sym[i] the symbolic name.
  struct Dims {
    std::vector<int64_t> dims;
    std::vector<std::string> sym;
    size_t rank() const { return dims.size(); }
  };
  explicit InferContext(OrtShapeInferContext* ctx) : ctx_(ctx) {}
  size_t input_count() const;
  // Element type of input i (UNDEFINED when unknown or absent).
  ONNXTensorElementDataType input_dtype(size_t i) const;
  // Shape of input i; false when it is unknown (or rank 0, see above). Unnamed unknown dims get fresh names.
  bool input_shape(size_t i, Dims* out) const;
  int64_t attr_int(const char* name, int64_t dflt) const;
  bool has_attr(const char* name) const;
  std::vector<int64_t> attr_ints(const char* name) const;  // empty when absent or of another type
  float attr_float(const char* name, float dflt) const;
  // A symbolic dimension name used nowhere else (an unknown size that equals no other).
  static std::string fresh_dim();
  // Declares output i.
  void set_output(size_t i, ONNXTensorElementDataType t, const Dims& shape) const;
  // Declares output i as dtype t with the shape of input j; returns false (declaring nothing) when unknown.
  bool set_output_like(size_t i, ONNXTensorElementDataType t, size_t j) const;

 private:
  OrtShapeInferContext* ctx_;
};
using InferFn = void (*)(const InferContext&);

// What onnxruntime needs to know about an op: its name, inputs and outputs, and how to make a kernel.
struct OpSpec {
  struct Io {
    ONNXTensorElementDataType type;  // UNDEFINED = any type (the kernel checks)
    OrtCustomOpInputOutputCharacteristic kind = INPUT_OUTPUT_REQUIRED;
  };
  std::string name;
  std::vector<Io> inputs;
  std::vector<Io> outputs;
  int variadic_min_arity = 1;
  bool variadic_homogeneous = true;
  KernelFactory factory;
  InferFn infer = nullptr;  // optional output type inference (see InferContext)
};

// Shorthands for OpSpec::Io.
inline OpSpec::Io req(ONNXTensorElementDataType t) { return {t, INPUT_OUTPUT_REQUIRED}; }
inline OpSpec::Io opt(ONNXTensorElementDataType t) { return {t, INPUT_OUTPUT_OPTIONAL}; }
inline OpSpec::Io var(ONNXTensorElementDataType t) { return {t, INPUT_OUTPUT_VARIADIC}; }
constexpr ONNXTensorElementDataType kFloat = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
constexpr ONNXTensorElementDataType kAny = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;

// An OrtCustomOp built from an OpSpec. Objects live for the whole process.
struct CustomOp : OrtCustomOp {
  CustomOp(OpSpec spec, uint32_t api_version);
  OpSpec spec;
};

// Elements per parallel task for bandwidth-bound elementwise kernels.
constexpr int64_t kElementwiseGrain = 1 << 16;

// Error text is always valid UTF-8: bytes that are not (an attribute string echoed into a message) become \xNN.
std::string to_valid_utf8(const std::string& s);

// Helpers shared by kernels.
void expect_dtype(const TensorView& t, ONNXTensorElementDataType want, const char* what);
// Reads a one-element tensor (any float or int type) as double; throws naming `what` otherwise.
double scalar_value(const TensorView& t, const char* what);

}  // namespace ortquant::ort
