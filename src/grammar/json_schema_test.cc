// JSON Schema -> grammar: unit cases, then the JSONSchemaBench schemas (when shared data exists).
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {
namespace {

TEST(JsonSchemaTest, Placeholder) { EXPECT_TRUE(JsonSchemaToGbnf(R"({"type":"string"})").ok()); }

}  // namespace
}  // namespace radixlm::grammar
