#include "ort/kernels/linger/matrix_common.h"

#include <cmath>

namespace ortquant::ort::matrix {
namespace {

float positive_scale(const KernelInfo& info, const char* name) {
  const float s = info.attr_float(name);
  if (!(std::isfinite(s) && s > 0.f)) throw_error("attribute '", name, "' must be a finite positive scale, got ", s);
  return s;
}

ONNXTensorElementDataType dtype_for_bits(int64_t bits) {
  return bits <= 8 ? kI8 : (bits <= 16 ? kI16 : kI32);
}

bool is_pow2(double x) {
  int e = 0;
  return std::frexp(x, &e) == 0.5;
}

}  // namespace

OutputSpec output_spec(const KernelInfo& info, const char* scale_a, const char* scale_b) {
  const std::string platform = info.attr_string("platform_quant", "luna_quant");
  if (platform != "luna_quant")
    throw_error("attribute 'platform_quant' must be 'luna_quant' (the only platform linger implements), got '",
                platform, "'");
  for (const char* bits : {"data_bits", "parameter_bits"}) {
    const int64_t b = info.attr_int(bits, 8);
    if (b < 1 || b > 8) throw_error("attribute '", bits, "' must be between 1 and 8 (values stored as int8), got ", b);
  }
  const double sa = positive_scale(info, scale_a), sb = positive_scale(info, scale_b);
  OutputSpec o;
  if (info.has_attr("o_bits")) {
    const int64_t bits = info.attr_int("o_bits");
    if (bits < 1 || bits > 32) throw_error("attribute 'o_bits' must be between 1 and 32, got ", bits);
    if (!info.has_attr("scale_o")) throw_error("attribute 'o_bits' needs 'scale_o'");
    const double so = positive_scale(info, "scale_o");
    o.dtype = dtype_for_bits(bits);
    o.ep.kind = o.dtype == kI8 ? gemm::OutKind::kInt8 : (o.dtype == kI16 ? gemm::OutKind::kInt16 : gemm::OutKind::kInt32);
    o.ep.ratio = so / (sa * sb);
    o.ep.lo = -std::ldexp(1.0, static_cast<int>(bits) - 1);
    o.ep.hi = std::ldexp(1.0, static_cast<int>(bits) - 1) - 1.0;
  } else {
    o.dtype = kFloat;
    o.ep.kind = gemm::OutKind::kFloat;
    const double denom = sa * sb;
    // Dividing by a power of two is multiplying by its (exact) inverse.
    if (is_pow2(denom)) o.ep.fscale = 1.0 / denom;
    else o.ep.fdiv = denom;
  }
  const ONNXTensorElementDataType resolved = info.output_dtype(0);
  if (resolved != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && resolved != o.dtype)
    throw_error("output is ", dtype_name(resolved), " in the graph but ",
                info.has_attr("o_bits") ? "o_bits asks for " : "no o_bits means ", dtype_name(o.dtype),
                " (is the input shape unknown to onnxruntime's type inference?)");
  return o;
}

ONNXTensorElementDataType infer_out_dtype(const InferContext& ctx) {
  if (!ctx.has_attr("o_bits")) return kFloat;
  return dtype_for_bits(ctx.attr_int("o_bits", 8));
}

void check_dtype(ONNXTensorElementDataType got, ONNXTensorElementDataType want, const char* what) {
  if (got != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && got != want)
    throw_error(what, " must be ", dtype_name(want), ", got ", dtype_name(got));
}

const int32_t* bias_data(const std::optional<TensorView>& b, int64_t n) {
  if (!b) return nullptr;
  check_dtype(b->dtype, kI32, "input bias");
  if (b->shape.size() != 1 || b->shape[0] != n)
    throw_error("input bias must have shape [", n, "], got ", shape_str(b->shape));
  return b->as<int32_t>();
}

gemm::Parallel parallel(const KernelContext& ctx) {
  return [&ctx](size_t n, const gemm::TaskFn& fn) { ctx.parallel_for(n, fn); };
}

std::vector<int64_t> ints_attr(const KernelInfo& info, const char* name, size_t n, const std::vector<int64_t>& dflt) {
  std::vector<int64_t> v = info.attr_ints(name, dflt);
  if (v.size() != n) throw_error("attribute '", name, "' must have ", n, " values, got ", v.size());
  return v;
}

}  // namespace ortquant::ort::matrix
