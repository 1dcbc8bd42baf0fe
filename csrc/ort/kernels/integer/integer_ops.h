// OpSpec factories of the integer-mode ops (domain ortquant.integer, docs/ops.md "Integer mode").
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

OpSpec qconv_spec(const std::string& name);
OpSpec qgemm_spec(const std::string& name);

}  // namespace ortquant::ort
