// RegisterCustomOps: the one table (domain group, op name) -> kernel. The library uses only the OrtApiBase it
// is given (it does not link libonnxruntime), requests min(runtime API, ORT_API_VERSION), and creates its
// OrtCustomOp and OrtCustomOpDomain objects once per process; they live until the process ends.
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ort/kernels/integer/integer_ops.h"
#include "ort/kernels/linger/linger_matrix_ops.h"
#include "ort/kernels/linger/linger_ops.h"
#include "ort/kernels/linger/linger_rnn_ops.h"
#include "ort/kernels/ngraph/ngraph_ops.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/op.h"

#ifndef ORTQUANT_VERSION
#define ORTQUANT_VERSION "0.1.0"
#endif

namespace ortquant::ort {
namespace {

// Domain groups (decision 3): every op of a group is registered in each of its domains.
const std::vector<const char*> kQonnxDomains = {"qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"};
const std::vector<const char*> kNgraphDomains = {"ngraph"};
const std::vector<const char*> kLingerDomains = {"thinker", "onnxinfer"};
const std::vector<const char*> kIntegerDomains = {"ortquant.integer"};  // integer mode

// An op name with one OpSpec (make), or with several OpSpecs that differ only in types (make_all: onnxruntime
// picks among them by input types, ort-custom-ops.md 1.2).
struct Entry {
  using Make = OpSpec (*)(const std::string& name);
  using MakeAll = std::vector<OpSpec> (*)(const std::string& name);
  Entry(const std::vector<const char*>* d, const char* n, Make m, bool s = true)
      : domains(d), name(n), make(m), supported(s) {}
  Entry(const std::vector<const char*>* d, const char* n, MakeAll m, bool s = true)
      : domains(d), name(n), make_all(m), supported(s) {}
  std::vector<OpSpec> specs() const { return make ? std::vector<OpSpec>{make(name)} : make_all(name); }

