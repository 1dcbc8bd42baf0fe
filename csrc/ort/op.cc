#include "ort/op.h"

#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

namespace ortquant::ort {

const OrtApi* g_api = nullptr;

namespace {

// Throws Error with onnxruntime's message if st is an error.
void check(OrtStatus* st) {
  if (st == nullptr) return;
  std::string msg = g_api->GetErrorMessage(st);
  g_api->ReleaseStatus(st);
  throw Error(msg);
}

TensorView view_of(const OrtValue* v) {
  TensorView t;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  check(g_api->GetTensorTypeAndShape(v, &info));
  size_t rank = 0;
  OrtStatus* st = g_api->GetTensorElementType(info, &t.dtype);
  if (st == nullptr) st = g_api->GetDimensionsCount(info, &rank);
  if (st == nullptr) {
    t.shape.resize(rank);
    st = g_api->GetDimensions(info, t.shape.data(), rank);
  }
  g_api->ReleaseTensorTypeAndShapeInfo(info);
  check(st);
  void* data = nullptr;
  check(g_api->GetTensorMutableData(const_cast<OrtValue*>(v), &data));
  t.data = data;
  return t;
}

std::string fetch_string(const std::function<OrtStatus*(char*, size_t*)>& call) {
  size_t n = 0;
  check(call(nullptr, &n));
  std::string s(n, '\0');
  check(call(s.data(), &n));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

const char* dtype_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "float64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    default: return "unsupported type";
  }
}

size_t dtype_size(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return 8;
    default: return 0;
  }
}

OwnedTensor OwnedTensor::copy_of(const TensorView& v) {
  OwnedTensor t;
  t.dtype = v.dtype;
  t.shape = v.shape;
  if (dtype_size(v.dtype) == 0 && v.size() != 0)
    throw_error("constant input of type ", dtype_name(v.dtype), " is not supported");
  const size_t n = static_cast<size_t>(
      checked_bytes(v.size(), static_cast<int64_t>(dtype_size(v.dtype)), "a copy of a constant input"));
  t.bytes.resize(n);
  if (n) std::memcpy(t.bytes.data(), v.data, n);
  return t;
}

// ---- KernelInfo ------------------------------------------------------------------------------------------

std::string KernelInfo::node_name() const {
  return fetch_string([&](char* out, size_t* n) { return g_api->KernelInfo_GetNodeName(info_, out, n); });
}

KernelInfo KernelInfo::step(std::string prefix, size_t first_input, size_t n_inputs, ONNXTensorElementDataType in0,
                            ONNXTensorElementDataType out) const {
  KernelInfo k(info_);
  k.step_ = true;
  k.prefix_ = std::move(prefix);
  k.first_input_ = first_input;
  k.n_inputs_ = n_inputs;
  k.in0_ = in0;
  k.out_ = out;
  return k;
}

size_t KernelInfo::input_count() const {
  if (step_) return n_inputs_;
  size_t n = 0;
  check(g_api->KernelInfo_GetInputCount(info_, &n));
  return n;
}

size_t KernelInfo::output_count() const {
  if (step_) return 1;
  size_t n = 0;
  check(g_api->KernelInfo_GetOutputCount(info_, &n));
  return n;
}

std::string KernelInfo::input_name(size_t i) const {
  if (step_ && i == 0) return "(the chain's value)";
  if (step_ && i >= n_inputs_) return "";
  if (step_) i = first_input_ + i - 1;
  return fetch_string([&](char* out, size_t* n) { return g_api->KernelInfo_GetInputName(info_, i, out, n); });
}

ONNXTensorElementDataType KernelInfo::input_dtype(size_t i) const {
  if (step_ && i == 0) return in0_;
  if (step_ && i >= n_inputs_) return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  if (step_) i = first_input_ + i - 1;
  OrtTypeInfo* ti = nullptr;
  check(g_api->KernelInfo_GetInputTypeInfo(info_, i, &ti));
  const OrtTensorTypeAndShapeInfo* tsi = nullptr;
  ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtStatus* st = g_api->CastTypeInfoToTensorInfo(ti, &tsi);
  if (st == nullptr && tsi != nullptr) st = g_api->GetTensorElementType(tsi, &t);
  g_api->ReleaseTypeInfo(ti);
  check(st);
  return t;
}

