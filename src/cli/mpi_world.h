// The MPI world `radixlm batch` runs in: rank and size, a barrier, and a sum. Under `mpirun`
// (Open MPI sets OMPI_COMM_WORLD_SIZE) MPI is initialised; a plain run is rank 0 of 1 and never
// touches MPI, so the command works the same without a launcher. Built without MPI, a run under
// mpirun with more than one rank is refused with a clear error.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace radixlm::cli {

class MpiWorld {
 public:
  MpiWorld();   // initialises MPI when launched by mpirun
  ~MpiWorld();  // finalises it
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  core::Status status() const { return status_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  void Barrier() const;
  int64_t Sum(int64_t x) const;
  double Max(double x) const;

 private:
  core::Status status_;
  int rank_ = 0, size_ = 1;
  bool initialised_ = false;
};

}  // namespace radixlm::cli
