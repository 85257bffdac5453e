// Chat templates (jinja/template.h): the Jinja engine that renders a model's own template, on
// any template text and any variables. The input is text: the template, a line "%%", then a
// JSON object of variables (when it is not one: {"messages": [...]} with a fixed conversation).
// A template from a model file or variables from a client must never crash, hang or exhaust
// memory: parse errors and render errors are fine; the render's bounds (RenderLimits, smaller
// here so the fuzzer sees them) must hold: the output is at most max_string bytes.
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find("\n%%\n");
  const std::string_view source = in.substr(0, split);
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (split != std::string_view::npos)
    vars = nlohmann::ordered_json::parse(in.substr(split + 4), nullptr, /*allow_exceptions=*/false);
  if (!vars.is_object())
    vars = nlohmann::ordered_json::parse(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <b>\"x\"</b>"}, {"role": "assistant", "content": "Hello",
      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
      {"role": "tool", "content": "{}"}], "tools": null, "add_generation_prompt": true, "bos_token": "<s>"})");
  auto t = radixlm::jinja::Template::Parse(source);
  if (!t.ok()) return 0;
  radixlm::jinja::RenderOptions options;
  options.now = 1736942400;
  options.limits.max_ops = 200000;
  options.limits.max_bytes = 4 << 20;
  options.limits.max_string = 1 << 20;
  auto out = t->Render(vars, options);
  if (out.ok() && out->size() > static_cast<size_t>(options.limits.max_string))
    radixlm::fuzz::Fail("a render's output exceeds its max_string bound");
  return 0;
}