  const std::vector<const char*>* domains;
  const char* name;
  Make make = nullptr;
  MakeAll make_all = nullptr;
  // false: registered only so that session creation fails with a clear message; not in OrtQuantOpList.
  bool supported = true;
};

// The table. Aliases (decision 3): IntQuant = Quant, TruncQuant = Trunc.
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {&kQonnxDomains, "Quant", &quant_specs},
      {&kQonnxDomains, "IntQuant", &quant_specs},
      {&kQonnxDomains, "MultiThreshold", &multithreshold_spec},
      {&kQonnxDomains, "XnorPopcountMatMul", &xnorpopcount_spec},
      {&kQonnxDomains, "Im2Col", &im2col_spec},
      {&kQonnxDomains, "BipolarQuant", &bipolar_quant_specs},
      {&kQonnxDomains, "Trunc", &trunc_specs},
      {&kQonnxDomains, "TruncQuant", &trunc_specs},
      {&kQonnxDomains, "FloatQuant", &float_quant_specs},
      {&kQonnxDomains, "MaxPoolNHWC", &maxpoolnhwc_spec},
      {&kQonnxDomains, "QuantAvgPool2d", &quantavgpool2d_spec},
      {&kQonnxDomains, "DebugMarker", &debugmarker_spec},
      {&kQonnxDomains, "GenericPartition", &genericpartition_spec, false},  // clear error at creation (decision 8)
      // linger / thinker (decisions 11-16). Overloads by output type: the int8 one first (the default).
      {&kLingerDomains, "Quant", &linger_quant_spec},
      {&kLingerDomains, "Quant", &linger_quant_spec_i16},
      {&kLingerDomains, "Quant", &linger_quant_spec_i32},
      {&kLingerDomains, "Dequant", &linger_dequant_spec},
      {&kLingerDomains, "Requant", &linger_requant_spec},
      {&kLingerDomains, "Requant", &linger_requant_spec_i16},
      {&kLingerDomains, "Requant", &linger_requant_spec_i32},
      {&kLingerDomains, "iqAdd", &linger_iqadd_spec},
      {&kLingerDomains, "iqMul", &linger_iqmul_spec},
      {&kLingerDomains, "iqDiv", &linger_iqdiv_spec},
      {&kLingerDomains, "iqCat", &linger_iqcat_spec},
      {&kLingerDomains, "iqClamp", &linger_iqclamp_spec},
      {&kLingerDomains, "iqSigmoid", &linger_iqsigmoid_spec},
      {&kLingerDomains, "iqTanh", &linger_iqtanh_spec},
      {&kLingerDomains, "iqSum", &linger_iqsum_spec},
      {&kLingerDomains, "iqPad", &linger_iqpad_spec},
      {&kLingerDomains, "Relu", &linger_relu_spec},
      {&kLingerDomains, "AvgPool2dInt", &linger_avgpool_spec},
      {&kLingerDomains, "BatchNorm2dInt", &linger_batchnorm2d_spec},
      {&kLingerDomains, "BatchNorm2dInt", &linger_batchnorm2d_spec_i16},
      {&kLingerDomains, "BatchNorm2dInt", &linger_batchnorm2d_spec_i32},
      {&kLingerDomains, "BatchNorm1dInt", &linger_batchnorm1d_spec},
      {&kLingerDomains, "BatchNorm1dInt", &linger_batchnorm1d_spec_i16},
      {&kLingerDomains, "BatchNorm1dInt", &linger_batchnorm1d_spec_i32},
      {&kLingerDomains, "SoftmaxInt", &linger_softmax_spec},
      {&kLingerDomains, "SoftmaxInt", &linger_softmax_spec_i16},
      {&kLingerDomains, "SoftmaxInt", &linger_softmax_spec_i32},
      {&kLingerDomains, "SoftmaxInt", &linger_softmax_spec_f32},
      {&kLingerDomains, "LogSoftmaxInt", &linger_logsoftmax_spec},
      {&kLingerDomains, "LogSoftmaxInt", &linger_logsoftmax_spec_i16},
      {&kLingerDomains, "LogSoftmaxInt", &linger_logsoftmax_spec_i32},
      {&kLingerDomains, "LogSoftmaxInt", &linger_logsoftmax_spec_f32},
      {&kLingerDomains, "LayerNormInt", &linger_layernorm_spec},
      // linger recurrent ops (decisions 12, 13, 15, 16): one op per name with every input form; overloads by the
      // dtype of output 0 (int8 with o_bits, float32 without).
      {&kLingerDomains, "LSTMInt", &linger_lstm_spec},
      {&kLingerDomains, "LSTMInt", &linger_lstm_spec_f32},
      {&kLingerDomains, "LSTMInt_Is8_Is64", &linger_lstm_spec},
      {&kLingerDomains, "LSTMInt_Is8_Is64", &linger_lstm_spec_f32},
      {&kLingerDomains, "LSTMInt_Is8_Is64_If32_If32", &linger_lstm_spec},
      {&kLingerDomains, "LSTMInt_Is8_Is64_If32_If32", &linger_lstm_spec_f32},
      {&kLingerDomains, "GRUInt", &linger_gru_spec},
      {&kLingerDomains, "GRUInt", &linger_gru_spec_f32},
      {&kLingerDomains, "GRUInt_Is8_Is64", &linger_gru_spec},
      {&kLingerDomains, "GRUInt_Is8_Is64", &linger_gru_spec_f32},
      {&kLingerDomains, "GRUInt_Is8_Is64_If32", &linger_gru_spec},
      {&kLingerDomains, "GRUInt_Is8_Is64_If32", &linger_gru_spec_f32},
      // linger matrix ops: overloads by output type, the int8 one first.
      {&kLingerDomains, "LinearInt", &linear_int_spec},
      {&kLingerDomains, "LinearInt", &linear_int_spec_i16},
      {&kLingerDomains, "LinearInt", &linear_int_spec_i32},
      {&kLingerDomains, "LinearInt", &linear_int_spec_f32},
      {&kLingerDomains, "BmmInt", &bmm_int_spec},
      {&kLingerDomains, "BmmInt", &bmm_int_spec_i16},
      {&kLingerDomains, "BmmInt", &bmm_int_spec_i32},
      {&kLingerDomains, "BmmInt", &bmm_int_spec_f32},
      {&kLingerDomains, "Conv2dInt", &conv2d_int_spec},
      {&kLingerDomains, "Conv2dInt", &conv2d_int_spec_i16},
      {&kLingerDomains, "Conv2dInt", &conv2d_int_spec_i32},
      {&kLingerDomains, "Conv2dInt", &conv2d_int_spec_f32},
      {&kLingerDomains, "Conv1dInt", &conv1d_int_spec},
      {&kLingerDomains, "Conv1dInt", &conv1d_int_spec_i16},
      {&kLingerDomains, "Conv1dInt", &conv1d_int_spec_i32},
      {&kLingerDomains, "Conv1dInt", &conv1d_int_spec_f32},
      {&kLingerDomains, "ConvTranspose2dInt", &conv_transpose2d_int_spec},
      {&kLingerDomains, "ConvTranspose2dInt", &conv_transpose2d_int_spec_i16},
      {&kLingerDomains, "ConvTranspose2dInt", &conv_transpose2d_int_spec_i32},
      {&kLingerDomains, "ConvTranspose2dInt", &conv_transpose2d_int_spec_f32},
      {&kNgraphDomains, "Quantize", &ngraph_quantize_specs},
      {&kNgraphDomains, "Dequantize", &ngraph_dequantize_specs},
      // integer mode: QONNX quantized layers lowered by transforms/lower_integer.py.
      {&kIntegerDomains, "QConv", &qconv_spec},
      {&kIntegerDomains, "QConvCodes", &qconv_codes_spec},
      {&kIntegerDomains, "MaxPoolCodes", &maxpool_codes_spec},
      {&kIntegerDomains, "AvgPoolCodes", &avgpool_codes_spec},
      {&kIntegerDomains, "QGemm", &qgemm_spec},
      {&kIntegerDomains, "QGemmCodes", &qgemm_codes_spec},
      {&kIntegerDomains, "QChain", &qchain_spec},
      {&kIntegerDomains, "QChainCodes", &qchain_codes_spec},
      {&kIntegerDomains, "QuantCodes", &quant_codes_spec},
      {&kIntegerDomains, "Rescale", &rescale_spec},
  };
  return t;
}

