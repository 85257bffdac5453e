#include "replay/workload.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace radixlm::replay {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ContentText(const json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string s;
  if (c.is_array())
    for (const json& part : c)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) s += part["text"].get<std::string>();
  return s;
}

core::StatusOr<std::vector<Conversation>> LoadMtBench(const std::string& data, int max_conv, int max_turns) {
  std::vector<Conversation> out;
  const std::string path = data + "/chat/mt_bench_questions.jsonl";
  std::ifstream in(path);
  if (!in) return core::NotFound(path + ": cannot open");
  int line_no = 0;
  for (std::string line; std::getline(in, line) && static_cast<int>(out.size()) < max_conv;) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, false);
    const bool ok = j.is_object() && j.contains("turns") && j["turns"].is_array() &&
                    std::all_of(j["turns"].begin(), j["turns"].end(), [](const json& t) { return t.is_string(); });
    if (!ok) return core::InvalidArgument(path + ":" + std::to_string(line_no) + ": expected {question_id, turns: [strings]}");
    const json& id = j.contains("question_id") ? j["question_id"] : json();
    Conversation c{"mtbench-" + (id.is_number_integer() ? std::to_string(id.get<int64_t>()) : std::to_string(line_no)), {}, true};
    for (const json& t : j["turns"])
      if (static_cast<int>(c.turns.size()) < max_turns) c.turns.push_back({{{"user", t.get<std::string>()}}});
    out.push_back(std::move(c));
  }
  return out;
}

core::StatusOr<std::vector<Conversation>> LoadSweAgent(const std::string& data, int max_conv, int max_turns) {
  std::vector<Conversation> out;
  std::vector<fs::path> files;
  const fs::path dir = fs::path(data) / "agents/swe_agent";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".traj") files.push_back(it->path());
  if (ec) return core::NotFound(dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    if (static_cast<int>(out.size()) >= max_conv) break;
    std::ifstream in(p);
    const json j = json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("history") || !j["history"].is_array() ||
        !std::all_of(j["history"].begin(), j["history"].end(), [](const json& m) { return m.is_object(); }))
      return core::InvalidArgument(p.string() + ": not a SWE-agent trajectory (expected a 'history' list of messages)");
    Conversation c{p.stem().string(), {}, false};
    std::vector<tokenizer::ChatMessage> history;
    for (const json& m : j["history"]) {
      const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "user";
      if (role == "assistant" && !history.empty()) c.turns.push_back({history, ContentText(m.value("content", json()))});
      history.push_back({role == "system" || role == "user" || role == "assistant" ? role : "tool", ContentText(m.value("content", json()))});
    }
    if (static_cast<int>(c.turns.size()) > max_turns) c.turns.resize(max_turns);
    out.push_back(std::move(c));
  }
  return out;
}

struct WorkloadRow {
  const char* name;
  core::StatusOr<std::vector<Conversation>> (*load)(const std::string& data, int max_conv, int max_turns);
};
// The workloads replay reads: a new one is a loader and a row.
constexpr WorkloadRow kWorkloadFiles[] = {{"mtbench", LoadMtBench}, {"swe-agent", LoadSweAgent}};

}  // namespace

core::StatusOr<std::vector<Conversation>> LoadWorkload(const std::string& name, const std::string& data, int max_conv, int max_turns) {
  std::string names;
  for (const WorkloadRow& row : kWorkloadFiles) {
    if (name == row.name) return row.load(data, max_conv, max_turns);
    names += std::string(names.empty() ? "" : ", ") + row.name;
  }
  return core::InvalidArgument("unknown workload '" + name + "' (" + names + ")");
}

void AddSystemPrompt(std::vector<Conversation>& convs, const std::string& prompt) {
  auto prepend = [&](std::vector<tokenizer::ChatMessage>& history) {
    if (history.empty() || history.front().role != "system") history.insert(history.begin(), {"system", prompt});
  };
  for (Conversation& c : convs) {
    if (c.turns.empty()) continue;
    if (c.model_answers_in_history) prepend(c.turns.front().history);  // later turns extend the first
    else
      for (Turn& t : c.turns) prepend(t.history);
  }
}

}  // namespace radixlm::replay
