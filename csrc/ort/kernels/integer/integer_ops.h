// OpSpec factories of the integer-mode ops (domain ortquant.integer, docs/ops.md "Integer mode").
#pragma once
#include <string>

#include "core/integer/qlayer.h"
#include "ort/op.h"

namespace ortquant::ort {

OpSpec qconv_spec(const std::string& name);
OpSpec qgemm_spec(const std::string& name);
// The float-exact backend (float_exact.cc).
OpSpec quant_codes_spec(const std::string& name);
OpSpec rescale_spec(const std::string& name);

// The act_* attributes (docs/ops.md "Integer mode") as the core's quantizer; throws naming a bad attribute.
integer::ActQuant integer_act_quant(const KernelInfo& info);

}  // namespace ortquant::ort