struct Registry {
  std::vector<std::unique_ptr<CustomOp>> ops;
  std::vector<OrtCustomOpDomain*> domains;  // released never: onnxruntime may reference them until exit
};

std::mutex g_mutex;
Registry* g_registry = nullptr;  // deliberately leaked (see -z nodelete in CMakeLists.txt)

// The oldest onnxruntime ortquant runs on (docs/ops.md, "Supported onnxruntime"). Older releases lack what the
// library relies on: API 17 for KernelContext_ParallelFor and the shape-inference hook, and a runtime that
// honours the output types the hook declares when several kernels of one op differ only in output type (linger
// o_bits 16/32, float outputs): on 1.17 and 1.18 such models fail to load with misleading type errors.
constexpr uint32_t kMinOrtMajor = 1, kMinOrtMinor = 19;
constexpr const char* kMinOrtText = "1.19";

// Session config entry marking options the domains were added to (also read by the Python helper).
constexpr const char* kRegisteredKey = "ortquant.registered";

// onnxruntime optimizations that re-round the float layer in front of a quantizer: the NCHWc convolution sums in
// another order and folds BatchNormalization into the weights; ConvBNFusion, ConvMulFusion and the MatMul +
// BatchNormalization rule fold a BatchNormalization or a constant Mul into the weights, MatMulScaleFusion a constant
// scale into the product. A float32 ulp can move a value across a rounding boundary, one quantizer step (measured:
// 4 and 262 pixels of the published ESPCN models moved by 1-3 steps), or turn an exact zero in front of a
// BipolarQuant into +-tiny (FINN's TFC/LFC/CNV-w1a1 through the TorchScript exporter: signs flip for most inputs).
// Registering the library disables them on the session options, unless the caller set the key already (set it
// after registering to choose otherwise; docs/ops.md, "Default mode"). The value is onnxruntime's ';'-separated
// list of optimizer and rewrite-rule names.
constexpr const char* kDisabledOptimizersKey = "optimization.disable_specified_optimizers";
constexpr const char* kDisabledOptimizers =
    "NchwcTransformer;ConvBNFusion;ConvMulFusion;MatMul_BatchNormalization_Fusion;MatMulScaleFusion";