ONNXTensorElementDataType KernelInfo::output_dtype(size_t i) const {
  if (step_) return i == 0 ? out_ : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtTypeInfo* ti = nullptr;
  check(g_api->KernelInfo_GetOutputTypeInfo(info_, i, &ti));
  const OrtTensorTypeAndShapeInfo* tsi = nullptr;
  ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtStatus* st = g_api->CastTypeInfoToTensorInfo(ti, &tsi);
  if (st == nullptr && tsi != nullptr) st = g_api->GetTensorElementType(tsi, &t);
  g_api->ReleaseTypeInfo(ti);
  check(st);
  return t;
}

bool KernelInfo::probe(OrtStatus* st, const char* name) const {
  if (st == nullptr) return true;
  const OrtErrorCode code = g_api->GetErrorCode(st);
  std::string msg = g_api->GetErrorMessage(st);
  g_api->ReleaseStatus(st);
  // onnxruntime reports a missing attribute as "No attribute with name:'x'is defined." and a type mismatch
  // as "Attribute name and type don't match" (both ORT_FAIL).
  if (msg.find("No attribute with name") != std::string::npos) return false;
  (void)code;
  throw_error("attribute '", name, "' has the wrong type (", msg, ")");
}

bool KernelInfo::has_attr(const char* name) const {
  // Probe through every getter: an attribute exists if any type succeeds or reports a type mismatch.
  int64_t i = 0;
  OrtStatus* st = g_api->KernelInfoGetAttribute_int64(info_, key(name).c_str(), &i);
  if (st == nullptr) return true;
  std::string msg = g_api->GetErrorMessage(st);
  g_api->ReleaseStatus(st);
  return msg.find("No attribute with name") == std::string::npos;
}

int64_t KernelInfo::attr_int(const char* name) const {
  int64_t v = 0;
  if (!probe(g_api->KernelInfoGetAttribute_int64(info_, key(name).c_str(), &v), name))
    throw_error("required attribute '", name, "' is missing");
  return v;
}

int64_t KernelInfo::attr_int(const char* name, int64_t dflt) const {
  int64_t v = 0;
  return probe(g_api->KernelInfoGetAttribute_int64(info_, key(name).c_str(), &v), name) ? v : dflt;
}

float KernelInfo::attr_float(const char* name) const {
  float v = 0;
  if (!probe(g_api->KernelInfoGetAttribute_float(info_, key(name).c_str(), &v), name))
    throw_error("required attribute '", name, "' is missing");
  return v;
}

float KernelInfo::attr_float(const char* name, float dflt) const {
  float v = 0;
  return probe(g_api->KernelInfoGetAttribute_float(info_, key(name).c_str(), &v), name) ? v : dflt;
}

