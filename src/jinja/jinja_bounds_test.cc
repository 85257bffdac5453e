// Hostile templates and contexts (issue 45's probe): each once crashed the process (stack
// overflow, SIGFPE), ran until killed or took memory until the address-space cap. Each must now
// be a TemplateError (or the error Python raises) within bounded time and memory.
#include <gtest/gtest.h>

#include <chrono>

#include "jinja/template.h"

namespace radixlm::jinja {
namespace {

struct Outcome {
  bool ok;
  std::string text;  // the output, or "<kind>: <message>"
  double seconds;
};

Outcome Render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
               const RenderOptions& options = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o{false, "", 0};
  auto t = Template::Parse(src);
  if (!t.ok()) {
    o.text = t.status().message();
  } else {
    auto out = t->Render(vars, options);
    o.ok = out.ok();
    o.text = out.ok() ? *out : out.status().message();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

std::string Rep(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void ExpectRefused(const std::string& src, const std::string& kind_prefix,
                   const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(), const RenderOptions& options = {}) {
  const Outcome o = Render(src, vars, options);
  EXPECT_FALSE(o.ok) << src.substr(0, 80);
  EXPECT_EQ(o.text.rfind(kind_prefix, 0), 0u) << src.substr(0, 80) << " -> " << o.text.substr(0, 200);
  EXPECT_LT(o.seconds, 10.0) << src.substr(0, 80);
}

TEST(JinjaBounds, DeepSyntaxIsASyntaxErrorNotAStackOverflow) {
  ExpectRefused("{{ " + Rep("(", 100000) + "1" + Rep(")", 100000) + " }}", "TemplateSyntaxError");
  ExpectRefused("{{ " + Rep("[", 100000) + Rep("]", 100000) + " }}", "TemplateSyntaxError");
  ExpectRefused("{{ " + Rep("not ", 100000) + "1 }}", "TemplateSyntaxError");
  ExpectRefused("{{ " + Rep("- ", 100000) + "1 }}", "TemplateSyntaxError");
  ExpectRefused("{{ x" + Rep("|string", 100000) + " }}", "TemplateSyntaxError");
  ExpectRefused("{{ 1" + Rep(" ~ 1", 100000) + " }}", "TemplateSyntaxError");
  ExpectRefused(Rep("{% if 1 %}", 20000) + Rep("{% endif %}", 20000), "TemplateSyntaxError");
  ExpectRefused(Rep("{% for i in [1] %}", 20000) + Rep("{% endfor %}", 20000), "TemplateSyntaxError");
  // What real templates do stays well inside the bounds.
  EXPECT_EQ(Render(Rep("{% if 1 %}", 60) + "x" + Rep("{% endif %}", 60)).text, "x");
  EXPECT_EQ(Render("{{ " + Rep("(", 100) + "1" + Rep(")", 100) + " }}").text, "1");
}

TEST(JinjaBounds, RecursionAndLoopsEndAsTemplateErrors) {
  ExpectRefused("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "TemplateError");
  ExpectRefused("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "TemplateError");
  // Work without end: the operation budget (a smaller one here, to keep the test short; the
  // default of 20M operations ends the same templates in a few seconds).
  RenderOptions o;
  o.limits.max_ops = 1'000'000;
  ExpectRefused("{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}", "TemplateError",
                nlohmann::ordered_json::object(), o);
  ExpectRefused("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "TemplateError",
                nlohmann::ordered_json::object(), o);
}

TEST(JinjaBounds, IntegersAreCheckedNotWrappedOrTrapped) {
  ExpectRefused("{{ (-9223372036854775807 - 1) // -1 }}", "TemplateError");
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) % -1 }}").text, "0");
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }}").text, "True");
  ExpectRefused("{{ 9223372036854775807 + 1 }}", "TemplateError");
  ExpectRefused("{{ -9223372036854775807 - 2 }}", "TemplateError");
  ExpectRefused("{{ 4611686018427387904 * 2 }}", "TemplateError");
  ExpectRefused("{{ 2 ** 9223372036854775807 }}", "TemplateError");
  ExpectRefused("{{ -(-9223372036854775807 - 1) }}", "TemplateError");
  ExpectRefused("{{ (-9223372036854775807 - 1)|abs }}", "TemplateError");
  EXPECT_EQ(Render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 9223372036854775807 }} {{ -7 // 2 }} {{ 7 % -3 }}").text,
            "4611686018427387904 -9223372036854775808 1 -4 -2");
  EXPECT_EQ(Render("{% for i in range(9223372036854775800, 9223372036854775807, 5) %}{{ i }},{% endfor %}").text,
            "9223372036854775800,9223372036854775805,");
}

TEST(JinjaBounds, MemoryIsBoundedBeforeItIsAllocated) {
  ExpectRefused("{{ 'x' * 10**10 }}", "TemplateError");
  ExpectRefused("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
                "TemplateError");
  ExpectRefused("{{ 'a'|indent(1000000000) }}", "TemplateError");
  ExpectRefused("{{ 'ab\\ncd'|indent(1000000000.0|int, true) }}", "TemplateError");
  ExpectRefused("{{ ('x' * 1000000)|replace('x', 'y' * 1000000) }}", "TemplateError");
  ExpectRefused("{{ (['x' * 1000000] * 100000)|join }}", "TemplateError");
  ExpectRefused("{{ {'a': 1}|tojson(indent=1000000000) }}", "TemplateError");
  RenderOptions small;
  small.limits.max_string = 1000;
  auto t = Template::Parse("{% for i in range(200) %}{{ '0123456789' }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(nlohmann::ordered_json::object(), small).ok());  // the output counts
}

TEST(JinjaBounds, DeepValuesAreWalkedAndFreedWithoutRecursionLimits) {
  // A context nested deeper than any request may send (the server's parser stops at 128).
  // (nlohmann parses and frees it iteratively; copying it would recurse, so it goes in parsed.)
  const auto deep = nlohmann::ordered_json::parse("{\"x\": " + Rep("[", 100000) + Rep("]", 100000) + "}");
  ExpectRefused("{{ x|tojson }}", "TemplateError", deep);
  // Values nested by the template itself: printing them is bounded, freeing them iterative.
  ExpectRefused("{% set ns = namespace(v=[]) %}{% for i in range(50000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}",
                "TemplateError");
  EXPECT_TRUE(Render("{% set ns = namespace(v=[]) %}{% for i in range(50000) %}{% set ns.v = [ns.v] %}{% endfor %}ok").ok);
  EXPECT_TRUE(Render("{% set h = namespace(v=none) %}{% for i in range(50000) %}{% set n = namespace() %}"
                  "{% set n.x = h.v %}{% set h.v = n %}{% endfor %}ok").ok);
}

TEST(JinjaBounds, MissingFeaturesOfRealTemplates) {
  EXPECT_EQ(Render("{{ '{} and {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='n') }}").text,
            "a and 1|xyx|n!");
  EXPECT_EQ(Render("{{ '{:>5}|{:<4}|{:^7}|{:05d}|{:.2f}|{:,}|{:x}|{!r}'.format('ab', 'c', 'mid', 42, 3.14159, 1234567, 255, 'q') }}").text,
            "   ab|c   |  mid  |00042|3.14|1,234,567|ff|'q'");
  EXPECT_EQ(Render("{{ '{{literal}} {}'.format(1) }}").text, "{literal} 1");
  EXPECT_EQ(Render("{{ '{}'.format() }}").text.rfind("IndexError", 0), 0u);
  EXPECT_EQ(Render("{{ tools | selectattr('type', 'equalto', 'function') | list }}", {{"tools", nullptr}}).text, "[]");
  EXPECT_EQ(Render("{{ none | map(attribute='x') | list }}").text, "[]");
  EXPECT_EQ(Render("{{ '<a href=\"x\">&\\'</a>' | e }}|{{ '<b>' | escape }}").text, "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;|&lt;b&gt;");
}

}  // namespace
}  // namespace radixlm::jinja
