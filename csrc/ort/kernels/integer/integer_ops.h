// OpSpec factories of the integer-mode ops (domain ortquant.integer, docs/ops.md "Integer mode").
#pragma once
#include <string>

#include "core/integer/qlayer.h"
#include "ort/op.h"

namespace ortquant::ort {

OpSpec qconv_spec(const std::string& name);
// QConv whose output is the int8 codes of its out_act_* quantizer (the next QConv's input quantizer).
OpSpec qconv_codes_spec(const std::string& name);
// MaxPool over int8 codes with non-overlapping windows (kernel_shape == strides, no pads, floor rounding).
OpSpec maxpool_codes_spec(const std::string& name);
// AveragePool (no pads) / GlobalAveragePool over int8 codes, float32 out (the mean of the values they stand for).
OpSpec avgpool_codes_spec(const std::string& name);
// QGemm: X float32 values or int8 codes; QGemmCodes: its output as the int8 codes of its out_act_* quantizer.
OpSpec qgemm_spec(const std::string& name);
OpSpec qgemm_codes_spec(const std::string& name);
// A chain of the ops above in one node (chain.cc): QChain writes float32 values, QChainCodes int8 codes.
OpSpec qchain_spec(const std::string& name);
OpSpec qchain_codes_spec(const std::string& name);
// The float-exact backend (float_exact.cc).
OpSpec quant_codes_spec(const std::string& name);
OpSpec rescale_spec(const std::string& name);

// The act_* attributes (docs/ops.md "Integer mode") as the core's quantizer; throws naming a bad attribute.
// prefix "out_act_": QConv's output quantizer (the next QConv's act_*, written by transforms/integer_codes.py).
integer::ActQuant integer_act_quant(const KernelInfo& info, const std::string& prefix = "act_");

// act_check (a non-empty string naming a graph input and its declared type): the grid of input X is that
// declaration's promise, not a proven fact, so X's n values must lie on the quantizer's grid (integer::off_grid);
// otherwise throws naming the first value off it and the declaration. Nothing when `declared` is empty.
void check_on_grid(const std::string& declared, const integer::ActQuant& a, const float* x, int64_t n);

}  // namespace ortquant::ort
