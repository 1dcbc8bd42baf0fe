// A non-owning reference to a callable (as llvm::function_ref): two pointers, no allocation, for callbacks that are
// only called during the call that receives them (tasks of a parallel loop, sinks and sources of a kernel).
// It must not outlive the callable it was made from: bind it to a named callable, or pass a lambda directly as the
// argument (a temporary lives until the end of the full expression); never `FunctionRef<...> f = [&] {...};`.
#pragma once
#include <type_traits>
#include <utility>

namespace ortquant {

template <class Sig>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT: implicit, as std::function's
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace ortquant
