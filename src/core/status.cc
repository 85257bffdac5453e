#include "core/status.h"

namespace radixlm::core {

std::string Status::ToString() const {
  static const char* kNames[] = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "DATA_LOSS",
                                 "OUT_OF_RANGE", "UNIMPLEMENTED", "RESOURCE_EXHAUSTED",
                                 "INTERNAL", "IO_ERROR"};
  if (ok()) return "OK";
  return std::string(kNames[static_cast<int>(code_)]) + ": " + message_;
}

void CheckFailed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "radixlm: check failed at %s:%d: %s %s\n", file, line, expr, msg.c_str());
  std::abort();
}

}  // namespace radixlm::core