std::string KernelInfo::attr_string(const char* name) const {
  size_t n = 0;
  if (!probe(g_api->KernelInfoGetAttribute_string(info_, key(name).c_str(), nullptr, &n), name))
    throw_error("required attribute '", name, "' is missing");
  std::string s(n, '\0');
  check(g_api->KernelInfoGetAttribute_string(info_, key(name).c_str(), s.data(), &n));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string KernelInfo::attr_string(const char* name, const std::string& dflt) const {
  size_t n = 0;
  if (!probe(g_api->KernelInfoGetAttribute_string(info_, key(name).c_str(), nullptr, &n), name)) return dflt;
  std::string s(n, '\0');
  check(g_api->KernelInfoGetAttribute_string(info_, key(name).c_str(), s.data(), &n));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::vector<int64_t> KernelInfo::attr_ints(const char* name) const {
  size_t n = 0;
  if (!probe(g_api->KernelInfoGetAttributeArray_int64(info_, key(name).c_str(), nullptr, &n), name))
    throw_error("required attribute '", name, "' is missing");
  std::vector<int64_t> v(n);
  if (n) check(g_api->KernelInfoGetAttributeArray_int64(info_, key(name).c_str(), v.data(), &n));
  return v;
}

std::vector<int64_t> KernelInfo::attr_ints(const char* name, const std::vector<int64_t>& dflt) const {
  return has_attr(name) ? attr_ints(name) : dflt;
}

std::vector<float> KernelInfo::attr_floats(const char* name) const {
  size_t n = 0;
  if (!probe(g_api->KernelInfoGetAttributeArray_float(info_, key(name).c_str(), nullptr, &n), name))
    throw_error("required attribute '", name, "' is missing");
  std::vector<float> v(n);
  if (n) check(g_api->KernelInfoGetAttributeArray_float(info_, key(name).c_str(), v.data(), &n));
  return v;
}

std::vector<float> KernelInfo::attr_floats(const char* name, const std::vector<float>& dflt) const {
  return has_attr(name) ? attr_floats(name) : dflt;
}

bool KernelInfo::attr_bool(const char* name, bool dflt) const {
  const int64_t v = attr_int(name, dflt ? 1 : 0);
  if (v != 0 && v != 1) throw_error("attribute '", name, "' must be 0 or 1, got ", v);
  return v == 1;
}

std::optional<OwnedTensor> KernelInfo::constant_input(size_t i) const {
  if (!has_input(i) || (step_ && i == 0)) return std::nullopt;
  if (step_) i = first_input_ + i - 1;
  int is_const = 0;
  const OrtValue* v = nullptr;
  check(g_api->KernelInfoGetConstantInput_tensor(info_, i, &is_const, &v));
  if (!is_const || v == nullptr) return std::nullopt;
  return OwnedTensor::copy_of(view_of(v));
}

// ---- KernelContext ---------------------------------------------------------------------------------------

size_t KernelContext::input_count() const {
  if (step_ != nullptr) return 1;
  size_t n = 0;
  check(g_api->KernelContext_GetInputCount(ctx_, &n));
  return n;
}

std::optional<TensorView> KernelContext::input(size_t i) const {
  if (step_ != nullptr) return i == 0 ? std::optional<TensorView>(step_->in) : std::nullopt;
  if (i >= input_count()) return std::nullopt;
  const OrtValue* v = nullptr;
  check(g_api->KernelContext_GetInput(ctx_, i, &v));
  if (v == nullptr) return std::nullopt;
  return view_of(v);
}

TensorView KernelContext::required_input(size_t i) const {
  auto t = input(i);
  if (!t) throw_error("input ", i, " is missing");
  return std::move(*t);  // (no second copy of the shape)
}

void* KernelContext::output(size_t i, const Shape& shape) const {
  size_t es = 8;
  if (out_elem_bytes_ != nullptr && i < out_elem_bytes_->size() && (*out_elem_bytes_)[i] != 0)
    es = (*out_elem_bytes_)[i];
  // O(rank) per call; the message is only built on the error path.
  const int64_t n = shape_size(shape);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(es), &bytes) || bytes > kMaxTensorBytes) {
    const std::string what = "output " + std::to_string(i) + " of shape " + shape_str(shape);
    checked_bytes(n, static_cast<int64_t>(es), what.c_str());  // throws naming the size and the limit
  }
  if (step_ != nullptr && !step_->last) {  // a chain step's output: the chain's buffer
    if (i != 0) throw_error("a chain step has one output, asked for output ", i);
    const int64_t own = checked_bytes(n, static_cast<int64_t>(dtype_size(step_->out_dtype)), "a chain step's output");
    // 64-byte aligned, as onnxruntime's own allocations (malloc's are 16-byte aligned).
    constexpr size_t kAlign = 64;
    const size_t need = static_cast<size_t>(own) + kAlign;
    if (step_->buf->size() < need) step_->buf->resize(need);
    const auto at = reinterpret_cast<uintptr_t>(step_->buf->data());
    void* data = step_->buf->data() + (kAlign - at % kAlign) % kAlign;
    step_->out = {step_->out_dtype, shape, data};
    return data;
  }
  OrtValue* v = nullptr;
  if (OrtStatus* st = g_api->KernelContext_GetOutput(ctx_, i, shape.data(), shape.size(), &v)) {
    const std::string msg = g_api->GetErrorMessage(st);
    g_api->ReleaseStatus(st);
    throw_error("could not allocate output ", i, " of shape ", shape_str(shape), " (", bytes, " bytes): ", msg);
  }
  void* data = nullptr;
  check(g_api->GetTensorMutableData(v, &data));
  return data;
}

namespace {
struct ParallelJob {
  const std::function<void(size_t)>* fn;
};
void run_task(void* user, size_t i) { (*static_cast<ParallelJob*>(user)->fn)(i); }
}  // namespace

void KernelContext::parallel_for(size_t n, const std::function<void(size_t)>& fn) const {
  if (n == 0) return;
  if (n == 1) {
    fn(0);
    return;
  }
  ParallelJob job{&fn};
  check(g_api->KernelContext_ParallelFor(ctx_, &run_task, n, 0, &job));
}

