// Semantics of the Jinja engine on small templates, each expected output what python3-jinja2
// 3.1 prints in transformers' environment (trim_blocks, lstrip_blocks). The byte-for-byte
// comparison on the 16 real chat templates is tests/jinja_reference_test.py.
#include "jinja/template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace radixlm::jinja {
namespace {

std::string R(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  auto t = Template::Parse(src);
  if (!t.ok()) return "PARSE " + t.status().message();
  auto out = t->Render(vars);
  if (!out.ok()) return "ERR " + out.status().message();
  return *out;
}

TEST(Jinja, Scoping) {
  EXPECT_EQ(R("{% for i in [1,2,3] %}{% if i==1 %}{% set x = 5 %}{% endif %}{{ x }},{% endfor %}[{{x}}]"), "5,,,[]");
  EXPECT_EQ(R("{% set y = 1 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 2 %}{{ m() }}"), "2");
  EXPECT_EQ(R("{% macro m() %}{{ z }}{% endmacro %}{% for z in [7] %}{{ m() }}{% endfor %}"), "");
  EXPECT_EQ(R("{%- set ns = namespace(a=1) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns }}"),
            "4 <Namespace {'a': 4}>");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set x %}hi {{ a }}{% endset %}[{{ x }}]"), "12[hi 1]");
}

