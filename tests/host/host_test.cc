// ortquant_host_test: runs models through onnxruntime's C API from a plain C++ program (no Python), the way a
// C/C++ host application would. It dlopen()s libonnxruntime.so, takes OrtGetApiBase from it, registers
// libortquant.so on the session options and runs a model.
//
//   ortquant_host_test --ort LIBONNXRUNTIME --ops LIBORTQUANT [options] COMMAND ARGS...
//
// Options:
//   --threads N          intra_op_num_threads (default 1; 0 = onnxruntime's default)
//   --register MODE      v2: OrtApi::RegisterCustomOpsLibrary_V2 (default; onnxruntime owns the handle)
//                        legacy: OrtApi::RegisterCustomOpsLibrary(options, path, &handle), the call Triton's
//                                onnxruntime backend makes; the handle is never closed (Triton never does)
//                        function: dlopen(LIBORTQUANT, RTLD_GLOBAL) ourselves and call
//                                  OrtApi::RegisterCustomOpsUsingFunction(options, "RegisterOrtQuantOps")
//   --global-pool        (triton only) one process-wide thread pool (CreateEnvWithGlobalThreadPools with
//                        --threads intra-op threads) and DisablePerSessionThreads, as Triton's
//                        --backend-config=onnxruntime,enable-global-threadpool=1 does
//
// The C API version: the program is compiled against headers of API version ORT_API_VERSION and asks the
// runtime for it; a runtime older than the headers does not provide it, and then the program asks for the
// runtime's own version (its minor version number), as a host compiled against that release's headers would.
// Only C API functions of version 1 to 13 are used here, so every runtime from 1.13 on can be driven.
//
// Commands:
//   quant-ramp MODEL N SCALE_LOG2 ZEROPT BITS SIGNED NARROW ROUNDING
//       MODEL has input "x" float32 [N] and output "y": y = Quant(x, 2^SCALE_LOG2, ZEROPT, BITS) with the given
//       attributes. x is the ramp x[i] = (i - N/2) / 16. The expected y is computed here in exact integer
//       arithmetic (all values are dyadic rationals, so float32 computes them exactly too), independently of
//       the library and of any Python reference. ROUNDING: ROUND, FLOOR, CEIL or DOWN.
//   run MODEL [--in NAME=FILE]... [--expect NAME=FILE]...
//       Feeds the tensors in the FILEs and compares each named output bit for bit (NaN equals any NaN) with
//       its expected FILE. Tensor file format (written by tests/host/test_host.py: write_tensor):
//         "OQT1" | uint32 ONNX element type | uint32 rank | int64 dims[rank] | raw little-endian data
//   expect-error MODEL [--in NAME=FILE]... --contains TEXT [--contains TEXT]...
//       Session creation (or, if that succeeds, a run) must fail, and the message must contain every TEXT.
//   triton MODEL [--instances N] [--requests R] [--in NAME=FILE]... --expect NAME=FILE...
//       Replays the model lifecycle of Triton's onnxruntime backend (src/onnxruntime.cc of
//       triton-inference-server/onnxruntime_backend): model-level session options with graph optimization
//       ORT_ENABLE_ALL and sequential execution; for config auto-complete one session (options cloned, library
//       registered on the clone, session created, the clone released, the session read for its inputs and
//       outputs, then released); then N instances created concurrently, each from its own clone with its own
//       registration of the library (RegisterCustomOpsLibrary unless --register says otherwise); the N
//       instances serve R requests each, concurrently, every output compared bit for bit; then a model reload
//       (all sessions released, one instance created again with one more registration) serves one more request.
//       The library is never unloaded.
//
// Every other session test creates two sessions from the same options (registering once per options serves
// many sessions), runs both, releases the first and runs the second again.
// Exit status 0 on success; otherwise a message on stderr and status 1 (2 for usage errors).
#include <dlfcn.h>
#include <onnxruntime_c_api.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... A>
[[noreturn]] void fail(const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Failure(os.str());
}

const OrtApi* g_api = nullptr;

// Turns an OrtStatus into a Failure (what + onnxruntime's message).
void check(OrtStatus* st, const char* what) {
  if (st == nullptr) return;
  std::string msg = g_api->GetErrorMessage(st);
  g_api->ReleaseStatus(st);
  fail(what, " failed: ", msg);
}