void KernelContext::parallel_range(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (total <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(total / grain, 64));
  if (tasks == 1) {
    fn(0, total);
    return;
  }
  // Chunk boundaries aligned to 64 elements so vector loops see whole vectors.
  const int64_t chunk = ((total + tasks - 1) / tasks + 63) / 64 * 64;
  const int64_t n = (total + chunk - 1) / chunk;
  parallel_for(static_cast<size_t>(n), [&](size_t t) {
    const int64_t b = static_cast<int64_t>(t) * chunk;
    fn(b, std::min(total, b + chunk));
  });
}

// ---- helpers ---------------------------------------------------------------------------------------------

void expect_dtype(const TensorView& t, ONNXTensorElementDataType want, const char* what) {
  if (t.dtype != want) throw_error(what, " must be ", dtype_name(want), ", got ", dtype_name(t.dtype));
}

std::string to_valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) len = 1, cp = c;
    else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF (what Python's decoder rejects).
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
      ok = false;
    if (ok && c == 0) ok = false;  // an embedded NUL would cut the C string
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      i += 1;
    }
  }
  return out;
}

double scalar_value(const TensorView& t, const char* what) {
  if (t.size() != 1) throw_error(what, " must have exactly one element, got shape ", shape_str(t.shape));
  switch (t.dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return *t.as<float>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return *t.as<double>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return *t.as<int8_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return *t.as<uint8_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return *t.as<int16_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return *t.as<uint16_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return *t.as<int32_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return static_cast<double>(*t.as<int64_t>());
    default: throw_error(what, " has unsupported type ", dtype_name(t.dtype));
  }
}

// ---- InferContext ----------------------------------------------------------------------------------------

namespace {
std::atomic<uint64_t> g_fresh_dim{0};
}  // namespace

std::string InferContext::fresh_dim() { return "ortquant_unk_" + std::to_string(g_fresh_dim.fetch_add(1)); }

size_t InferContext::input_count() const {
  size_t n = 0;
  check(g_api->ShapeInferContext_GetInputCount(ctx_, &n));
  return n;
}

ONNXTensorElementDataType InferContext::input_dtype(size_t i) const {
  ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  if (i >= input_count()) return t;
  OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context
  OrtStatus* st = g_api->ShapeInferContext_GetInputTypeShape(ctx_, i, &info);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return t;
  }
  if (info != nullptr) check(g_api->GetTensorElementType(info, &t));
  return t;
}

bool InferContext::input_shape(size_t i, Dims* out) const {
  if (i >= input_count()) return false;
  OrtTensorTypeAndShapeInfo* in = nullptr;  // owned by the context
  OrtStatus* st = g_api->ShapeInferContext_GetInputTypeShape(ctx_, i, &in);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return false;
  }
  size_t rank = 0;
  check(g_api->GetDimensionsCount(in, &rank));
  if (rank == 0) return false;
  out->dims.assign(rank, 0);
  std::vector<const char*> sym(rank, nullptr);
  check(g_api->GetDimensions(in, out->dims.data(), rank));
  check(g_api->GetSymbolicDimensions(in, sym.data(), rank));
  out->sym.assign(rank, std::string());
  for (size_t d = 0; d < rank; ++d) {
    if (sym[d] != nullptr && sym[d][0] != '\0') {
      out->sym[d] = sym[d];
      out->dims[d] = -1;
    } else if (out->dims[d] < 0) {
      out->sym[d] = fresh_dim();
      out->dims[d] = -1;
    }
  }
  return true;
}

int64_t InferContext::attr_int(const char* name, int64_t dflt) const {
  const OrtOpAttr* attr = nullptr;
  OrtStatus* st = g_api->ShapeInferContext_GetAttribute(ctx_, name, &attr);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return dflt;
  }
  int64_t v = dflt;
  size_t n = 0;
  st = g_api->ReadOpAttr(attr, ORT_OP_ATTR_INT, &v, sizeof(v), &n);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return dflt;
  }
  return v;
}

bool InferContext::has_attr(const char* name) const {
  const OrtOpAttr* attr = nullptr;
  OrtStatus* st = g_api->ShapeInferContext_GetAttribute(ctx_, name, &attr);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return false;
  }
  return attr != nullptr;
}