TEST(Jinja, Whitespace) {
  EXPECT_EQ(R("a\n  {# c #}\nb"), "a\nb");
  EXPECT_EQ(R("a  {% if 1 %}x{% endif %}  \n  {% if 1 %}\ny{% endif %}"), "a  x  \ny");
  EXPECT_EQ(R("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");
  EXPECT_EQ(R("x {%+ if 1 %}y{% endif +%}\nz"), "x y\nz");
  EXPECT_EQ(R("a \n {%- if 1 -%} \n b {% endif %}"), "ab ");
}

TEST(Jinja, PythonValues) {
  EXPECT_EQ(R("{{ [1,'a',None,True,1.5,{'k':\"it's\"}] }}"), "[1, 'a', None, True, 1.5, {'k': \"it's\"}]");
  EXPECT_EQ(R("{{ (1,2) }}{{ 1e-5 }} {{ 1e16 }} {{ 3/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**10 }}"),
            "(1, 2)1e-05 1e+16 1.5 2.0 3 2 1024");
  EXPECT_EQ(R("{{ 'é'|length }} {{ 'héllo'[1:3] }} {{ 'a,b'.split(',') }} {{ ' a  b '.split() }}"), "1 él ['a', 'b'] ['a', 'b']");
  EXPECT_EQ(R("{{ {'a':1}|items|list }} {{ {'a':1} | tojson }} {{ 'x' ~ 1 ~ none }}"), "[('a', 1)] {\"a\": 1} x1None");
  EXPECT_EQ(R("{{ none ~ '' }}{{ none }}{{ true }}{{ 1 == 1.0 }}{{ 'abc'[::-1] }}{{ [1,2][5] }}|"), "NoneNoneTrueTruecba|");
  EXPECT_EQ(R("{{ x|tojson(indent=2) }}", {{"x", {{"a", {1, 2}}, {"b", "é\n"}}}}), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"é\\n\"\n}");
  EXPECT_EQ(R("{{ '  x  '|trim }}|{{ 'xxaxx'.strip('x') }}|{{ 'a b'.title() }}|{{ [3,1]|sort }}"), "x|a|A B|[1, 3]");
}

TEST(Jinja, Undefined) {
  EXPECT_EQ(R("{{ u }}|{{ u|length }}|{{ u is iterable }}|{{ u is defined }}|{% for a in u %}x{% endfor %}|{{ u|default('d') }}"),
            "|0|True|False||d");
  EXPECT_EQ(R("{{ foo.bar }}"), "ERR UndefinedError: 'foo' is undefined");
  EXPECT_EQ(R("{{ d.bar.baz }}", {{"d", nlohmann::ordered_json::object()}}), "ERR UndefinedError: 'dict object' has no attribute 'bar'");
  EXPECT_EQ(R("{{ d.x + 1 }}", {{"d", nlohmann::ordered_json::object()}}), "ERR UndefinedError: 'dict object' has no attribute 'x'");
}

TEST(Jinja, Errors) {
  EXPECT_EQ(R("{{ 'a' < 1 }}"), "ERR TypeError: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(R("{{ 'a' + 1 }}"), "ERR TypeError: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(R("{{ raise_exception('Only user and assistant roles are supported!') }}"),
            "ERR TemplateError: Only user and assistant roles are supported!");
  EXPECT_EQ(R("{% for x in 5 %}{% endfor %}"), "ERR TypeError: 'int' object is not iterable");
  EXPECT_EQ(R("{% if x %}"), "PARSE TemplateSyntaxError: Unexpected end of template. Jinja was looking for: elif (line 1)");
  EXPECT_EQ(R("{% include 'x' %}").rfind("PARSE TemplateSyntaxError: Encountered unknown tag 'include'", 0), 0u);
  EXPECT_EQ(R("{{ [1].append(2) }}"), "ERR SecurityError: access to attribute 'append' of 'list' object is unsafe.");
}

TEST(Jinja, LoopAndFilters) {
  EXPECT_EQ(R("{% for a in [1,2] %}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem }}{{ loop.cycle('x','y') }}{% endfor %}"),
            "22x211y");
  EXPECT_EQ(R("{% for a in [1,2,3,4] if a is even %}{{ loop.index }}:{{ a }}{% if not loop.last %},{% endif %}{% endfor %}"), "1:2,2:4");
  EXPECT_EQ(R("{% for a in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for a in [1,2,3] %}{% if a == 2 %}{% continue %}{% endif %}{% if a == 3 %}{% break %}{% endif %}{{ a }}{% endfor %}"), "1");
  EXPECT_EQ(R("{{ m|selectattr('role','equalto','user')|list|length }}", {{"m", {{{"role", "user"}}, {{"role", "x"}}}}}), "1");
  EXPECT_EQ(R("{{ ['a','code_interpreter']|reject('equalto','code_interpreter')|join(', ') }}"), "a");
  EXPECT_EQ(R("{{ 'x' if false }}|{{ 'a' if 1 else 'b' }}|{{ [1,2,3][1:] }}|{{ 10 is divisibleby 5 }}"), "|a|[2, 3]|True");
}

// The cases fuzz/template_diff.py found (minimised), each with python3-jinja2's outcome in
// transformers' environment: the text, or the exception class (tests/data/README.md).
TEST(Jinja, FuzzerFindingsStayFixed) {
  const char* src = std::getenv("RADIXLM_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : ".") + "/tests/data/jinja_fuzz_findings.jsonl");
  ASSERT_TRUE(in) << "tests/data/jinja_fuzz_findings.jsonl (RADIXLM_SOURCE_DIR)";
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    const auto c = nlohmann::ordered_json::parse(line);
    nlohmann::ordered_json vars = {{"tools", nullptr}, {"documents", nullptr}};
    for (auto it = c["context"].begin(); it != c["context"].end(); ++it) vars[it.key()] = it.value();
    const std::string source = c["template"].get<std::string>();
    const std::string want = c["expected"][0].get<std::string>();
    auto t = Template::Parse(source);
    if (!t.ok()) {
      EXPECT_NE(want, "text") << source << "\n" << t.status().message();
      EXPECT_EQ(t.status().message().rfind(want + ":", 0), 0u) << source << "\n" << t.status().message();
      ++cases;
      continue;
    }
    JinjaError error;
    const auto out = t->Render(vars, {.now = 1736942400}, &error);
    if (want == "text") {
      EXPECT_TRUE(out.ok() && *out == c["expected"][1].get<std::string>()) << source << "\n" << (out.ok() ? *out : out.status().message());
    } else {
      EXPECT_FALSE(out.ok()) << source << " rendered " << (out.ok() ? *out : "");
      EXPECT_EQ(error.kind, want) << source << "\n" << error.message;
    }
    ++cases;
  }
  EXPECT_GT(cases, 100);
}

}  // namespace
}  // namespace radixlm::jinja