// onnxruntime's QDQ fusions (QuantizeLinear / DequantizeLinear around a Conv, MatMul or Gemm into QLinearConv,
// QGemm, MatMulIntegerToFloat ...) compute the layer in other arithmetic than the graph says: the requantization
// rounds differently and, on AVX2, u8 x s8 pair sums saturate. qonnx's QCDQ form of Brevitas models (QuantToQCDQ)
// gave outputs up to 9% of the output range away from the graph's own (measured: Conv1d, ConvTranspose,
// self-attention, Int32 bias exports). Registering the library turns them off on the session options, unless the
// caller set the key (docs/ops.md, "Default mode"); integer mode lowers such layers onto the exact engine instead.
constexpr const char* kDisableQdqKey = "session.disable_quant_qdq";

// (major, minor) of "1.31.1"; (0, 0) when unknown.
std::pair<uint32_t, uint32_t> runtime_version(const OrtApiBase* base) {
  const char* v = base->GetVersionString();
  if (v == nullptr) return {0, 0};
  char* end = nullptr;
  const unsigned long major = std::strtoul(v, &end, 10);
  if (end == nullptr || *end != '.') return {0, 0};
  const unsigned long minor = std::strtoul(end + 1, nullptr, 10);
  return {static_cast<uint32_t>(major), static_cast<uint32_t>(minor)};
}

uint32_t runtime_api_version(const OrtApiBase* base) {
  // "1.31.1" -> 31. The C API version equals onnxruntime's minor version.
  const char* v = base->GetVersionString();
  uint32_t minor = ORT_API_VERSION;
  if (v != nullptr) {
    const char* dot = std::strchr(v, '.');
    if (dot != nullptr) minor = static_cast<uint32_t>(std::strtoul(dot + 1, nullptr, 10));
  }
  return minor < ORT_API_VERSION ? minor : ORT_API_VERSION;
}

OrtStatus* build_registry(uint32_t api_version) {
  auto reg = std::make_unique<Registry>();
  std::vector<std::pair<std::string, OrtCustomOpDomain*>> by_name;
  for (const Entry& e : table()) {
    for (OpSpec& spec : e.specs()) {
      reg->ops.push_back(std::make_unique<CustomOp>(std::move(spec), api_version));
      const CustomOp* op = reg->ops.back().get();
      for (const char* d : *e.domains) {
        OrtCustomOpDomain* dom = nullptr;
        for (auto& p : by_name)
          if (p.first == d) dom = p.second;
        if (dom == nullptr) {
          if (OrtStatus* st = g_api->CreateCustomOpDomain(d, &dom)) return st;
          by_name.emplace_back(d, dom);
          reg->domains.push_back(dom);
        }
        if (OrtStatus* st = g_api->CustomOpDomain_Add(dom, op)) return st;
      }
    }
  }
  g_registry = reg.release();
  return nullptr;
}

}  // namespace
}  // namespace ortquant::ort

