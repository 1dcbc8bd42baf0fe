// Parameter inputs that are usually constant initializers (scales, zero points, bit widths, weights):
// captured and copied once at kernel creation when constant (decision 4), read from the context otherwise.
#pragma once
#include <optional>

#include "ort/op.h"

namespace ortquant::ort {

class ParamInput {
 public:
  ParamInput() = default;
  ParamInput(const KernelInfo& info, size_t index) : index_(index), present_(info.has_input(index)) {
    if (present_) value_ = info.constant_input(index);
  }
  bool present() const { return present_; }
  bool is_constant() const { return value_.has_value(); }
  // The captured constant (nullopt for a runtime input).
  std::optional<TensorView> constant() const {
    if (value_) return value_->view();
    return std::nullopt;
  }
  // The tensor for this call: the captured constant, or the runtime input (throws if absent).
  TensorView get(const KernelContext& ctx) const { return value_ ? value_->view() : ctx.required_input(index_); }
  std::optional<TensorView> get_optional(const KernelContext& ctx) const {
    if (value_) return value_->view();
    return ctx.input(index_);
  }

 private:
  size_t index_ = 0;
  bool present_ = false;
  std::optional<OwnedTensor> value_;
};

}  // namespace ortquant::ort
