// How much memory this process can still take: the kernel's MemAvailable, lowered by a cgroup
// (v2) limit when the process runs in one, or RADIXLM_MEMORY_LIMIT_MB when set (a container
// whose limit the process cannot see, or a test). Used to refuse a model or a KV pool that would
// not fit before loading it, instead of being killed by the OOM killer half-way.
#pragma once

#include <cstdint>
#include <string>

namespace radixlm::core {

// Bytes available; -1 when unknown (no /proc/meminfo).
int64_t AvailableMemoryBytes();
// "11.2 GiB", "640 MiB".
std::string HumanBytes(double bytes);

}  // namespace radixlm::core