extern "C" {

// Entry point of SessionOptions.register_custom_ops_library / RegisterCustomOpsLibrary_V2.
__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options,
                                                                                  const OrtApiBase* api_base) {
  using namespace ortquant::ort;
  if (api_base == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto [major, minor] = runtime_version(api_base);
  if (major < kMinOrtMajor || (major == kMinOrtMajor && minor < kMinOrtMinor)) {
    // Refuse with that runtime's own CreateStatus (slot 0 of every OrtApi version).
    const OrtApi* old = nullptr;
    for (int v = static_cast<int>(std::min<uint32_t>(minor, ORT_API_VERSION)); v >= 1 && old == nullptr; --v)
      old = api_base->GetApi(static_cast<uint32_t>(v));
    if (old == nullptr) return nullptr;  // nothing to report through
    const char* vs = api_base->GetVersionString();
    const std::string msg = std::string("ortquant needs onnxruntime >= ") + kMinOrtText + " (C API " +
                            std::to_string(kMinOrtMinor) + " or newer); this process runs onnxruntime " +
                            (vs != nullptr ? vs : "of unknown version") + ". Upgrade onnxruntime.";
    return old->CreateStatus(ORT_FAIL, msg.c_str());
  }
  uint32_t version = runtime_api_version(api_base);
  const OrtApi* api = nullptr;
  for (; version >= 17 && api == nullptr; --version) api = api_base->GetApi(version);
  if (api == nullptr) return nullptr;  // onnxruntime older than 1.17: nothing we can report through
  ++version;
  if (g_api == nullptr) g_api = api;
  try {
    if (g_registry == nullptr) {
      if (OrtStatus* st = build_registry(version)) return st;
    }
    // Idempotent per SessionOptions: adding the domains twice makes session creation fail with "Domain already
    // set in registry" (a plain register_custom_ops_library followed by ortquant.register/InferenceSession, or
    // two plain registrations). The options remember the registration in a config entry.
    int registered = 0;
    if (options != nullptr) {
      if (OrtStatus* st = g_api->HasSessionConfigEntry(options, kRegisteredKey, &registered)) {
        g_api->ReleaseStatus(st);
        registered = 0;
      }
    }
    if (registered) return nullptr;
    for (OrtCustomOpDomain* d : g_registry->domains) {
      if (OrtStatus* st = g_api->AddCustomOpDomain(options, d)) return st;
    }
    if (options != nullptr) {
      if (OrtStatus* st = g_api->AddSessionConfigEntry(options, kRegisteredKey, "1")) return st;
      int has_disabled = 0;
      if (OrtStatus* st = g_api->HasSessionConfigEntry(options, kDisabledOptimizersKey, &has_disabled)) {
        g_api->ReleaseStatus(st);
        has_disabled = 1;  // cannot tell: leave the caller's options alone
      }
      if (!has_disabled) {
        if (OrtStatus* st = g_api->AddSessionConfigEntry(options, kDisabledOptimizersKey, kDisabledOptimizers))
          return st;
      }
      int has_qdq = 0;
      if (OrtStatus* st = g_api->HasSessionConfigEntry(options, kDisableQdqKey, &has_qdq)) {
        g_api->ReleaseStatus(st);
        has_qdq = 1;  // cannot tell: leave the caller's options alone
      }
      if (!has_qdq) {
        if (OrtStatus* st = g_api->AddSessionConfigEntry(options, kDisableQdqKey, "1")) return st;
      }
    }
  } catch (const std::exception& e) {
    return g_api->CreateStatus(ORT_FAIL, (std::string("ortquant: ") + e.what()).c_str());
  } catch (...) {
    return g_api->CreateStatus(ORT_FAIL, "ortquant: unknown error during registration");
  }
  return nullptr;
}

// Same as RegisterCustomOps under a unique name, for hosts that link several op libraries statically
// (OrtApi::RegisterCustomOpsUsingFunction).
__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterOrtQuantOps(OrtSessionOptions* options,
                                                                                    const OrtApiBase* api_base) {
  return RegisterCustomOps(options, api_base);
}

__attribute__((visibility("default"))) const char* OrtQuantVersion(void) { return ORTQUANT_VERSION; }

// Every supported (domain, op) the library registers, one "domain<TAB>op" per line. Needs no onnxruntime.
__attribute__((visibility("default"))) const char* OrtQuantOpList(void) {
  static const std::string list = [] {
    std::string s;
    for (const auto& e : ortquant::ort::table())
      if (e.supported)
        for (const char* d : *e.domains) s += std::string(d) + "\t" + e.name + "\n";
    return s;
  }();
  return list.c_str();
}

}  // extern "C"
