#include "ort/kernels/linger/linger_common.h"

#include <algorithm>
#include <cmath>

namespace ortquant::ort::lingerk {

void check_platform_quant(const KernelInfo& info) {
  const std::string p = info.attr_string("platform_quant", "luna_quant");
  if (p != "luna_quant")
    throw_error("unknown platform_quant '", p, "' (ortquant implements linger's luna_quant only)");
}

float scale_attr(const KernelInfo& info, const char* name) {
  const float s = info.attr_float(name);
  if (!(s > 0.f) || !std::isfinite(s)) throw_error("attribute '", name, "' must be a finite positive scale, got ", s);
  return s;
}

int bits_attr(const KernelInfo& info, const char* name, int dflt, int lo, int hi) {
  const int64_t b = dflt < 0 ? info.attr_int(name) : info.attr_int(name, dflt);
  if (b < lo || b > hi) throw_error("attribute '", name, "' must be between ", lo, " and ", hi, ", got ", b);
  return static_cast<int>(b);
}

ONNXTensorElementDataType int_dtype_for_bits(int bits) { return bits <= 8 ? kI8 : (bits <= 16 ? kI16 : kI32); }

int dtype_bits(ONNXTensorElementDataType t) {
  switch (t) {
    case kI8: return 8;
    case kI16: return 16;
    case kI32: return 32;
    default: return 0;
  }
}

void expect_output_dtype(const KernelInfo& info, size_t i, ONNXTensorElementDataType want, const std::string& why) {
  const ONNXTensorElementDataType got = info.output_dtype(i);
  if (got != want && got != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
    throw_error("output ", i, " is typed ", dtype_name(got), " in the graph but ", why, " needs ", dtype_name(want),
                " (ortquant sets it by type inference, which needs the input's shape to be known)");
}

void infer_bits_output(const InferContext& ctx, const char* attr, int dflt, bool float_if_absent) {
  const int64_t missing = -1000;
  const int64_t b = ctx.attr_int(attr, missing);
  ONNXTensorElementDataType t;
  if (b == missing) {
    t = float_if_absent ? kFloat : int_dtype_for_bits(dflt);
  } else {
    t = int_dtype_for_bits(static_cast<int>(b < 1 ? 8 : (b > 32 ? 32 : b)));
  }
  ctx.set_output_like(0, t, 0);
}

void infer_broadcast_i8(const InferContext& ctx) {
  InferContext::Dims a, b, out;
  if (!ctx.input_shape(0, &a) || !ctx.input_shape(1, &b)) return;
  const size_t rank = std::max(a.rank(), b.rank());
  out.dims.assign(rank, 1);
  out.sym.assign(rank, std::string());
  for (size_t k = 0; k < rank; ++k) {
    const bool ha = k < a.rank(), hb = k < b.rank();
    const int64_t da = ha ? a.dims[a.rank() - 1 - k] : 1, db = hb ? b.dims[b.rank() - 1 - k] : 1;
    const std::string sa = ha ? a.sym[a.rank() - 1 - k] : "", sb = hb ? b.sym[b.rank() - 1 - k] : "";
    int64_t d;
    std::string sym;
    if (da >= 0 && db >= 0) {
      if (da != db && da != 1 && db != 1) return;  // not broadcastable: the kernel reports it
      d = da == 1 ? db : da;
    } else if (da < 0 && db < 0) {
      d = -1;
      sym = sa == sb ? sa : InferContext::fresh_dim();
    } else {
      const int64_t s = da >= 0 ? da : db;
      if (s == 1) {
        d = -1;
        sym = da < 0 ? sa : sb;
      } else {
        d = s;
      }
    }
    out.dims[rank - 1 - k] = d;
    out.sym[rank - 1 - k] = sym;
  }
  ctx.set_output(0, kI8, out);
}

void infer_same_as_input0(const InferContext& ctx) {
  const ONNXTensorElementDataType t = ctx.input_dtype(0);
  if (t != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) ctx.set_output_like(0, t, 0);
}

}  // namespace ortquant::ort::lingerk