std::vector<int64_t> InferContext::attr_ints(const char* name) const {
  const OrtOpAttr* attr = nullptr;
  OrtStatus* st = g_api->ShapeInferContext_GetAttribute(ctx_, name, &attr);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return {};
  }
  size_t n = 0;
  st = g_api->ReadOpAttr(attr, ORT_OP_ATTR_INTS, nullptr, 0, &n);  // reports the size needed
  if (st != nullptr) g_api->ReleaseStatus(st);
  if (n == 0 || n % sizeof(int64_t) != 0) return {};
  std::vector<int64_t> v(n / sizeof(int64_t));
  st = g_api->ReadOpAttr(attr, ORT_OP_ATTR_INTS, v.data(), n, &n);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return {};
  }
  return v;
}

float InferContext::attr_float(const char* name, float dflt) const {
  const OrtOpAttr* attr = nullptr;
  OrtStatus* st = g_api->ShapeInferContext_GetAttribute(ctx_, name, &attr);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return dflt;
  }
  float v = dflt;
  size_t n = 0;
  st = g_api->ReadOpAttr(attr, ORT_OP_ATTR_FLOAT, &v, sizeof(v), &n);
  if (st != nullptr) {
    g_api->ReleaseStatus(st);
    return dflt;
  }
  return v;
}

void InferContext::set_output(size_t i, ONNXTensorElementDataType t, const Dims& shape) const {
  const size_t rank = shape.rank();
  std::vector<const char*> sym(rank);
  for (size_t d = 0; d < rank; ++d) sym[d] = shape.sym[d].c_str();
  OrtTensorTypeAndShapeInfo* out = nullptr;
  check(g_api->CreateTensorTypeAndShapeInfo(&out));
  OrtStatus* st = g_api->SetTensorElementType(out, t);
  if (st == nullptr) st = g_api->SetDimensions(out, shape.dims.data(), rank);
  if (st == nullptr && rank) st = g_api->SetSymbolicDimensions(out, sym.data(), rank);
  if (st == nullptr) st = g_api->ShapeInferContext_SetOutputTypeShape(ctx_, i, out);
  g_api->ReleaseTensorTypeAndShapeInfo(out);
  check(st);
}

bool InferContext::set_output_like(size_t i, ONNXTensorElementDataType t, size_t j) const {
  Dims d;
  if (!input_shape(j, &d)) return false;
  set_output(i, t, d);
  return true;
}

// ---- CustomOp: the C callbacks ---------------------------------------------------------------------------

