// The batch journal (journal.h): a job killed at any byte of its part, or between the steps of
// its finish, resumes to the output an uninterrupted run writes, every line exactly once.
#include "batch/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace radixlm::batch {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spill(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

class BatchJournal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("radixlm_journal_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    output_ = (dir_ / "out.jsonl").string();
    job_ = {Sha256Hex("the input"), 1700000000, {"a", "", "c", "d", "e"}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Line(int64_t i) const {
    nlohmann::json j = {{"id", "batch_req_" + std::to_string(i)}, {"custom_id", nullptr}, {"n", i}};
    if (!job_.custom_ids[i].empty()) j["custom_id"] = job_.custom_ids[i];
    return j.dump();
  }
  // Appends lines [from, to) to part `rank` (opened, so a partial last line is dropped first).
  void Answer(int rank, int64_t from, int64_t to) {
    auto part = BatchPart::Open(output_, rank, job_);
    ASSERT_TRUE(part.ok()) << part.status().message();
    for (int64_t i = from; i < to; ++i) ASSERT_TRUE((*part)->Append(i, Line(i)).ok());
  }
  // What a rerun does: resume, answer what is missing, merge.
  void Rerun() {
    BatchJobId id = job_;
    auto resume = ResumeJob(output_, &id);
    ASSERT_TRUE(resume.ok()) << resume.status().message();
    if (resume->finished) return;
    auto part = BatchPart::Open(output_, 0, id);
    ASSERT_TRUE(part.ok()) << part.status().message();
    for (int64_t i = 0; i < id.lines(); ++i) {
      if (!resume->done.count(i)) {
        ASSERT_TRUE((*part)->Append(i, Line(i)).ok());
      }
    }
    part->reset();
    ASSERT_TRUE(MergeParts(output_, id).ok());
  }
  std::string Uninterrupted() const {
    std::string all;
    for (int64_t i = 0; i < job_.lines(); ++i) all += Line(i) + "\n";
    return all;
  }

  fs::path dir_;
  std::string output_;
  BatchJobId job_;
};

TEST_F(BatchJournal, AKillAtEveryByteOfAPartResumesToTheSameOutput) {
  Answer(0, 0, job_.lines());
  const std::string part = Slurp(output_ + ".part.0");
  for (size_t cut = 0; cut <= part.size(); ++cut) {
    fs::remove(output_);
    fs::remove(output_ + ".journal");
    Spill(output_ + ".part.0", part.substr(0, cut));
    // The lines resumed are exactly the records complete before the cut.
    BatchJobId id = job_;
    auto resume = ResumeJob(output_, &id);
    ASSERT_TRUE(resume.ok()) << "cut " << cut << ": " << resume.status().message();
    const int64_t complete_lines = std::count(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(cut), '\n');
    EXPECT_EQ(static_cast<int64_t>(resume->done.size()), std::max<int64_t>(0, complete_lines - 1)) << "cut " << cut;
    Rerun();
    EXPECT_EQ(Slurp(output_), Uninterrupted()) << "cut " << cut;
    EXPECT_FALSE(fs::exists(output_ + ".part.0")) << "cut " << cut;
    EXPECT_TRUE(ResumeJob(output_, &id)->finished) << "cut " << cut;
  }
}

TEST_F(BatchJournal, AKillBetweenTheStepsOfTheFinishResumesToTheSameOutput) {
  // Two ranks' parts; the finish writes the output, then the journal, then removes the parts.
  Answer(0, 0, 2);
  Answer(1, 2, job_.lines());
  const std::string p0 = Slurp(output_ + ".part.0"), p1 = Slurp(output_ + ".part.1");
  auto restore_parts = [&] {
    Spill(output_ + ".part.0", p0);
    Spill(output_ + ".part.1", p1);
  };
  ASSERT_TRUE(MergeParts(output_, job_).ok());
  const std::string output = Slurp(output_), journal = Slurp(output_ + ".journal");
  EXPECT_EQ(output, Uninterrupted());
  // Killed after the output's temporary file, before its rename.
  fs::remove(output_);
  fs::remove(output_ + ".journal");
  restore_parts();
  Spill(output_ + ".tmp", output.substr(0, output.size() / 2));
  Rerun();
  EXPECT_EQ(Slurp(output_), output);
  // After the output, before the journal.
  fs::remove(output_ + ".journal");
  restore_parts();
  Rerun();
  EXPECT_EQ(Slurp(output_), output);
  EXPECT_EQ(Slurp(output_ + ".journal"), journal);
  // After the journal, before the parts went.
  restore_parts();
  Rerun();
  EXPECT_EQ(Slurp(output_), output);
  EXPECT_FALSE(fs::exists(output_ + ".part.1"));
}

TEST_F(BatchJournal, AFinishedOutputIsTrustedOnlyWhenItChecksOut) {
  Answer(0, 0, job_.lines());
  ASSERT_TRUE(MergeParts(output_, job_).ok());
  BatchJobId id = job_;
  EXPECT_TRUE(ResumeJob(output_, &id)->finished);
  std::string edited = Slurp(output_);
  edited[edited.find("\"n\":3") + 4] = '4';
  Spill(output_, edited);
  EXPECT_NE(ResumeJob(output_, &id).status().message().find("was changed after the job finished"), std::string::npos);
  BatchJobId other = job_;
  other.input_digest = Sha256Hex("another input");
  EXPECT_NE(ResumeJob(output_, &other).status().message().find("another input"), std::string::npos);
}

TEST_F(BatchJournal, MergeRefusesWhileLinesWait) {
  Answer(0, 0, 3);
  const core::Status s = MergeParts(output_, job_);
  EXPECT_NE(s.message().find("2 lines have no answer yet"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(output_));
}

TEST_F(BatchJournal, ASecondWriterOnAPartIsRefusedBeforeItWrites) {
  auto first = BatchPart::Open(output_, 0, job_);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Append(0, Line(0)).ok());
  const std::string before = Slurp(output_ + ".part.0");
  auto second = BatchPart::Open(output_, 0, job_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by another radixlm batch"), std::string::npos);
  EXPECT_EQ(Slurp(output_ + ".part.0"), before);
}

TEST_F(BatchJournal, DamagedEditedAndForeignRecordsAreNamedAndATwiceAnsweredLineKeepsItsFirst) {
  Answer(0, 0, 2);
  const std::string good = Slurp(output_ + ".part.0");
  BatchJobId id = job_;
  // A line answered twice (a copied part): the first record is kept.
  Spill(output_ + ".part.1", good);
  auto twice = ResumeJob(output_, &id);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->done.size(), 2u);
  fs::remove(output_ + ".part.1");
  // A record whose check fails names its file and line.
  std::string edited = good;
  edited[edited.rfind("\\\"n\\\":1") + 6] = '7';
  Spill(output_ + ".part.0", edited);
  const std::string msg = ResumeJob(output_, &id).status().message();
  EXPECT_NE(msg.find("out.jsonl.part.0:3: fails its check"), std::string::npos) << msg;
  // A part of another job.
  BatchJobId other = job_;
  other.input_digest = Sha256Hex("another input");
  Spill(output_ + ".part.0", good);
  EXPECT_NE(ResumeJob(output_, &other).status().message().find("another input"), std::string::npos);
}

}  // namespace
}  // namespace radixlm::batch
