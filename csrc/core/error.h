// Error type of the core library. Core functions throw ortquant::Error for invalid arguments; the ORT adapter
// catches every exception at the ABI boundary and turns it into an OrtStatus naming the op and the node.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ortquant {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Builds a message from streamable pieces: throw_error("bad axis ", axis, " for rank ", rank).
template <class... Args>
[[noreturn]] void throw_error(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

}  // namespace ortquant