namespace {

struct KernelHolder {
  std::unique_ptr<OpKernel> kernel;
  std::string prefix;              // "OpType node 'name': "
  std::vector<size_t> out_elem;    // element size per output (0 = unknown)
};

// Every error status goes through here: valid UTF-8 always (node names and attribute strings come from the model).
OrtStatus* make_status(OrtErrorCode code, const std::string& msg) {
  return g_api->CreateStatus(code, to_valid_utf8(msg).c_str());
}

// The message of a std::bad_alloc: what was being allocated and how big, when a checked size was recorded.
std::string oom_message(const char* phase) {
  std::string m = std::string("out of memory (std::bad_alloc) ") + phase;
  const AllocationNote n = last_allocation();
  if (n.what != nullptr)
    m += "; the last buffer sized from the model was " + std::to_string(n.bytes) + " bytes for " + n.what;
  return m + " (limits: docs/ops.md)";
}

const CustomOp* self(const OrtCustomOp* op) { return static_cast<const CustomOp*>(op); }

OrtStatusPtr ORT_API_CALL create_kernel(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                                        void** kernel) {
  *kernel = nullptr;
  (void)api;
  std::string prefix = self(op)->spec.name + " node: ";
  try {
    KernelInfo ki(info);
    // An unnamed node is named by its first output, as onnxruntime's own messages and users know it.
    std::string name = ki.node_name();
    if (name.empty() && ki.output_count() > 0)
      name = fetch_string([&](char* out, size_t* n) { return g_api->KernelInfo_GetOutputName(info, 0, out, n); });
    prefix = self(op)->spec.name + " node '" + name + "': ";
    auto holder = std::make_unique<KernelHolder>();
    clear_allocation_note();
    holder->kernel = self(op)->spec.factory(ki);
    holder->prefix = prefix;
    for (size_t i = 0; i < ki.output_count(); ++i) holder->out_elem.push_back(dtype_size(ki.output_dtype(i)));
    *kernel = holder.release();
    return nullptr;
  } catch (const std::bad_alloc&) {
    return make_status(ORT_FAIL, prefix + oom_message("while creating the kernel"));
  } catch (const std::exception& e) {
    return make_status(ORT_INVALID_ARGUMENT, prefix + e.what());
  } catch (...) {
    return make_status(ORT_FAIL, prefix + "unknown error");
  }
}

OrtStatusPtr ORT_API_CALL compute_kernel(void* kernel, OrtKernelContext* context) {
  auto* h = static_cast<KernelHolder*>(kernel);
  try {
    clear_allocation_note();
    KernelContext ctx(context, &h->out_elem);
    h->kernel->compute(ctx);
    return nullptr;
  } catch (const std::bad_alloc&) {
    return make_status(ORT_FAIL, h->prefix + oom_message("while running"));
  } catch (const std::exception& e) {
    return make_status(ORT_INVALID_ARGUMENT, h->prefix + e.what());
  } catch (...) {
    return make_status(ORT_FAIL, h->prefix + "unknown error");
  }
}

void ORT_API_CALL destroy_kernel(void* kernel) { delete static_cast<KernelHolder*>(kernel); }

const char* ORT_API_CALL get_name(const OrtCustomOp* op) { return self(op)->spec.name.c_str(); }
const char* ORT_API_CALL get_ep(const OrtCustomOp*) { return "CPUExecutionProvider"; }
size_t ORT_API_CALL input_count(const OrtCustomOp* op) { return self(op)->spec.inputs.size(); }
size_t ORT_API_CALL output_count(const OrtCustomOp* op) { return self(op)->spec.outputs.size(); }
ONNXTensorElementDataType ORT_API_CALL input_type(const OrtCustomOp* op, size_t i) {
  return self(op)->spec.inputs[i].type;
}
ONNXTensorElementDataType ORT_API_CALL output_type(const OrtCustomOp* op, size_t i) {
  return self(op)->spec.outputs[i].type;
}
OrtCustomOpInputOutputCharacteristic ORT_API_CALL input_kind(const OrtCustomOp* op, size_t i) {
  return self(op)->spec.inputs[i].kind;
}
OrtCustomOpInputOutputCharacteristic ORT_API_CALL output_kind(const OrtCustomOp* op, size_t i) {
  return self(op)->spec.outputs[i].kind;
}
OrtMemType ORT_API_CALL input_mem(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL var_in_arity(const OrtCustomOp* op) { return self(op)->spec.variadic_min_arity; }
int ORT_API_CALL var_in_homog(const OrtCustomOp* op) { return self(op)->spec.variadic_homogeneous ? 1 : 0; }
int ORT_API_CALL var_out_arity(const OrtCustomOp*) { return 1; }
int ORT_API_CALL var_out_homog(const OrtCustomOp*) { return 1; }
int ORT_API_CALL start_version(const OrtCustomOp*) { return 1; }
int ORT_API_CALL end_version(const OrtCustomOp*) { return 2147483647; }

OrtStatusPtr ORT_API_CALL infer_shape(const OrtCustomOp* op, OrtShapeInferContext* ctx) {
  // onnxruntime ignores (and leaks) a returned status: swallow everything, inference is best effort.
  try {
    self(op)->spec.infer(InferContext(ctx));
  } catch (...) {
  }
  return nullptr;
}

}  // namespace

CustomOp::CustomOp(OpSpec s, uint32_t api_version) : OrtCustomOp(), spec(std::move(s)) {
  std::memset(static_cast<OrtCustomOp*>(this), 0, sizeof(OrtCustomOp));
  version = api_version;
  GetName = &get_name;
  GetExecutionProviderType = &get_ep;
  GetInputType = &input_type;
  GetInputTypeCount = &input_count;
  GetOutputType = &output_type;
  GetOutputTypeCount = &output_count;
  KernelDestroy = &destroy_kernel;
  GetInputCharacteristic = &input_kind;
  GetOutputCharacteristic = &output_kind;
  GetInputMemoryType = &input_mem;
  GetVariadicInputMinArity = &var_in_arity;
  GetVariadicInputHomogeneity = &var_in_homog;
  GetVariadicOutputMinArity = &var_out_arity;
  GetVariadicOutputHomogeneity = &var_out_homog;
  CreateKernelV2 = &create_kernel;
  KernelComputeV2 = &compute_kernel;
  GetStartVersion = &start_version;
  GetEndVersion = &end_version;
  if (spec.infer != nullptr && api_version >= 17) InferOutputShapeFn = &infer_shape;
}

}  // namespace ortquant::ort
