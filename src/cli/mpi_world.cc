#include "cli/mpi_world.h"

#include <cstdlib>
#include <string>

#ifdef RADIXLM_HAVE_MPI
#include <mpi.h>
#endif

namespace radixlm::cli {
namespace {
int LauncherSize() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}
}  // namespace

MpiWorld::MpiWorld() {
  const int launched = LauncherSize();
  if (launched <= 0) return;
#ifdef RADIXLM_HAVE_MPI
  MPI_Init(nullptr, nullptr);
  initialised_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#else
  if (launched > 1)
    status_ = core::Status(core::StatusCode::kUnimplemented,
                           "this radixlm was built without MPI (install libopenmpi-dev and rebuild) but runs under a launcher with " +
                               std::to_string(launched) + " ranks");
#endif
}

MpiWorld::~MpiWorld() {
#ifdef RADIXLM_HAVE_MPI
  if (initialised_) MPI_Finalize();
#endif
}

void MpiWorld::Barrier() const {
#ifdef RADIXLM_HAVE_MPI
  if (initialised_) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

int64_t MpiWorld::Sum(int64_t x) const {
#ifdef RADIXLM_HAVE_MPI
  if (initialised_) {
    long long in = x, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
#endif
  return x;
}

double MpiWorld::Max(double x) const {
#ifdef RADIXLM_HAVE_MPI
  if (initialised_) {
    double out = 0;
    MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
#endif
  return x;
}

}  // namespace radixlm::cli