// Owning handle for one onnxruntime object type.
template <class T, void (*Release)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* p) : p_(p) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    reset();
    p_ = std::exchange(o.p_, nullptr);
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (p_ != nullptr) Release(p_);
    p_ = nullptr;
  }
  T* get() const { return p_; }
  T** out() {
    reset();
    return &p_;
  }

 private:
  T* p_ = nullptr;
};

void release_env(OrtEnv* p) { g_api->ReleaseEnv(p); }
void release_options(OrtSessionOptions* p) { g_api->ReleaseSessionOptions(p); }
void release_session(OrtSession* p) { g_api->ReleaseSession(p); }
void release_value(OrtValue* p) { g_api->ReleaseValue(p); }
void release_meminfo(OrtMemoryInfo* p) { g_api->ReleaseMemoryInfo(p); }
void release_shape(OrtTensorTypeAndShapeInfo* p) { g_api->ReleaseTensorTypeAndShapeInfo(p); }
using Env = Handle<OrtEnv, release_env>;
using Options = Handle<OrtSessionOptions, release_options>;
using Session = Handle<OrtSession, release_session>;
using Value = Handle<OrtValue, release_value>;
using MemInfo = Handle<OrtMemoryInfo, release_meminfo>;
using ShapeInfo = Handle<OrtTensorTypeAndShapeInfo, release_shape>;

// A host-side tensor.
struct Tensor {
  ONNXTensorElementDataType dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

size_t element_size(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return 8;
    default: fail("unsupported element type ", static_cast<int>(t));
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

Tensor read_tensor(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open tensor file ", path);
  char magic[4];
  uint32_t dtype = 0, rank = 0;
  f.read(magic, 4);
  f.read(reinterpret_cast<char*>(&dtype), 4);
  f.read(reinterpret_cast<char*>(&rank), 4);
  if (!f || std::memcmp(magic, "OQT1", 4) != 0 || rank > 16) fail("bad tensor file header in ", path);
  Tensor t;
  t.dtype = static_cast<ONNXTensorElementDataType>(dtype);
  t.shape.resize(rank);
  f.read(reinterpret_cast<char*>(t.shape.data()), static_cast<std::streamsize>(rank * sizeof(int64_t)));
  const int64_t n = t.count();
  if (!f || n < 0) fail("bad tensor file shape in ", path);
  t.bytes.resize(static_cast<size_t>(n) * element_size(t.dtype));
  f.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!f) fail("tensor file ", path, " is shorter than its header says");
  if (f.peek() != std::char_traits<char>::eof()) fail("tensor file ", path, " has trailing bytes");
  return t;
}

// Bit-exact comparison; for floating types any NaN equals any NaN, and the sign of zero must match.
void compare(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.dtype != want.dtype) fail("output ", name, ": element type ", got.dtype, ", expected ", want.dtype);
  if (got.shape != want.shape) fail("output ", name, ": shape ", shape_str(got.shape), ", expected ", shape_str(want.shape));
  const size_t es = element_size(got.dtype);
  const int64_t n = got.count();
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* a = got.bytes.data() + i * es;
    const uint8_t* b = want.bytes.data() + i * es;
    if (std::memcmp(a, b, es) == 0) continue;
    if (got.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      float fa, fb;
      std::memcpy(&fa, a, 4);
      std::memcpy(&fb, b, 4);
      if (std::isnan(fa) && std::isnan(fb)) continue;
      if (first.empty()) first = "index " + std::to_string(i) + ": got " + std::to_string(fa) + ", expected " + std::to_string(fb);
    } else if (got.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
      double da, db;
      std::memcpy(&da, a, 8);
      std::memcpy(&db, b, 8);
      if (std::isnan(da) && std::isnan(db)) continue;
      if (first.empty()) first = "index " + std::to_string(i) + ": got " + std::to_string(da) + ", expected " + std::to_string(db);
    } else if (first.empty()) {
      first = "index " + std::to_string(i) + " differs";
    }
    ++bad;
  }
  if (bad) fail("output ", name, ": ", bad, " of ", n, " elements differ; first at ", first);
}

// ---- the host: onnxruntime loaded at run time -------------------------------------------------------------

struct Config {
  std::string ort_lib, ops_lib, reg_mode = "v2";
  int threads = 1;
  bool global_pool = false;
};

void release_threading(OrtThreadingOptions* p) { g_api->ReleaseThreadingOptions(p); }
using Threading = Handle<OrtThreadingOptions, release_threading>;

