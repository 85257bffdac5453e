#include "core/memory_info.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace radixlm::core {
namespace {

// A number from the first line of a file, or -1 ("max" or unreadable).
int64_t ReadNumber(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s)) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  return end && *end == 0 && v >= 0 ? v : -1;
}

}  // namespace

int64_t AvailableMemoryBytes() {
  if (const char* env = std::getenv("RADIXLM_MEMORY_LIMIT_MB")) {
    char* end = nullptr;
    const double mb = std::strtod(env, &end);
    if (end != env && mb > 0) return static_cast<int64_t>(mb * 1048576.0);
  }
  int64_t avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kb) == 1) {
      avail = kb * 1024;
      break;
    }
  }
  // cgroup v2: what the group may still use.
  const int64_t max = ReadNumber("/sys/fs/cgroup/memory.max"), cur = ReadNumber("/sys/fs/cgroup/memory.current");
  if (max > 0 && cur >= 0) avail = avail < 0 ? max - cur : std::min(avail, max - cur);
  return avail;
}

std::string HumanBytes(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1048576.0) std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1048576.0));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / 1048576.0);
  return buf;
}

}  // namespace radixlm::core
