// A test's scratch folder (models and tier tests): made fresh under /tmp, removed with all it
// holds when the object goes, so a fixture that holds one needs no SetUp / TearDown of its own.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace radixlm::core {

class TempDir {
 public:
  // A new folder /tmp/<prefix>_XXXXXX (mkdtemp's unique suffix).
  explicit TempDir(const std::string& prefix) : path_("/tmp/" + prefix + "_XXXXXX") {
    if (mkdtemp(path_.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << path_ << " failed";
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace radixlm::core