// The C API version a runtime provides: its minor version number ("1.19.2" -> 19).
uint32_t runtime_minor(const char* v) {
  const char* dot = v != nullptr ? std::strchr(v, '.') : nullptr;
  return dot != nullptr ? static_cast<uint32_t>(std::strtoul(dot + 1, nullptr, 10)) : 0;
}

class Host {
 public:
  explicit Host(const Config& cfg) : cfg_(cfg) {
    ort_handle_ = dlopen(cfg.ort_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (ort_handle_ == nullptr) fail("dlopen(", cfg.ort_lib, "): ", dlerror());
    using GetApiBase = const OrtApiBase* (*)();
    auto get_base = reinterpret_cast<GetApiBase>(dlsym(ort_handle_, "OrtGetApiBase"));
    if (get_base == nullptr) fail("OrtGetApiBase not found in ", cfg.ort_lib);
    const OrtApiBase* base = get_base();
    uint32_t api_version = ORT_API_VERSION;
    g_api = base->GetApi(api_version);
    if (g_api == nullptr) {
      // An older runtime: ask for its own version, as a host built against its headers would.
      api_version = runtime_minor(base->GetVersionString());
      if (api_version >= 13 && api_version < ORT_API_VERSION) g_api = base->GetApi(api_version);
    }
    if (g_api == nullptr)
      fail("onnxruntime ", base->GetVersionString(), " provides neither C API version ", ORT_API_VERSION,
           " nor its own minor version (this program needs 13 or later)");
    std::printf("onnxruntime %s (C API %u)\n", base->GetVersionString(), api_version);
    if (cfg.global_pool) {
      Threading tp;
      check(g_api->CreateThreadingOptions(tp.out()), "CreateThreadingOptions");
      check(g_api->SetGlobalIntraOpNumThreads(tp.get(), cfg.threads), "SetGlobalIntraOpNumThreads");
      check(g_api->SetGlobalInterOpNumThreads(tp.get(), 1), "SetGlobalInterOpNumThreads");
      check(g_api->CreateEnvWithGlobalThreadPools(ORT_LOGGING_LEVEL_ERROR, "ortquant_host_test", tp.get(), env_.out()),
            "CreateEnvWithGlobalThreadPools");
    } else {
      check(g_api->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "ortquant_host_test", env_.out()), "CreateEnv");
    }
    check(g_api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, meminfo_.out()), "CreateCpuMemoryInfo");
  }
  // Deliberately no dlclose of onnxruntime: its static destructors and pool threads may still run.

  Options make_options() {
    Options so;
    check(g_api->CreateSessionOptions(so.out()), "CreateSessionOptions");
    check(g_api->SetIntraOpNumThreads(so.get(), cfg_.threads), "SetIntraOpNumThreads");
    register_ops(so);
    return so;
  }

  // Model-level options as Triton's onnxruntime backend builds them (ModelState::ModelState): graph
  // optimization ORT_ENABLE_ALL, sequential execution, per-session intra-op threads unless a global pool is used.
  Options make_triton_model_options() {
    Options so;
    check(g_api->CreateSessionOptions(so.out()), "CreateSessionOptions");
    check(g_api->SetSessionGraphOptimizationLevel(so.get(), ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
    check(g_api->SetSessionExecutionMode(so.get(), ORT_SEQUENTIAL), "SetSessionExecutionMode");
    if (cfg_.global_pool) {
      check(g_api->DisablePerSessionThreads(so.get()), "DisablePerSessionThreads");
    } else if (cfg_.threads > 0) {
      check(g_api->SetIntraOpNumThreads(so.get(), cfg_.threads), "SetIntraOpNumThreads");
    }
    return so;
  }

  // One instance as Triton's ModelState::LoadModel creates it: the model options cloned, the op library
  // registered on the clone, the session created, the clone released (the session outlives it).
  Session load_triton_instance(const Options& model_options, const std::string& model) {
    Options clone;
    check(g_api->CloneSessionOptions(model_options.get(), clone.out()), "CloneSessionOptions");
    register_ops(clone);
    return make_session(clone, model);
  }

  int registrations() const { return registrations_.load(); }

  void register_ops(const Options& so) {
    ++registrations_;
    if (cfg_.reg_mode == "v2") {
      check(g_api->RegisterCustomOpsLibrary_V2(so.get(), cfg_.ops_lib.c_str()), "RegisterCustomOpsLibrary_V2");
    } else if (cfg_.reg_mode == "legacy") {
      // The caller owns the handle and may dlclose it once every session using the options is gone; Triton
      // never does, and neither do we (the library is built with -z nodelete anyway).
      void* handle = nullptr;
      check(g_api->RegisterCustomOpsLibrary(so.get(), cfg_.ops_lib.c_str(), &handle), "RegisterCustomOpsLibrary");
      if (handle == nullptr) fail("RegisterCustomOpsLibrary returned no library handle");
    } else {
      // A host that loads (or statically links) the op library itself and registers it by function name.
      std::lock_guard<std::mutex> lock(ops_mutex_);
      if (ops_handle_ == nullptr) {
        ops_handle_ = dlopen(cfg_.ops_lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (ops_handle_ == nullptr) fail("dlopen(", cfg_.ops_lib, "): ", dlerror());
        using VersionFn = const char* (*)();
        auto version = reinterpret_cast<VersionFn>(dlsym(ops_handle_, "OrtQuantVersion"));
        if (version == nullptr) fail("OrtQuantVersion not exported by ", cfg_.ops_lib);
        std::printf("ortquant %s\n", version());
      }
      check(g_api->RegisterCustomOpsUsingFunction(so.get(), "RegisterOrtQuantOps"), "RegisterCustomOpsUsingFunction");
    }
  }

  Session make_session(const Options& so, const std::string& model) {
    Session s;
    check(g_api->CreateSession(env_.get(), model.c_str(), so.get(), s.out()), "CreateSession");
    return s;
  }

  // Runs the session on named inputs, returns the named outputs copied to host tensors.
  std::vector<Tensor> run(const Session& s, const std::vector<std::pair<std::string, Tensor>>& inputs,
                          const std::vector<std::string>& output_names) {
    std::vector<Value> in_values;
    std::vector<const char*> in_names;
    std::vector<const OrtValue*> in_ptrs;
    for (const auto& [name, t] : inputs) {
      Value v;
      // onnxruntime does not write to inputs; the API takes a non-const pointer.
      void* data = const_cast<uint8_t*>(t.bytes.data());
      check(g_api->CreateTensorWithDataAsOrtValue(meminfo_.get(), data, t.bytes.size(), t.shape.data(), t.shape.size(),
                                                  t.dtype, v.out()),
            "CreateTensorWithDataAsOrtValue");
      in_names.push_back(name.c_str());
      in_ptrs.push_back(v.get());
      in_values.push_back(std::move(v));
    }
    std::vector<const char*> out_names;
    for (const auto& n : output_names) out_names.push_back(n.c_str());
    std::vector<OrtValue*> outs(output_names.size(), nullptr);
    check(g_api->Run(s.get(), nullptr, in_names.data(), in_ptrs.data(), in_ptrs.size(), out_names.data(),
                     out_names.size(), outs.data()),
          "Run");
    std::vector<Value> owned;
    for (OrtValue* o : outs) owned.emplace_back(o);
    std::vector<Tensor> result;
    for (const Value& v : owned) result.push_back(to_host(v));
    return result;
  }

  // Like run(), but returns onnxruntime's error message ("" when the run succeeds).
  std::string run_error(const Session& s, const std::vector<std::pair<std::string, Tensor>>& inputs,
                        const std::vector<std::string>& output_names) {
    try {
      run(s, inputs, output_names);
    } catch (const Failure& e) {
      return e.what();
    }
    return "";
  }

  std::string session_error(const Options& so, const std::string& model) {
    Session s;
    OrtStatus* st = g_api->CreateSession(env_.get(), model.c_str(), so.get(), s.out());
    if (st == nullptr) return "";
    std::string msg = g_api->GetErrorMessage(st);
    g_api->ReleaseStatus(st);
    return msg.empty() ? "(empty error message)" : msg;
  }

  std::vector<std::string> output_names(const Session& s) {
    OrtAllocator* alloc = nullptr;
    check(g_api->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions");
    size_t n = 0;
    check(g_api->SessionGetOutputCount(s.get(), &n), "SessionGetOutputCount");
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) {
      char* name = nullptr;
      check(g_api->SessionGetOutputName(s.get(), i, alloc, &name), "SessionGetOutputName");
      names.emplace_back(name);
      check(g_api->AllocatorFree(alloc, name), "AllocatorFree");
    }
    return names;
  }

 private:
  Tensor to_host(const Value& v) {
    ShapeInfo info;
    check(g_api->GetTensorTypeAndShape(v.get(), info.out()), "GetTensorTypeAndShape");
    Tensor t;
    check(g_api->GetTensorElementType(info.get(), &t.dtype), "GetTensorElementType");
    size_t rank = 0;
    check(g_api->GetDimensionsCount(info.get(), &rank), "GetDimensionsCount");
    t.shape.resize(rank);
    check(g_api->GetDimensions(info.get(), t.shape.data(), rank), "GetDimensions");
    void* data = nullptr;
    check(g_api->GetTensorMutableData(v.get(), &data), "GetTensorMutableData");
    t.bytes.resize(static_cast<size_t>(t.count()) * element_size(t.dtype));
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
    return t;
  }

  Config cfg_;
  void* ort_handle_ = nullptr;
  void* ops_handle_ = nullptr;
  std::mutex ops_mutex_;
  std::atomic<int> registrations_{0};
  Env env_;
  MemInfo meminfo_;
};

// ---- quant-ramp: expectations in exact integer arithmetic --------------------------------------------------

// floor(a / 2^m) for m >= 0 (arithmetic shift is floor division on two's complement).
int64_t floor_div_pow2(int64_t a, int m) { return a >= 0 ? a >> m : -((-a + (int64_t{1} << m) - 1) >> m); }

// Rounds the rational num / 2^m to an integer.
int64_t round_rational(int64_t num, int m, const std::string& mode) {
  const int64_t fl = floor_div_pow2(num, m);
  const int64_t rem = num - (fl << m);  // 0 <= rem < 2^m
  if (rem == 0) return fl;
  if (mode == "FLOOR") return fl;
  if (mode == "CEIL") return fl + 1;
  if (mode == "DOWN") return num < 0 ? fl + 1 : fl;  // toward zero
  if (mode == "ROUND") {                              // nearest, ties to even
    const int64_t half = int64_t{1} << (m - 1);
    if (rem > half) return fl + 1;
    if (rem < half) return fl;
    return (fl % 2 == 0) ? fl : fl + 1;
  }
  throw Usage("quant-ramp: unsupported rounding mode " + mode);
}

std::vector<Tensor> ramp_expectation(int64_t n, int scale_log2, int64_t zeropt, int bits, bool is_signed, bool narrow,
                                     const std::string& mode, Tensor* x) {
  // x[i] = k / 16 with k = i - n/2; q = x / 2^s + z = (k + z * 2^(4+s)) / 2^(4+s).
  const int m = 4 + scale_log2;
  if (m < 1 || m > 30) throw Usage("quant-ramp: SCALE_LOG2 must be in [-3, 26]");
  if (bits < 2 || bits > 24) throw Usage("quant-ramp: BITS must be in [2, 24]");
  if (n < 1 || n > (1 << 22)) throw Usage("quant-ramp: N must be in [1, 2^22]");
  const int64_t lo = is_signed ? -(int64_t{1} << (bits - 1)) + (narrow ? 1 : 0) : 0;
  const int64_t hi = is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1 - (narrow ? 1 : 0);
  x->dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  x->shape = {n};
  x->bytes.resize(static_cast<size_t>(n) * 4);
  Tensor y = *x;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i - n / 2;
    const float xv = std::ldexp(static_cast<float>(k), -4);  // exact: |k| < 2^24
    const int64_t num = k + zeropt * (int64_t{1} << m);
    if (num <= -(int64_t{1} << 24) || num >= (int64_t{1} << 24)) throw Usage("quant-ramp: x / scale + zeropt must stay below 2^24 in magnitude");
    // Clamp before rounding (QONNX order): compare num / 2^m with the integer bounds exactly.
    int64_t q;
    bool clamped = true;
    if (num >= hi * (int64_t{1} << m)) q = hi;
    else if (num <= lo * (int64_t{1} << m)) q = lo;
    else q = round_rational(num, m, mode), clamped = false;
    float yv = std::ldexp(static_cast<float>(q - zeropt), scale_log2);  // exact: small integer times 2^s
    // IEEE signs of zero: rounding a negative value to zero gives -0, and -0 - (+0) = -0, -0 * 2^s = -0.
    // (With a non-zero zero point, q - zeropt == 0 means equal non-zero operands, which gives +0.)
    if (!clamped && q == 0 && num < 0 && zeropt == 0) yv = -0.0f;
    std::memcpy(x->bytes.data() + i * 4, &xv, 4);
    std::memcpy(y.bytes.data() + i * 4, &yv, 4);
  }
  return {y};
}

// ---- commands ---------------------------------------------------------------------------------------------

using Inputs = std::vector<std::pair<std::string, Tensor>>;

// Two sessions from one options object: both run and match; the second still runs after the first is released.
void run_and_compare(Host& host, const std::string& model, const Inputs& inputs, const std::vector<std::string>& names,
                     const std::vector<Tensor>& expected) {
  Options so = host.make_options();
  Session a = host.make_session(so, model);
  Session b = host.make_session(so, model);
  auto check_outputs = [&](const Session& s, const char* which) {
    std::vector<Tensor> got = host.run(s, inputs, names);
    for (size_t i = 0; i < names.size(); ++i) {
      try {
        compare(names[i], got[i], expected[i]);
      } catch (const Failure& e) {
        fail(which, ": ", e.what());
      }
    }
  };
  check_outputs(a, "session 1");
  check_outputs(b, "session 2");
  a.reset();
  check_outputs(b, "session 2 after releasing session 1");
}

// Triton's lifecycle (see the `triton` command above). Returns the number of requests served.
int64_t triton_replay(Host& host, const std::string& model, const Inputs& inputs, const std::vector<std::string>& names,
                      const std::vector<Tensor>& expected, int instances, int requests) {
  auto compare_all = [&](const std::vector<Tensor>& got, const std::string& which) {
    for (size_t i = 0; i < names.size(); ++i) {
      try {
        compare(names[i], got[i], expected[i]);
      } catch (const Failure& e) {
        fail(which, ": ", e.what());
      }
    }
  };
  const Options model_options = host.make_triton_model_options();
  {  // config auto-complete: one session to read the model's inputs and outputs, then released
    Session s = host.load_triton_instance(model_options, model);
    const std::vector<std::string> outs = host.output_names(s);
    for (const std::string& n : names) {
      bool found = false;
      for (const std::string& o : outs) found = found || o == n;
      if (!found) fail("auto-complete: the model has no output named ", n);
    }
  }
  // Instances: created concurrently, then serving concurrently. Errors are collected per thread.
  std::vector<Session> sessions(static_cast<size_t>(instances));
  std::vector<std::string> errors(static_cast<size_t>(instances));
  auto in_parallel = [&](auto&& body) {
    std::vector<std::thread> threads;
    for (int i = 0; i < instances; ++i)
      threads.emplace_back([&, i] {
        try {
          body(i);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(i)] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < instances; ++i)
      if (!errors[static_cast<size_t>(i)].empty()) fail("instance ", i, ": ", errors[static_cast<size_t>(i)]);
  };
  in_parallel([&](int i) { sessions[static_cast<size_t>(i)] = host.load_triton_instance(model_options, model); });
  std::atomic<int64_t> served{0};
  in_parallel([&](int i) {
    for (int r = 0; r < requests; ++r) {
      compare_all(host.run(sessions[static_cast<size_t>(i)], inputs, names), "request " + std::to_string(r));
      ++served;
    }
  });
  // Model reload: every instance released, one created again (the library stays loaded and is registered again).
  for (Session& s : sessions) s.reset();
  Session again = host.load_triton_instance(model_options, model);
  compare_all(host.run(again, inputs, names), "after reload");
  return served.load() + 1;
}

std::pair<std::string, std::string> split_assign(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw Usage("expected NAME=FILE, got " + s);
  return {s.substr(0, eq), s.substr(eq + 1)};
}

int64_t to_int(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') throw Usage("expected an integer, got '" + s + "'");
  return v;
}

int main_impl(int argc, char** argv) {
  Config cfg;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Usage("missing value after " + a);
      return argv[++i];
    };
    if (a == "--ort") cfg.ort_lib = value();
    else if (a == "--ops") cfg.ops_lib = value();
    else if (a == "--threads") cfg.threads = static_cast<int>(to_int(value()));
    else if (a == "--register") cfg.reg_mode = value();
    else if (a == "--global-pool") cfg.global_pool = true;
    else rest.assign(argv + i, argv + argc), i = argc;
  }
  if (cfg.ort_lib.empty() || cfg.ops_lib.empty() || rest.size() < 2)
    throw Usage("usage: ortquant_host_test --ort LIBONNXRUNTIME --ops LIBORTQUANT [--threads N] [--register v2|legacy|function] "
                "[--global-pool] quant-ramp|run|expect-error|triton MODEL ...");
  if (cfg.reg_mode != "v2" && cfg.reg_mode != "legacy" && cfg.reg_mode != "function")
    throw Usage("--register must be v2, legacy or function");
  if (cfg.threads < 0) throw Usage("--threads must be >= 0");
  const std::string cmd = rest[0], model = rest[1];
  if (cfg.global_pool && cmd != "triton") throw Usage("--global-pool is for the triton command only");
  Host host(cfg);

  if (cmd == "quant-ramp") {
    if (rest.size() != 9) throw Usage("quant-ramp MODEL N SCALE_LOG2 ZEROPT BITS SIGNED NARROW ROUNDING");
    Tensor x;
    const std::vector<Tensor> want =
        ramp_expectation(to_int(rest[2]), static_cast<int>(to_int(rest[3])), to_int(rest[4]),
                         static_cast<int>(to_int(rest[5])), to_int(rest[6]) != 0, to_int(rest[7]) != 0, rest[8], &x);
    run_and_compare(host, model, {{"x", x}}, {"y"}, want);
    std::printf("quant-ramp: %s elements bit-exact (threads=%d, register=%s)\n", rest[2].c_str(), cfg.threads,
                cfg.reg_mode.c_str());
    return 0;
  }

  Inputs inputs;
  std::vector<std::string> out_names, contains;
  std::vector<Tensor> expected;
  int instances = 2, requests = 4;
  for (size_t i = 2; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (i + 1 >= rest.size()) throw Usage("missing value after " + a);
    const std::string v = rest[++i];
    if (a == "--in") {
      auto [name, file] = split_assign(v);
      inputs.emplace_back(name, read_tensor(file));
    } else if (a == "--expect") {
      auto [name, file] = split_assign(v);
      out_names.push_back(name);
      expected.push_back(read_tensor(file));
    } else if (a == "--contains") {
      contains.push_back(v);
    } else if (a == "--instances" && cmd == "triton") {
      instances = static_cast<int>(to_int(v));
      if (instances < 1 || instances > 64) throw Usage("--instances must be in [1, 64]");
    } else if (a == "--requests" && cmd == "triton") {
      requests = static_cast<int>(to_int(v));
      if (requests < 1 || requests > 100000) throw Usage("--requests must be in [1, 100000]");
    } else {
      throw Usage("unknown argument " + a);
    }
  }

  if (cmd == "run") {
    if (out_names.empty()) throw Usage("run: give at least one --expect NAME=FILE");
    run_and_compare(host, model, inputs, out_names, expected);
    std::printf("run: %zu output(s) bit-exact (threads=%d, register=%s)\n", out_names.size(), cfg.threads,
                cfg.reg_mode.c_str());
    return 0;
  }
  if (cmd == "triton") {
    if (out_names.empty()) throw Usage("triton: give at least one --expect NAME=FILE");
    const int64_t served = triton_replay(host, model, inputs, out_names, expected, instances, requests);
    std::printf("triton: %d instance(s), %lld request(s), %d registration(s), %zu output(s) bit-exact "
                "(threads=%d, register=%s, global-pool=%d)\n",
                instances, static_cast<long long>(served), host.registrations(), out_names.size(), cfg.threads,
                cfg.reg_mode.c_str(), cfg.global_pool ? 1 : 0);
    return 0;
  }
  if (cmd == "expect-error") {
    if (contains.empty()) throw Usage("expect-error: give at least one --contains TEXT");
    Options so = host.make_options();
    std::string msg = host.session_error(so, model);
    if (msg.empty()) {
      Session s = host.make_session(so, model);
      msg = host.run_error(s, inputs, out_names.empty() ? host.output_names(s) : out_names);
    }
    if (msg.empty()) fail("expect-error: the model loaded and ran without error");
    for (const std::string& c : contains)
      if (msg.find(c) == std::string::npos) fail("expect-error: message does not contain '", c, "': ", msg);
    std::printf("expect-error: got the expected error: %s\n", msg.c_str());
    return 0;
  }
  throw Usage("unknown command " + cmd);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_impl(argc, argv);
  } catch (const Usage& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
